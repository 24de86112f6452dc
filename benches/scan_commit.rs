//! The store's side of a backfill alone: ranges of decoded deposits, each
//! committed by `commit_scan` with its `deposit_v2` events, on SQLite and
//! PostgreSQL (`TEST_DATABASE_URL`), with no node beside it.
//!
//! The shape is the backfill benchmark's dense case: 220,000 deposits to
//! 1,000 watched accounts (50 token transfers and 5 native ones a block), in
//! ranges of about 5,000 deposits as a backfill sizes them. Prints, per
//! store, the seconds, deposits a second and the CPU seconds of this process
//! and of the PostgreSQL server: what a backfill's writes take from the
//! cores a node shares with it. Asserts nothing but that every deposit was
//! stored.
//!
//! `cargo bench --bench scan_commit` (`BENCH_DEPOSITS`, `BENCH_RANGE`,
//! `BENCH_ROUNDS`, `BENCH_STORE=sqlite|postgres`, `BENCH_ALL_NATIVE` change
//! it).

#[path = "../tests/common/mod.rs"]
mod common;

use std::{collections::HashMap, time::Instant};

use alloy::primitives::U256;
use common::{
    CHAIN,
    db::{BACKENDS, TestDb},
    procs::{cpu_seconds, postgres_cpu, postgres_cpu_between},
};
use custody_indexer::deposits::commit;
use custody_indexer::{
    account::AccountAddress,
    amount::Amount,
    deposits::resource::{Detected, Position, TokenTransfer},
    store::{CursorMove, NewAccount, ScanCommit},
};

/// The binary's allocator, so the commits allocate as a backfill's do.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ACCOUNTS: u64 = 1_000;
/// Transfers a block: the first `NATIVE` of them native, the rest tokens.
const PER_BLOCK: u64 = 55;
const NATIVE: u64 = 5;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn address(i: u64) -> String {
    format!("0x{:040x}", 0xa000_0000_0000u64 + i)
}

/// A pseudo-random 32-byte hash, different for every `i`: transaction
/// hashes land all over the natural key's index, as real ones do.
fn hash(i: u64) -> String {
    let mix = |x: u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31) ^ 0x5851_f42d_4c95_7f2d;
    format!("0x{:016x}{:016x}{:016x}{:016x}", mix(i), mix(i + 1), mix(i ^ 0xff), i)
}

/// `BENCH_ALL_NATIVE=1`: every deposit a native transfer, whose natural
/// key's position is `native` instead of a token transfer's hundred-odd
/// characters (`log:<symbol>:<from>:<to>:<amount>:<occurrence>`): what the
/// key's length costs the index it is unique in.
fn all_native() -> bool {
    std::env::var_os("BENCH_ALL_NATIVE").is_some()
}

/// The `i`-th transfer of the chain, as the decoder hands it to the store.
fn deposit(i: u64) -> Detected {
    let block = i / PER_BLOCK;
    let recipient = (i * 7919) % ACCOUNTS;
    let raw = 1_000_000 + i;
    let position = if i % PER_BLOCK < NATIVE || all_native() {
        Position::Native
    } else {
        Position::Log(TokenTransfer {
            symbol: "USDC".into(),
            from: address(10_000 + i % 97),
            to: address(recipient),
            raw: raw.to_string(),
            occurrence: 0,
        })
    };
    let native = matches!(position, Position::Native);
    Detected {
        chain: CHAIN,
        tx_hash: hash(i),
        position,
        block_number: block + 1,
        block_hash: hash(u64::MAX - block),
        block_time_ms: (1_700_000_000 + block * 2) * 1000,
        account_id: format!("acc-{recipient}"),
        account_address: address(recipient),
        source_address: address(10_000 + i % 97),
        source_account_id: None,
        currency_symbol: if native { "ETH".into() } else { "USDC".into() },
        amount: Amount::from_raw(U256::from(raw), if native { 18 } else { 6 }),
    }
}

/// One round on a fresh store: (seconds, CPU seconds of this process,
/// CPU seconds of the PostgreSQL server), of the commits alone.
async fn round(backend: common::db::Backend, total: u64, range: u64) -> (f64, f64, f64) {
    let db = TestDb::new(backend).await;
    common::numbered_identities(&db.store).await;
    let accounts: Vec<NewAccount> = (0..ACCOUNTS)
        .map(|i| {
            common::numbered_account(i, vec![AccountAddress { chains: vec![CHAIN], address: address(i) }])
        })
        .collect();
    custody_indexer::keys::accounts::add_accounts(&db.store, &accounts).await.unwrap();
    let blocks = total.div_ceil(PER_BLOCK);
    let per_range = range.div_ceil(PER_BLOCK);
    let (mut server_before, mut server) = (HashMap::new(), HashMap::new());
    postgres_cpu(&mut server_before);
    let (mut seconds, mut cpu) = (0.0, 0.0);
    for first in (0..blocks).step_by(per_range as usize) {
        let last = (first + per_range).min(blocks) - 1;
        let deposits = (first * PER_BLOCK..((last + 1) * PER_BLOCK).min(total)).map(deposit).collect();
        let scan = ScanCommit {
            chain: CHAIN,
            from: first + 1,
            to: last + 1,
            head: blocks + 100,
            blocks: Vec::new(),
            deposits,
            confirmed_through: Some(blocks + 1),
            cursor: CursorMove::Backfill,
            keep_blocks: 0,
        };
        let (started, before) = (Instant::now(), cpu_seconds(std::process::id()));
        commit::commit_scan(&db.store, &scan).await.unwrap();
        cpu += cpu_seconds(std::process::id()) - before;
        seconds += started.elapsed().as_secs_f64();
    }
    postgres_cpu(&mut server);
    let stored = db.store.deposits_on_chain(CHAIN).await.unwrap().len() as u64;
    assert_eq!(stored, total, "every deposit is stored");
    (seconds, cpu, postgres_cpu_between(&server_before, &server))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let total = env_or("BENCH_DEPOSITS", 220_000);
    let range = env_or("BENCH_RANGE", 5_000);
    let rounds = env_or("BENCH_ROUNDS", 3) as usize;
    let only = std::env::var("BENCH_STORE").unwrap_or_default().to_lowercase();
    println!(
        "scan commit: {total} deposits to {ACCOUNTS} accounts in ranges of about {range}, medians of {rounds}"
    );
    println!(
        "{:>10} | {:>9} | {:>10} | {:>9} | {:>12}",
        "store", "seconds", "deposits/s", "own CPU s", "server CPU s"
    );
    for backend in BACKENDS.into_iter().filter(|b| only.is_empty() || format!("{b:?}").to_lowercase() == only)
    {
        let mut runs = Vec::new();
        for _ in 0..rounds {
            let run = round(backend, total, range).await;
            eprintln!("round: {backend:?} {:.3} s, own {:.2} CPU s, server {:.2} CPU s", run.0, run.1, run.2);
            runs.push(run);
        }
        let seconds = median(runs.iter().map(|r| r.0).collect());
        let own = median(runs.iter().map(|r| r.1).collect());
        let server = median(runs.iter().map(|r| r.2).collect());
        let store = format!("{backend:?}");
        println!(
            "{store:>10} | {seconds:>9.3} | {:>10.0} | {own:>9.2} | {server:>12.2}",
            total as f64 / seconds
        );
    }
}
