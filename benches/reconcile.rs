//! `reconcile` of many addresses on anvil: balance reads, wall time and
//! reads per address, with and without Multicall3, and the CPU a pass
//! costs `run` at the defaults (one pass an hour).
//!
//! `BENCH_RECONCILE_ADDRESSES` (default 10,000) watched addresses, each
//! reconciled in ETH and TUSD; every hundredth received both. The store is
//! PostgreSQL at `TEST_DATABASE_URL` when it answers, else SQLite; the
//! reconciliation runs in-process through a proxy that counts requests.
//! Three passes: the first records every baseline (read at the watch
//! start), the second reads each balance on its own (no Multicall3 on the
//! chain), the third after Multicall3 is placed at its address, batched.
//! Reads are unpaced here; at `reconcile_max_rps` (20 by default) a pass
//! takes at least its requests / 20 seconds, printed beside. The CPU is
//! this process's (the reconciliation, the store on SQLite, and the
//! counting proxy, which `run` does not have) and PostgreSQL's; anvil's is
//! not counted. Prints figures; asserts nothing.
//!
//! `cargo bench --bench reconcile`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use alloy::primitives::{Address, U256};
use common::{
    Anvil,
    anvil::Mined,
    catch_up, chain_config,
    db::{Backend, TestDb},
    procs::{cpu_seconds, postgres_cpu, postgres_cpu_between},
    proxy,
};
use custody_indexer::{
    evm::{EvmWatcher, rpc::EvmRpc},
    reconcile::evm::{self, Ask},
};

/// `run`'s default pass period and request cap.
const PERIOD_SECS: f64 = 3600.0;
const MAX_RPS: f64 = 20.0;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn backend() -> Backend {
    match sqlx::PgPool::connect(&common::db::admin_url()).await {
        Ok(_) => Backend::Postgres,
        Err(_) => Backend::Sqlite,
    }
}

/// What one pass cost.
struct Pass {
    lines: usize,
    differ: usize,
    skipped: usize,
    seconds: f64,
    cpu: f64,
    balance_reads: usize,
    requests: usize,
}

async fn pass(
    store: &custody_indexer::store::Store,
    rpc: &EvmRpc,
    config: &custody_indexer::config::ChainConfig,
    counted: &proxy::FaultyRpc,
) -> Pass {
    counted.faults.calls.lock().unwrap().clear();
    let (mut before, mut after) = Default::default();
    postgres_cpu(&mut before);
    let (started, cpu) = (Instant::now(), cpu_seconds(std::process::id()));
    let report = evm::reconcile(store, rpc, config, &Ask::default()).await.expect("a reconciliation");
    let (seconds, cpu) = (started.elapsed().as_secs_f64(), cpu_seconds(std::process::id()) - cpu);
    postgres_cpu(&mut after);
    let cpu = cpu + postgres_cpu_between(&before, &after);
    let calls: Vec<String> = counted.faults.calls.lock().unwrap().iter().map(|(_, m)| m.clone()).collect();
    let balance_reads = calls.iter().filter(|m| *m == "eth_getBalance" || *m == "eth_call").count();
    Pass {
        lines: report.lines.len(),
        differ: report.lines.iter().filter(|l| l.difference != "0").count(),
        skipped: report.skipped.len(),
        seconds,
        cpu,
        balance_reads,
        requests: calls.len(),
    }
}

fn print(what: &str, addresses: u64, p: &Pass) {
    println!(
        "{what}: {} lines ({} differ, {} addresses skipped) in {:.1} s, {:.1} CPU s; {} balance reads \
         ({:.3} per address), {} requests in all (at least {:.0} s at {MAX_RPS} a second); \
         one such pass an hour is {:.3} % of a core",
        p.lines,
        p.differ,
        p.skipped,
        p.seconds,
        p.cpu,
        p.balance_reads,
        p.balance_reads as f64 / addresses as f64,
        p.requests,
        p.requests as f64 / MAX_RPS,
        100.0 * p.cpu / PERIOD_SECS,
    );
}

#[tokio::main]
async fn main() {
    let addresses = env_or("BENCH_RECONCILE_ADDRESSES", 10_000);
    let anvil = Anvil::start().await;
    let tusd = anvil.deploy_token("TUSD").await;
    let counted = proxy::start(anvil.url()).await;
    let backend = backend().await;
    let db = TestDb::new(backend).await;
    let store = &db.store;
    common::numbered_identities(store).await;
    let watched: Vec<Address> =
        (0..addresses).map(|i| Address::left_padding_from(&(1_000_000 + i).to_be_bytes())).collect();
    let setup = Instant::now();
    common::watch_numbered(store, &watched).await;
    let (funder, token) = (anvil.accounts[0], anvil.token(tusd));
    for address in watched.iter().step_by(100) {
        anvil.send_eth(funder, *address, U256::from(1_000u64)).await;
        token.mint(*address, U256::from(2_000_000u64)).from(anvil.accounts[5]).mined().await;
    }
    anvil.mine(10).await;
    let config = chain_config(std::slice::from_ref(&counted.url), Some(&tusd.to_string()), "");
    let mut watcher = EvmWatcher::connect(config.clone(), store.clone()).await.unwrap();
    catch_up(&mut watcher).await;
    eprintln!("{addresses} addresses on {backend:?}, set up in {:.1} s", setup.elapsed().as_secs_f64());
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);

    print(
        "first pass (every baseline read at its watch start)",
        addresses,
        &pass(store, &rpc, &config, &counted).await,
    );
    print("each balance on its own", addresses, &pass(store, &rpc, &config, &counted).await);
    anvil.place_multicall3().await;
    anvil.mine(10).await;
    catch_up(&mut watcher).await;
    print("batched through Multicall3", addresses, &pass(store, &rpc, &config, &counted).await);
}
