//! Backfill throughput against anvil, next to the ceiling the RPC allows.
//!
//! Two cases, each on a chain generated on a local anvil and backfilled by
//! the real `custody-indexer backfill`:
//! - **sparse**: 2,000 blocks of 8 token and 2 native transfers to 10
//!   addresses, with 10, 100,000 and 1,000,000 watched addresses, on SQLite,
//!   beside a loop of the same JSON-RPC requests;
//! - **dense**: 4,000 blocks of 50 token and 5 native transfers to 1,000
//!   addresses, all watched, on SQLite and PostgreSQL (`TEST_DATABASE_URL`),
//!   with both `block_reads`, beside the ceiling of reading every log, block
//!   and receipt.
//!
//! Prints figures, and on stderr each round's CPU time of anvil and of the
//! backfill process; asserts nothing but that every transfer was found.
//!
//! `cargo bench --bench backfill` (`BENCH_CASE=sparse|dense`, `BENCH_BLOCKS`,
//! `BENCH_TOKEN_TRANSFERS`, `BENCH_NATIVE_TRANSFERS`, `BENCH_MAX_ADDRESSES`,
//! `BENCH_DENSE_BLOCKS`, `BENCH_ROUNDS` change it; `BENCH_STORE=sqlite|postgres`
//! runs the dense case on one store, `BENCH_READS=transactions|receipts` with
//! one way of reading blocks).

#[path = "../../tests/common/mod.rs"]
mod common;

mod ceiling;
mod chain;
mod run;

use std::time::Duration;

use chain::{Chain, Shape};
use common::db::{BACKENDS, Backend};

/// The sparse case's settings, which its loop of the same requests follows.
const BATCH: usize = 50;
const CONCURRENCY: usize = 4;
const RANGE: u64 = 100;
const SPARSE: &str = "max_block_range = 100\nbatch_size = 50\nconcurrency = 4\nconfirmation = { depth = 1 }";
/// The dense case's settings: the shipped chain files' range limit.
const DENSE: &str = "max_block_range = 500\nconfirmation = { depth = 1 }";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let case = std::env::var("BENCH_CASE").unwrap_or_default();
    assert!(["", "sparse", "dense"].contains(&case.as_str()), "BENCH_CASE is sparse or dense, not {case:?}");
    if case.is_empty() || case == "sparse" {
        sparse().await;
    }
    if case.is_empty() || case == "dense" {
        dense().await;
    }
}

/// Few deposits among many watched addresses, on SQLite, beside a loop of
/// the same requests.
async fn sparse() {
    let shape = Shape {
        blocks: env_or("BENCH_BLOCKS", 2_000),
        tokens: env_or("BENCH_TOKEN_TRANSFERS", 8),
        natives: env_or("BENCH_NATIVE_TRANSFERS", 2),
        recipients: 10,
    };
    let max_addresses = env_or("BENCH_MAX_ADDRESSES", 1_000_000);
    let rounds = env_or("BENCH_ROUNDS", 3) as usize;
    let chain = chain::generate(&shape).await;
    let dir = tempfile::tempdir().unwrap();
    let total_blocks = (chain.last + 1) as f64;
    println!("sparse: medians of {rounds} rounds; each round times the raw RPC loop, then the backfill");
    println!(
        "{:>10} | {:>8} | {:>8} | {:>9} | {:>10} | {:>8} | {:>8} | {:>7}",
        "watched", "raw s", "scan s", "blocks/s", "deposits/s", "vs raw", "peak MB", "setup s"
    );
    for watched in [10u64, 100_000, 1_000_000].into_iter().filter(|w| *w <= max_addresses) {
        let template = run::template(Backend::Sqlite, &chain, watched).await;
        let (raw, scan, peak) =
            measure(rounds, &chain, &template, dir.path(), SPARSE, || ceiling::same_requests(&chain)).await;
        println!(
            "{watched:>10} | {raw:>8.3} | {scan:>8.3} | {:>9.0} | {:>10.0} | {:>7.2}x | {peak:>8.1} | {:>7.1}",
            total_blocks / scan,
            chain.deposits as f64 / scan,
            raw / scan,
            template.setup_seconds,
        );
    }
}

/// Every transfer a deposit, on both stores, beside the ceiling of reading
/// everything the node holds.
async fn dense() {
    let shape =
        Shape { blocks: env_or("BENCH_DENSE_BLOCKS", 4_000), tokens: 50, natives: 5, recipients: 1_000 };
    let rounds = env_or("BENCH_ROUNDS", 3) as usize;
    let chain = chain::generate(&shape).await;
    if std::env::var_os("BENCH_COSTS").is_some() {
        ceiling::costs(&chain).await;
    }
    let dir = tempfile::tempdir().unwrap();
    println!("dense: medians of {rounds} rounds; each round times the ceiling, then the backfill");
    println!(
        "{:>10} | {:>12} | {:>9} | {:>10} | {:>10} | {:>10} | {:>8}",
        "store", "block_reads", "ceiling s", "backfill s", "÷ ceiling", "deposits/s", "peak MB"
    );
    let only = std::env::var("BENCH_STORE").unwrap_or_default().to_lowercase();
    let reads = std::env::var("BENCH_READS").unwrap_or_default().to_lowercase();
    for backend in BACKENDS.into_iter().filter(|b| only.is_empty() || format!("{b:?}").to_lowercase() == only)
    {
        let template = run::template(backend, &chain, shape.recipients).await;
        for how in ["transactions", "receipts"].into_iter().filter(|how| reads.is_empty() || reads == *how) {
            let settings = format!("{DENSE}\nblock_reads = {how:?}");
            let (ceiling, scan, peak) =
                measure(rounds, &chain, &template, dir.path(), &settings, || ceiling::everything(&chain))
                    .await;
            let store = format!("{backend:?}");
            println!(
                "{store:>10} | {how:>12} | {ceiling:>9.3} | {scan:>10.3} | {:>9.2}x | {:>10.0} | {peak:>8.1}",
                scan / ceiling,
                chain.deposits as f64 / scan,
            );
        }
    }
}

/// `rounds` rounds: the medians of the ceiling's and the backfill's seconds,
/// and the highest peak memory (MB).
async fn measure<F: Future<Output = Duration>>(
    rounds: usize,
    chain: &Chain,
    template: &run::Template,
    dir: &std::path::Path,
    settings: &str,
    ceiling: impl Fn() -> F,
) -> (f64, f64, f64) {
    let (mut ceilings, mut scans, mut peak) = (Vec::new(), Vec::new(), 0f64);
    for _ in 0..rounds {
        let (seconds, run) = round(chain, template, dir, settings, ceiling()).await;
        ceilings.push(seconds);
        scans.push(run.scan_seconds);
        peak = peak.max(run.peak_rss_mb);
    }
    (median(ceilings), median(scans), peak)
}

/// Times `ceiling`, then runs the backfill; prints where the 2 cores went
/// (the node serves both) on stderr.
async fn round(
    chain: &Chain,
    template: &run::Template,
    dir: &std::path::Path,
    settings: &str,
    ceiling: impl Future<Output = Duration>,
) -> (f64, run::Run) {
    let anvil = chain.anvil.pid();
    let before = run::cpu_seconds(anvil);
    let ceiling = ceiling.await.as_secs_f64();
    let mid = run::cpu_seconds(anvil);
    let run = run::backfill(chain, template, dir, settings).await;
    eprintln!(
        "round: ceiling {ceiling:.3} s (anvil {:.2} CPU s); backfill {:.3} s (anvil {:.2} CPU s, itself {:.2} CPU s, \
         PostgreSQL {:.2} CPU s)",
        mid - before,
        run.scan_seconds,
        run::cpu_seconds(anvil) - mid,
        run.cpu,
        run.postgres_cpu,
    );
    assert_eq!(run.found, chain.deposits, "every generated transfer is a deposit");
    (ceiling, run)
}
