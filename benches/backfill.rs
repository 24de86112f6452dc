//! Backfill throughput against anvil, next to the ceiling the RPC allows.
//!
//! Generates a chain of blocks full of watched transfers on a local anvil,
//! then runs the real `custody-indexer backfill` over it with 10, 100,000 and
//! 1,000,000 watched addresses, and times a plain loop of the same JSON-RPC
//! requests. Prints figures, and on stderr each round's CPU time of anvil
//! and of the backfill process; asserts nothing.
//!
//! `cargo bench --bench backfill` (`BENCH_BLOCKS`, `BENCH_TOKEN_TRANSFERS`,
//! `BENCH_NATIVE_TRANSFERS`, `BENCH_MAX_ADDRESSES` change the size).

#[path = "../tests/common/mod.rs"]
mod common;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, B256, U256, keccak256},
    providers::Provider,
    rpc::{
        client::BatchRequest,
        types::{BlockNumberOrTag, Filter, TransactionRequest},
    },
    sol_types::{SolCall, SolEvent},
};
use common::{Anvil, CHAIN, anvil::TestToken, chains_dir};
use custody_indexer::{
    account::{AccountAddress, AccountType},
    store::{NewAccount, Store},
};
use futures::{StreamExt, stream};
use serde_json::value::RawValue;

const BATCH: usize = 50;
const CONCURRENCY: usize = 4;
const RANGE: u64 = 100;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn address(seed: u64) -> Address {
    Address::from_word(keccak256(seed.to_be_bytes()))
}

struct Chain {
    anvil: Anvil,
    token: Address,
    recipients: Vec<Address>,
    /// Native transfers: the transactions whose receipts a scan reads.
    native: Vec<(u64, B256)>,
    last: u64,
    deposits: u64,
}

async fn generate(blocks: u64, tokens_per_block: u64, natives_per_block: u64) -> Chain {
    let anvil = Anvil::start_with(&["--gas-limit", "100000000", "--disable-code-size-limit"]).await;
    let (whale, sender) = (anvil.accounts[0], anvil.accounts[1]);
    let token = anvil.deploy_token("TUSD").await;
    let instance = anvil.token(token);
    instance.mint(whale, U256::MAX >> 1).from(whale).send().await.unwrap().get_receipt().await.unwrap();
    let recipients: Vec<Address> = (0..10).map(address).collect();
    let client = anvil.provider.client();
    client.request::<_, ()>("evm_setAutomine", (false,)).await.unwrap();
    let first = anvil.head().await + 1;
    let mut native = Vec::new();
    let started = Instant::now();
    for n in 0..blocks {
        let mut batch = BatchRequest::new(client);
        let mut waiters = Vec::new();
        let mut token_waiters = Vec::new();
        for i in 0..tokens_per_block {
            let to = recipients[((n + i) % 10) as usize];
            let data = TestToken::transferCall { to, value: U256::from(1_000 + i) }.abi_encode();
            let tx = TransactionRequest::default()
                .with_from(whale)
                .with_to(token)
                .with_input(data)
                .with_gas_limit(80_000);
            token_waiters.push(batch.add_call::<_, B256>("eth_sendTransaction", &(tx,)).unwrap());
        }
        for i in 0..natives_per_block {
            let to = recipients[((n + i + 5) % 10) as usize];
            let tx = TransactionRequest::default()
                .with_from(sender)
                .with_to(to)
                .with_value(U256::from(7 + i))
                .with_gas_limit(21_000);
            waiters.push(batch.add_call::<_, B256>("eth_sendTransaction", &(tx,)).unwrap());
        }
        batch.send().await.unwrap();
        for waiter in token_waiters {
            waiter.await.unwrap();
        }
        for waiter in waiters {
            native.push((first + n, waiter.await.unwrap()));
        }
        client.request::<_, String>("evm_mine", ()).await.unwrap();
    }
    client.request::<_, ()>("evm_setAutomine", (true,)).await.unwrap();
    anvil.mine(2).await;
    let last = first + blocks - 1;
    let deposits = blocks * (tokens_per_block + natives_per_block);
    println!(
        "generated {blocks} blocks ({first}..={last}) with {deposits} transfers to 10 addresses in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Chain { anvil, token, recipients, native, last, deposits }
}

/// The same requests a backfill makes, with nothing decoded or stored.
async fn raw_loop(chain: &Chain) -> Duration {
    let client = chain.anvil.provider.client();
    let started = Instant::now();
    let mut start = 0;
    while start <= chain.last {
        let end = chain.last.min(start + RANGE - 1);
        let numbers: Vec<u64> = (start..=end).collect();
        let blocks = numbers.chunks(BATCH).map(|chunk| async move {
            let mut batch = BatchRequest::new(client);
            let waiters: Vec<_> = chunk
                .iter()
                .map(|n| {
                    batch
                        .add_call::<_, Box<RawValue>>(
                            "eth_getBlockByNumber",
                            &(BlockNumberOrTag::Number(*n), true),
                        )
                        .unwrap()
                })
                .collect();
            batch.send().await.unwrap();
            for waiter in waiters {
                waiter.await.unwrap();
            }
        });
        let blocks = stream::iter(blocks.collect::<Vec<_>>()).buffered(CONCURRENCY).collect::<Vec<_>>();
        let filter = Filter::new()
            .from_block(start)
            .to_block(end)
            .address(chain.token)
            .event_signature(TestToken::Transfer::SIGNATURE_HASH);
        let logs = client.request::<_, Box<RawValue>>("eth_getLogs", (filter,));
        let (_, logs) = tokio::join!(blocks, logs);
        logs.unwrap();
        let receipts: Vec<B256> =
            chain.native.iter().filter(|(n, _)| (start..=end).contains(n)).map(|(_, h)| *h).collect();
        for chunk in receipts.chunks(BATCH) {
            let mut batch = BatchRequest::new(client);
            let waiters: Vec<_> = chunk
                .iter()
                .map(|h| batch.add_call::<_, Box<RawValue>>("eth_getTransactionReceipt", &(h,)).unwrap())
                .collect();
            batch.send().await.unwrap();
            for waiter in waiters {
                waiter.await.unwrap();
            }
        }
        start = end + 1;
    }
    started.elapsed()
}

struct Run {
    scan_seconds: f64,
    found: u64,
    peak_rss_mb: f64,
    /// CPU seconds of the backfill process (its whole run, setup included).
    cpu: f64,
}

/// A store holding `watched` accounts, the 10 recipients among them.
async fn prepare_store(chain: &Chain, watched: u64, path: &std::path::Path) -> f64 {
    let store =
        common::db::unlocked(&Store::open(&format!("sqlite://{}", path.display())).await.unwrap()).await;
    let setup = Instant::now();
    let accounts: Vec<NewAccount> = (0..watched)
        .map(|i| {
            let address = if i < 10 { chain.recipients[i as usize] } else { address(1_000_000 + i) };
            NewAccount {
                watch_from: Default::default(),
                id: format!("acc-{i}"),
                organization: "default".into(),
                identity_id: format!("identity-{}", i % 100),
                kind: AccountType::Segregated,
                request_id: None,
                addresses: vec![AccountAddress { chains: vec![CHAIN], address: address.to_string() }],
            }
        })
        .collect();
    for i in 0..100 {
        common::identity(&store, "default", &format!("identity-{i}")).await;
    }
    for chunk in accounts.chunks(100_000) {
        store.add_accounts(chunk).await.unwrap();
    }
    // Closing the last connection checkpoints the WAL into the file.
    store.close().await;
    setup.elapsed().as_secs_f64()
}

/// Runs the real binary's backfill over the whole chain on a copy of `template`.
async fn backfill(chain: &Chain, template: &std::path::Path, dir: &std::path::Path) -> Run {
    let db = dir.join("round.db");
    std::fs::copy(template, &db).unwrap();
    let url = format!("sqlite://{}", db.display());
    let extra = format!(
        "max_block_range = {RANGE}\nbatch_size = {BATCH}\nconcurrency = {CONCURRENCY}\nconfirmation = {{ depth = 1 }}"
    );
    let chains = chains_dir(dir, &[chain.anvil.url()], Some(&chain.token.to_checksum(None)), &extra);
    let mut child = Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
        .args(["backfill", "--chain", CHAIN.as_str(), "--from", "0", "--to", &chain.last.to_string()])
        .env("DATABASE_URL", &url)
        .env("CUSTODY_INDEXER_CHAINS", &chains)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    let mut cpu = 0f64;
    while child.try_wait().unwrap().is_none() {
        cpu = cpu.max(cpu_seconds(child.id()));
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(line) = status.lines().find(|l| l.starts_with("VmHWM:"))
        {
            peak_kb = peak_kb.max(line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let line = String::from_utf8(output.stdout).unwrap();
    // "… (N blocks in S s, R blocks/s): D deposits found, …"
    let scan_seconds: f64 =
        line.split(" blocks in ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    let found: u64 = line.split("): ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    Run { scan_seconds, found, peak_rss_mb: peak_kb as f64 / 1024.0, cpu }
}

/// CPU seconds (user + system) process `pid` has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: u64 = fields.get(11..13).map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    ticks as f64 / 100.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let blocks = env_or("BENCH_BLOCKS", 2_000);
    let tokens = env_or("BENCH_TOKEN_TRANSFERS", 8);
    let natives = env_or("BENCH_NATIVE_TRANSFERS", 2);
    let max_addresses = env_or("BENCH_MAX_ADDRESSES", 1_000_000);
    let rounds = env_or("BENCH_ROUNDS", 3) as usize;
    let chain = generate(blocks, tokens, natives).await;
    let dir = tempfile::tempdir().unwrap();
    let total_blocks = (chain.last + 1) as f64;
    println!("medians of {rounds} rounds; each round times the raw RPC loop, then the backfill");
    println!(
        "{:>10} | {:>8} | {:>8} | {:>9} | {:>10} | {:>8} | {:>8} | {:>7}",
        "watched", "raw s", "scan s", "blocks/s", "deposits/s", "vs raw", "peak MB", "setup s"
    );
    for watched in [10u64, 100_000, 1_000_000].into_iter().filter(|w| *w <= max_addresses) {
        let template = dir.path().join(format!("accounts-{watched}.db"));
        let setup = prepare_store(&chain, watched, &template).await;
        let (mut raw, mut scan, mut peak) = (Vec::new(), Vec::new(), 0f64);
        for _ in 0..rounds {
            let anvil = chain.anvil.pid();
            let before = cpu_seconds(anvil);
            raw.push(raw_loop(&chain).await.as_secs_f64());
            let mid = cpu_seconds(anvil);
            let run = backfill(&chain, &template, dir.path()).await;
            // Where the 2 cores went: the node serves both the same requests.
            eprintln!(
                "round: raw loop {:.3} s (anvil {:.2} CPU s); backfill {:.3} s (anvil {:.2} CPU s, itself {:.2} CPU s)",
                raw.last().unwrap(),
                mid - before,
                run.scan_seconds,
                cpu_seconds(anvil) - mid,
                run.cpu,
            );
            assert_eq!(run.found, chain.deposits, "every generated transfer is a deposit");
            scan.push(run.scan_seconds);
            peak = peak.max(run.peak_rss_mb);
        }
        let (raw, scan) = (median(raw), median(scan));
        println!(
            "{watched:>10} | {raw:>8.3} | {scan:>8.3} | {:>9.0} | {:>10.0} | {:>7.2}x | {peak:>8.1} | {setup:>7.1}",
            total_blocks / scan,
            chain.deposits as f64 / scan,
            raw / scan,
        );
    }
}
