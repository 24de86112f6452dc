//! Webhook delivery: throughput to a local receiver, and the time from a
//! block's arrival to its deposit's `PENDING` event reaching the receiver;
//! and the NATS JetStream sink's throughput to a local nats-server.
//!
//! Throughput: `BENCH_EVENTS` deposits are written to a fresh store
//! (PostgreSQL at `TEST_DATABASE_URL`, else SQLite) with one webhook
//! registered, then a delivery worker sends them to a receiver on
//! 127.0.0.1 with the default slots (128, 32 of one organization), with 64
//! (16 of one organization) and with 32 (8 of one organization). Latency: a live watcher and
//! the delivery workers follow anvil; `BENCH_LATENCY_SAMPLES` transfers are
//! sent one at a time and each is timed from its block being mined to its
//! event's arrival. NATS: the sink publishes the store's events (those of
//! the throughput rounds) to a nats-server of its own (`NATS_SERVER_BIN`,
//! as the tests find it), timed until the stream holds them all. Sharing
//! among organizations and fairness: see `fairness.rs`.
//! `BENCH_ONLY=throughput|latency|shared|fairness` runs one part. Prints
//! figures; asserts nothing.
//!
//! `cargo bench --bench webhooks`

#[path = "../../tests/common/mod.rs"]
mod common;

mod fairness;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use alloy::primitives::U256;
use axum::{Router, body::Bytes, extract::State, routing::post};
use common::{
    Anvil, add_account, chain_config,
    db::{Backend, TestDb},
    nats::NatsServer,
};
use custody_indexer::deposits::commit;
use custody_indexer::{
    amount::Amount,
    chain::Chain,
    deposits::resource::{Detected, Position},
    events::{
        delivery::{self, DeliveryConfig},
        nats::{self, NatsConfig},
        signing::Secret,
        url::Policy,
    },
    evm::EvmWatcher,
    store::{CursorMove, ScanCommit, Store},
};
use tokio_util::sync::CancellationToken;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Arrival times of events by transaction hash.
type Arrivals = Arc<Mutex<Vec<(String, Instant)>>>;

pub async fn receiver() -> (String, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    async fn receive(State(arrivals): State<Arrivals>, body: Bytes) {
        let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let tx = event["data"]["transaction_hash"].as_str().unwrap_or_default().to_string();
        arrivals.lock().unwrap().push((tx, Instant::now()));
    }
    let app = Router::new().route("/hook", post(receive)).with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, arrivals)
}

fn config(concurrency: usize, per_organization: usize) -> DeliveryConfig {
    DeliveryConfig {
        concurrency,
        per_organization,
        poll: Duration::from_millis(50),
        policy: Policy::PRIVATE,
        ..DeliveryConfig::default()
    }
}

async fn backend() -> Backend {
    match sqlx::PgPool::connect(&common::db::admin_url()).await {
        Ok(_) => Backend::Postgres,
        Err(_) => Backend::Sqlite,
    }
}

/// Writes `events` PENDING deposits of `account` (one event each).
pub async fn write_events(store: &Store, account: &str, address: &str, first: u64, events: u64) {
    for chunk in (first..first + events).collect::<Vec<_>>().chunks(1_000) {
        let deposits = chunk
            .iter()
            .map(|&n| Detected {
                chain: Chain::BaseSepolia,
                tx_hash: format!("0x{n:064x}"),
                position: Position::Native,
                block_number: n,
                block_hash: format!("0x{n:064x}"),
                block_time_ms: (1_700_000_000 + n) * 1000,
                account_id: account.into(),
                account_address: address.into(),
                source_address: "0x2222222222222222222222222222222222222222".into(),
                source_account_id: None,
                currency_symbol: "USDC".into(),
                amount: Amount::from_raw(U256::from(n), 6),
            })
            .collect();
        commit::commit_scan(
            store,
            &ScanCommit {
                chain: Chain::BaseSepolia,
                from: chunk[0],
                to: *chunk.last().unwrap(),
                head: *chunk.last().unwrap(),
                blocks: Vec::new(),
                deposits,
                confirmed_through: None,
                cursor: CursorMove::Backfill,
                keep_blocks: 1,
            },
        )
        .await
        .unwrap();
    }
}

/// The organization's webhook at `url`, the receiver's.
async fn bench_webhook(store: &custody_indexer::store::Store, url: &str) {
    let system = custody_indexer::audit::Actor::System;
    let secret = Secret::generate();
    custody_indexer::webhooks::register(store, "default", (url, "bench"), secret.expose(), &system)
        .await
        .unwrap();
}

async fn throughput(backend: Backend, events: u64) {
    let db = TestDb::new(backend).await;
    let (url, arrivals) = receiver().await;
    let address = "0x1111111111111111111111111111111111111111";
    common::add_account_on(&db.store, Chain::BaseSepolia, "acct", address).await;
    bench_webhook(&db.store, &url).await;
    delivered(&db, backend, &arrivals, address, events).await;
    published(&db, backend).await;
}

async fn delivered(db: &TestDb, backend: Backend, arrivals: &Arrivals, address: &str, events: u64) {
    // (in flight, of one organization): the defaults, then fewer slots.
    for (round, (concurrency, share)) in [(128usize, 32usize), (64, 16), (32, 8)].into_iter().enumerate() {
        let written = Instant::now();
        write_events(&db.store, "acct", address, round as u64 * events, events).await;
        let write = written.elapsed();
        arrivals.lock().unwrap().clear();
        let shutdown = CancellationToken::new();
        let started = Instant::now();
        let worker =
            tokio::spawn(delivery::run(db.store.clone(), config(concurrency, share), shutdown.clone()));
        while (arrivals.lock().unwrap().len() as u64) < events {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let elapsed = started.elapsed();
        shutdown.cancel();
        worker.await.unwrap();
        println!(
            "{backend:?}: {events} events written in {:.2} s ({:.0}/s); delivered at {concurrency} in flight, {share} of one organization, in {:.2} s: {:.0} events/s",
            write.as_secs_f64(),
            events as f64 / write.as_secs_f64(),
            elapsed.as_secs_f64(),
            events as f64 / elapsed.as_secs_f64()
        );
    }
}

/// The NATS sink over every event of the store, from its first.
async fn published(db: &TestDb, backend: Backend) {
    let server = NatsServer::start().await;
    let events = db.store.event_count().await.unwrap();
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let sink = tokio::spawn(nats::run(
        db.store.clone(),
        NatsConfig::new(server.url().parse().unwrap()),
        "bench".into(),
        shutdown.clone(),
    ));
    while server.count().await < events {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    shutdown.cancel();
    sink.await.unwrap();
    println!(
        "{backend:?}: {events} events published to JetStream (file store, acknowledged) in {:.2} s: {:.0} events/s",
        elapsed.as_secs_f64(),
        events as f64 / elapsed.as_secs_f64()
    );
}

async fn latency(backend: Backend, samples: u64) {
    let anvil = Anvil::start().await;
    let db = TestDb::new(backend).await;
    let alice = anvil.accounts[1];
    add_account(&db.store, "alice", &alice.to_string()).await;
    let (url, arrivals) = receiver().await;
    bench_webhook(&db.store, &url).await;
    let shutdown = CancellationToken::new();
    let config_file =
        chain_config(&[anvil.url()], None, "poll_interval_ms = 100\nconfirmation = { depth = 1000 }");
    let watcher = EvmWatcher::connect(config_file, db.store.clone()).await.unwrap();
    tokio::spawn(watcher.run(shutdown.clone()));
    tokio::spawn(delivery::run(
        db.store.clone(),
        DeliveryConfig {
            poll: Duration::from_millis(50),
            policy: Policy::PRIVATE,
            ..DeliveryConfig::default()
        },
        shutdown.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut latencies = Vec::new();
    for i in 0..samples {
        let hash = anvil.send_eth(anvil.accounts[0], alice, U256::from(1_000 + i)).await.to_string();
        let mined = Instant::now();
        let arrived = loop {
            if let Some((_, at)) = arrivals.lock().unwrap().iter().find(|(tx, _)| *tx == hash) {
                break *at;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        latencies.push(arrived.saturating_duration_since(mined));
    }
    shutdown.cancel();
    latencies.sort();
    let pick =
        |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{backend:?}: block mined → PENDING event at the receiver over {samples} deposits: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms \
         (watcher poll 100 ms, delivery poll 50 ms)",
        pick(0.5),
        pick(0.99),
        pick(1.0)
    );
}

/// `BENCH_ONLY=throughput|latency|shared|fairness` runs one part.
fn part(name: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only == name)
}

#[tokio::main]
async fn main() {
    let backend = backend().await;
    if part("throughput") {
        throughput(backend, env_or("BENCH_EVENTS", 5_000)).await;
    }
    if part("latency") {
        latency(backend, env_or("BENCH_LATENCY_SAMPLES", 100)).await;
    }
    if part("shared") {
        fairness::shared(backend, 8, 1_250).await;
    }
    if part("fairness") {
        let backlog = env_or("BENCH_BACKLOG", 100_000);
        fairness::run(backend, backlog, fairness::Stuck::Slow).await;
        fairness::run(backend, backlog, fairness::Stuck::Failing).await;
    }
}
