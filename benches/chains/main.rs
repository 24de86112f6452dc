//! Every shipped chain followed at once: the CPU and memory of one `run`.
//!
//! One `run` of the real binary follows all ten chain files compiled into
//! it, pointed at local nodes by `<CHAIN>_RPC_URLS` (and `<CHAIN>_GENESIS_HASH`
//! on Solana): an anvil per EVM chain with the chain's id, and the local
//! Solana network per Solana chain with 400 ms slots. Block rates: the
//! `mainnet` profile gives each chain its mainnet rate (Ethereum 12 s,
//! Polygon and Optimism 2 s, Base 200 ms since its Denim upgrade, each
//! testnet as its mainnet); the `fast` profile runs Optimism at 250 ms
//! too, and the `before-denim` one Base at its former 2 s.
//!
//! The store watches 10,000 accounts (`BENCH_ACCOUNTS`), each with an EVM
//! address on the eight EVM chains and a wallet on both Solana chains, and
//! one webhook of their organization takes every event. Every EVM block
//! carries a `batchTransfer` of 20 token transfers (5 to watched addresses)
//! and 8 native transfers (2 to watched addresses), each from its own sender; every Solana slot a
//! transaction of 8 SOL transfers (4 to watched wallets). The local nodes'
//! blocks hold only these: a mainnet block holds far more transactions
//! that are not deposits (`cargo bench --bench solana` decodes real ones).
//!
//! After `/readyz` answers 200 and a warm-up of 10 s, the CPU and memory of
//! `run` are read over `BENCH_SECONDS` (60); the nodes' and PostgreSQL's CPU
//! beside it, and each chain's lag (read from what its watcher records for
//! `health`, with the block time it measured). Then the load stops and every
//! transfer to a watched address must be recorded as a deposit. Prints
//! figures; asserts only that nothing was missed.
//! `BENCH_PROFILE=mainnet|fast|before-denim` and `BENCH_STORE=sqlite|postgres`
//! run one of each.
//!
//! `cargo bench --bench chains`

#[path = "../../tests/common/mod.rs"]
mod common;

mod lag;
mod load;
mod missing;
mod nodes;
mod sample;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use alloy::primitives::{Address, keccak256};
use common::{
    db::{BACKENDS, Backend, TestDb},
    receiver::Receiver,
};
use custody_indexer::{
    account::AccountAddress,
    chain::{Chain, Family},
    config::Chains,
    events::signing::Secret,
    store::{NewAccount, Store},
};
use load::Shape;
use nodes::{EvmNode, Nodes, Profile};
use solana_pubkey::Pubkey;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SHAPE: Shape =
    Shape { tokens: 20, watched_tokens: 5, natives: 8, watched_natives: 2, sol: 8, watched_sol: 4 };

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn chosen<T: Copy>(name: &str, all: &[T], label: impl Fn(T) -> String) -> Vec<T> {
    let wanted = std::env::var(name).unwrap_or_default().to_lowercase();
    let picked: Vec<T> = all.iter().copied().filter(|v| wanted.is_empty() || label(*v) == wanted).collect();
    assert!(!picked.is_empty(), "{name} names none of the choices: {wanted:?}");
    picked
}

#[tokio::main]
async fn main() {
    let chains = Chains::load(None).expect("the shipped chain files");
    let accounts = env_or("BENCH_ACCOUNTS", 10_000);
    let seconds = env_or("BENCH_SECONDS", 60);
    println!(
        "ten chains, {accounts} watched accounts, {seconds} s measured after 10 s of warm-up; CPU in % of one core (2 cores: 200%)"
    );
    println!(
        "{:>8} | {:>10} | {:>7} | {:>8} | {:>8} | {:>10} | {:>9} | {:>7} | {:>10}",
        "profile", "store", "run CPU", "RSS MB", "peak MB", "deposits/s", "delivered", "nodes", "PostgreSQL"
    );
    for profile in chosen("BENCH_PROFILE", &Profile::ALL, |p| p.name().into()) {
        for backend in chosen("BENCH_STORE", &BACKENDS, |b| format!("{b:?}").to_lowercase()) {
            round(&chains, profile, backend, accounts, Duration::from_secs(seconds)).await;
        }
    }
}

/// Watched addresses: an EVM address and a Solana wallet per account.
struct Watched {
    evm: Arc<Vec<Address>>,
    solana: Arc<Vec<Pubkey>>,
}

async fn register(store: &Store, chains: &Chains, accounts: u64) -> Watched {
    let of = |family| chains.iter().filter(|c| c.family() == family).map(|c| c.chain).collect::<Vec<_>>();
    let (evm_chains, solana_chains) = (of(Family::Evm), of(Family::Solana));
    let evm: Vec<Address> = (0..accounts).map(|i| Address::from_word(keccak256(i.to_be_bytes()))).collect();
    let solana: Vec<Pubkey> =
        (0..accounts).map(|i| Pubkey::new_from_array(keccak256(((i + 1) << 40).to_be_bytes()).0)).collect();
    common::numbered_identities(store).await;
    let new: Vec<NewAccount> = (0..accounts)
        .map(|i| {
            let (evm, solana) = (evm[i as usize].to_string(), solana[i as usize].to_string());
            let addresses = vec![
                AccountAddress { chains: evm_chains.clone(), address: evm },
                AccountAddress { chains: solana_chains.clone(), address: solana },
            ];
            common::numbered_account(i, addresses)
        })
        .collect();
    for chunk in new.chunks(10_000) {
        custody_indexer::keys::accounts::add_accounts(store, chunk).await.unwrap();
    }
    Watched { evm: Arc::new(evm), solana: Arc::new(solana) }
}

/// Deposits recorded per chain, whatever their status.
async fn deposits(store: &Store) -> BTreeMap<Chain, u64> {
    let mut counts = BTreeMap::new();
    for row in store.deposit_counts().await.unwrap() {
        *counts.entry(row.chain).or_default() += row.count;
    }
    counts
}

type Loads = Vec<(Chain, JoinHandle<u64>)>;

/// Starts each chain's load until `stop`; returns the EVM nodes too, to
/// explain a miss.
fn start_loads(nodes: Nodes, watched: &Watched, stop: &CancellationToken) -> (Vec<Arc<EvmNode>>, Loads) {
    let evm_nodes: Vec<Arc<EvmNode>> = nodes.evm.into_iter().map(Arc::new).collect();
    let mut loads = Loads::new();
    for node in &evm_nodes {
        let load = load::evm(node.clone(), watched.evm.clone(), SHAPE, stop.clone());
        loads.push((node.chain, tokio::spawn(load)));
    }
    for chain in nodes.solana.into_iter().map(Arc::new) {
        let load = load::solana(chain.clone(), watched.solana.clone(), SHAPE, stop.clone());
        loads.push((chain.chain, tokio::spawn(load)));
    }
    (evm_nodes, loads)
}

async fn round(chains: &Chains, profile: Profile, backend: Backend, accounts: u64, window: Duration) {
    let nodes = Nodes::start(chains, profile).await;
    let db = TestDb::new(backend).await;
    let watched = register(&db.store, chains, accounts).await;
    let receiver = Receiver::start().await;
    let secret = Secret::generate();
    let system = custody_indexer::audit::Actor::System;
    custody_indexer::webhooks::register(
        &db.store,
        "default",
        (&receiver.url, "bench"),
        secret.expose(),
        &system,
    )
    .await
    .unwrap();
    let (overrides, pids) = (nodes.overrides(), nodes.pids());
    let mut run = sample::Run::spawn(&db.url, &overrides);
    run.wait_ready(Duration::from_secs(180)).await;
    let stop = CancellationToken::new();
    let (evm_nodes, loads) = start_loads(nodes, &watched, &stop);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = deposits(&db.store).await.values().sum::<u64>();
    let (figures, lags) = tokio::join!(run.measure(window, &pids), lag::watch(&db.store, window, &evm_nodes));
    let found = deposits(&db.store).await.values().sum::<u64>() - before;
    stop.cancel();
    let mut sent = BTreeMap::new();
    for (chain, load) in loads {
        sent.insert(chain, load.await.unwrap());
    }
    let recorded = all_recorded(&db.store, &sent).await;
    let ready = run.ready().await;
    assert!(run.stop(), "run stopped during the bench");
    if recorded != sent {
        missing::health(&db.store, &recorded, &sent).await;
        for node in evm_nodes.iter().filter(|n| recorded.get(&n.chain) != sent.get(&n.chain)) {
            missing::blocks(&db.url, node).await;
        }
    }
    assert_eq!(
        recorded, sent,
        "every transfer to a watched address is a deposit (left: recorded, right: sent)"
    );
    println!(
        "{:>8} | {:>10} | {:>6.1}% | {:>8.1} | {:>8.1} | {:>10.1} | {:>9} | {:>6.1}% | {:>9.1}%{}",
        profile.name(),
        format!("{backend:?}"),
        figures.cpu_percent,
        figures.rss_mb,
        figures.peak_mb,
        found as f64 / window.as_secs_f64(),
        receiver.arrived(),
        figures.nodes_percent,
        figures.postgres_percent,
        if ready { "" } else { " (/readyz not ready at the end)" },
    );
    lag::print(&lags);
}

/// Waits until the store holds as many deposits per chain as were sent (a
/// 12 s chain's last block is found within two polls); returns what it holds.
async fn all_recorded(store: &Store, sent: &BTreeMap<Chain, u64>) -> BTreeMap<Chain, u64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut recorded = deposits(store).await;
        recorded.retain(|chain, _| sent.contains_key(chain));
        if &recorded == sent || tokio::time::Instant::now() > deadline {
            return recorded;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
