//! Signatures a second through each key backend, as the service makes
//! them: through the guard that verifies every signature before it may be
//! sent (an EVM signature recovered to its key's address, an Ed25519 one
//! checked against its key), one after another as one sender does.
//!
//! `BENCH_SIGNATURES` (default 500) EVM digests and as many Solana
//! messages, over 10 account keys, with the mnemonic (`local`) and with
//! a SoftHSM2 token (`pkcs11`; the bench runs itself again with
//! `SOFTHSM2_CONF` naming a token of its own, made with `softhsm2-util`).
//! Prints figures; asserts nothing.
//!
//! `cargo bench --bench signing`

#[path = "../tests/common/mod.rs"]
mod common;

use std::{sync::Arc, time::Instant};

use alloy::primitives::B256;
use custody_indexer::keys::{
    KeyRef, MnemonicSigner, Signer,
    guard::Guarded,
    pkcs11::{Pkcs11Signer, TokenSettings},
};

const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
/// Set in the run of the bench that opens the token.
const CHILD: &str = "BENCH_SIGNING_TOKEN";

fn signatures() -> u32 {
    std::env::var("BENCH_SIGNATURES").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

/// Signs `n` EVM digests and `n` Solana messages; prints the rates.
async fn measure(name: &str, signer: Arc<dyn Signer>, n: u32) {
    let guarded = Guarded::new(signer, u32::MAX);
    let key = |i: u32| KeyRef::Account(2 + i % 10);
    // Every key found (or made) once before the clock starts.
    for i in 0..10 {
        guarded.evm_address(key(i)).unwrap();
        guarded.solana_address(key(i)).unwrap();
    }
    let started = Instant::now();
    for i in 0..n {
        guarded.sign_evm_hash(key(i), B256::repeat_byte(i as u8)).await.unwrap();
    }
    let evm = f64::from(n) / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for i in 0..n {
        guarded.sign_solana(key(i), format!("message {i}").into_bytes()).await.unwrap();
    }
    let solana = f64::from(n) / started.elapsed().as_secs_f64();
    println!("| {name} | {n} | {evm:.0} | {solana:.0} |");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n = signatures();
    if let Ok(label) = std::env::var(CHILD) {
        let settings = TokenSettings::from_env().unwrap();
        assert_eq!(settings.token, label);
        measure("pkcs11 (SoftHSM2)", Arc::new(Pkcs11Signer::open(&settings).unwrap()), n).await;
        return;
    }
    println!("| backend | signatures | EVM (secp256k1) per second | Solana (Ed25519) per second |");
    println!("|---|---:|---:|---:|");
    measure("local (mnemonic)", Arc::new(MnemonicSigner::from_phrase(MNEMONIC).unwrap()), n).await;
    let token = common::softhsm::Token::new("bench");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .envs(token.vars())
        .env(CHILD, &token.label)
        .status()
        .unwrap();
    assert!(status.success(), "the token's run failed");
}
