//! Keys in a PKCS#11 token (`CUSTODY_INDEXER_SIGNER=pkcs11`; SoftHSM2, a
//! token of its own per test): `wallets list` names the token's keys, the
//! same each time the token is opened, made inside it unextractable (as
//! `pkcs11-tool` reads them); the stablecoin deployed on anvil and on the
//! local Solana network with every transaction signed in the token, its
//! minter the token's issuer; a mnemonic beside the token, a wrong PIN,
//! an unknown token and a label naming two keys refused with what to fix.

use std::process::Command;

use crate::common;

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol,
    sol_types::SolCall,
};
use common::{
    anvil::Anvil,
    chain_toml,
    cli::Env,
    softhsm::{PIN, Token, module},
    solana::SolanaNode,
};
use custody_indexer::{chain::Chain, config::ChainConfig};
use serde_json::Value;
use solana_pubkey::Pubkey;

sol! {
    function minter() returns (address);
}

fn run(command: &mut Command) -> (bool, String, String) {
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The minter of the USDC that `issuance deploy` printed the chain-file
/// lines of (`printed`), read on anvil.
async fn minter(anvil: &Anvil, toml: &str, printed: &str) -> Address {
    let config =
        ChainConfig::from_toml(&format!("{toml}\n{printed}"), std::path::Path::new("c.toml"), &|_| None)
            .unwrap();
    let coin: Address =
        config.assets.iter().find(|a| a.symbol == "USDC").unwrap().contract_address.parse().unwrap();
    let input = minterCall {}.abi_encode();
    let answer =
        anvil.provider.call(TransactionRequest::default().with_to(coin).with_input(input)).await.unwrap();
    minterCall::abi_decode_returns(&answer).unwrap()
}

fn deploy(env: &Env, token: &Token, chain: Chain) -> (bool, String, String) {
    let args = ["issuance", "deploy", "--chain", chain.as_str(), "--symbol", "USDC", "--decimals", "6"];
    run(token.signing(&mut env.command(&args)))
}

#[tokio::test]
async fn on_evm_the_token_signs_and_its_keys_never_leave_it() {
    let anvil = Anvil::start().await;
    let toml = chain_toml(&[anvil.url()], None, "");
    let env = Env::with_chain_file(&toml);
    let token = Token::new("evm-keys");

    let (ok, listed, err) = run(token.signing(&mut env.command(&["wallets", "list", "--json"])));
    assert!(ok, "{err}");
    let (_, again, _) = run(token.signing(&mut env.command(&["wallets", "list", "--json"])));
    assert_eq!(listed, again, "the keys are found again, not made anew");
    let wallets: Value = serde_json::from_str(&listed).unwrap();
    let address = |role: &str| -> Address { wallets[0][role].as_str().unwrap().parse().unwrap() };
    let (sponsor, issuer) = (address("sponsor"), address("issuer"));
    assert_ne!(sponsor, issuer);
    let keys = token.private_keys();
    for role in ["sponsor", "omnibus", "issuer", "settlement"] {
        assert!(keys.contains(&format!("custody-indexer:{role}:platform:evm")), "{keys}");
    }
    let guarded = keys
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Access:"))
        .filter(|access| access.trim().starts_with("sensitive") && access.contains("never extractable"))
        .count();
    assert_eq!(guarded, 4, "each key sensitive and never extractable: {keys}");

    // The deployment is signed in the token by the sponsor, and the
    // token's issuer alone mints.
    let _: Value = anvil
        .provider
        .raw_request("anvil_setBalance".into(), (sponsor, U256::from(10u128.pow(18))))
        .await
        .unwrap();
    let (ok, printed, err) = deploy(&env, &token, Chain::EthereumTestnet);
    assert!(ok, "{err}");
    let answer = minter(&anvil, &toml, &printed).await;
    assert_eq!(answer, issuer);
    assert_eq!(anvil.provider.get_transaction_count(sponsor).await.unwrap(), 1, "the sponsor sent it");

    // One key source only; a wrong PIN and an unknown token say what to fix.
    let mut mixed = env.command(&["wallets", "list"]);
    token
        .signing(&mut mixed)
        .env("CUSTODY_INDEXER_MNEMONIC", "test test test test test test test test test test test junk");
    let (ok, _, err) = run(&mut mixed);
    assert!(
        !ok && err.contains("CUSTODY_INDEXER_MNEMONIC") && err.contains("CUSTODY_INDEXER_SIGNER"),
        "{err}"
    );
    let wrong = token.dir.path().join("wrong");
    std::fs::write(&wrong, "0000").unwrap();
    let mut command = env.command(&["wallets", "list"]);
    token.signing(&mut command).env("CUSTODY_INDEXER_PKCS11_PIN_FILE", &wrong);
    let (ok, _, err) = run(&mut command);
    assert!(!ok && err.contains("refuses the PIN") && !err.contains("0000"), "{err}");
    let mut command = env.command(&["wallets", "list"]);
    token.signing(&mut command).env("CUSTODY_INDEXER_PKCS11_TOKEN", "nope");
    let (ok, _, err) = run(&mut command);
    assert!(!ok && err.contains("no token is labelled \"nope\""), "{err}");

    // A second key under a label (two processes making it at once) is
    // refused, never chosen between.
    let made = Command::new("pkcs11-tool")
        .args(["--module", &module(), "--token-label", &token.label, "--login", "--pin", PIN])
        .args([
            "--keypairgen",
            "--key-type",
            "EC:secp256k1",
            "--label",
            "custody-indexer:omnibus:platform:evm",
        ])
        .env("SOFTHSM2_CONF", token.conf())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let (ok, _, err) = run(token.signing(&mut env.command(&["wallets", "list"])));
    assert!(!ok && err.contains("names 2 private and 2 public keys"), "{err}");
}

/// The issuer's key in a token of its own (`CUSTODY_INDEXER_ISSUER_…`),
/// beside the service's in the same library: the issuer's key is made in
/// its token and no other, the sponsor's in the service's token, and the
/// stablecoin deployed by the sponsor is minted by the issuer's token alone.
#[tokio::test]
async fn the_issuer_signs_from_a_token_of_its_own() {
    let anvil = Anvil::start().await;
    let toml = chain_toml(&[anvil.url()], None, "");
    let env = Env::with_chain_file(&toml);
    let token = Token::new("service");
    token.add_token("issuer");
    let signing = |args: &[&str]| {
        let mut command = env.command(args);
        token.signing(&mut command).envs(token.issuer_vars("issuer"));
        command
    };
    let (ok, listed, err) = run(&mut signing(&["wallets", "list", "--json"]));
    assert!(ok, "{err}");
    let wallets: Value = serde_json::from_str(&listed).unwrap();
    let address = |role: &str| -> Address { wallets[0][role].as_str().unwrap().parse().unwrap() };
    let (sponsor, issuer) = (address("sponsor"), address("issuer"));
    let backend = wallets[0]["backend"].as_str().unwrap();
    assert!(
        backend.contains("\"service\"") && backend.contains("issuer's key: pkcs11 software token \"issuer\""),
        "{backend}"
    );
    let (service_keys, issuer_keys) = (token.private_keys(), token.private_keys_of("issuer"));
    assert!(
        !service_keys.contains("issuer") && service_keys.contains("sponsor:platform:evm"),
        "{service_keys}"
    );
    assert!(issuer_keys.contains("custody-indexer:issuer:platform:evm"), "{issuer_keys}");
    assert_eq!(issuer_keys.matches("label:").count(), 1, "the issuer's key alone: {issuer_keys}");

    let _: Value = anvil
        .provider
        .raw_request("anvil_setBalance".into(), (sponsor, U256::from(10u128.pow(18))))
        .await
        .unwrap();
    let deploy = ["issuance", "deploy", "--chain", "ETHEREUM_TESTNET", "--symbol", "USDC", "--decimals", "6"];
    let (ok, printed, err) = run(&mut signing(&deploy));
    assert!(ok, "{err}");
    let answer = minter(&anvil, &toml, &printed).await;
    assert_eq!(answer, issuer, "the issuer's token mints");

    // The issuer's own signer without the service's is refused.
    let mut alone = env.command(&["wallets", "list"]);
    alone.envs(token.issuer_vars("issuer")).env("SOFTHSM2_CONF", token.conf());
    alone.env_remove("CUSTODY_INDEXER_MNEMONIC").env_remove("CUSTODY_INDEXER_SIGNER");
    let (ok, _, err) = run(&mut alone);
    assert!(!ok && err.contains("CUSTODY_INDEXER_ISSUER_SIGNER"), "{err}");
}

#[tokio::test]
async fn on_solana_the_token_signs_with_ed25519() {
    let node = SolanaNode::start().await;
    let toml = format!(
        "chain = \"SOLANA_DEVNET\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\npoll_interval_ms = 200\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, node.url
    );
    let env = Env::with_chain_file(&toml);
    let token = Token::new("solana-keys");
    let (ok, listed, err) = run(token.signing(&mut env.command(&["wallets", "list", "--json"])));
    assert!(ok, "{err}");
    let wallets: Value = serde_json::from_str(&listed).unwrap();
    let key = |role: &str| -> Pubkey { wallets[0][role].as_str().unwrap().parse().unwrap() };
    let (sponsor, issuer) = (key("sponsor"), key("issuer"));
    assert!(token.private_keys().contains("custody-indexer:issuer:platform:solana"));
    let airdrop = node.rpc.request_airdrop(&sponsor, 10_000_000_000).await.unwrap();
    while !node.rpc.confirm_transaction(&airdrop).await.unwrap() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (ok, printed, err) = deploy(&env, &token, Chain::SolanaDevnet);
    assert!(ok, "{err}");
    let config =
        ChainConfig::from_toml(&format!("{toml}\n{printed}"), std::path::Path::new("c.toml"), &|_| None)
            .unwrap();
    let mint: Pubkey =
        config.assets.iter().find(|a| a.symbol == "USDC").unwrap().contract_address.parse().unwrap();
    let account = node.rpc.get_account(&mint).await.unwrap();
    // SPL Token's Mint: COption<Pubkey> authority first.
    assert_eq!(&account.data[0..4], &[1, 0, 0, 0], "a mint authority is set");
    assert_eq!(&account.data[4..36], issuer.as_ref(), "the token's issuer is the mint authority");
}
