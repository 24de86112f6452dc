//! HTTP API throughput over a store of realistic size.
//!
//! Fills a fresh store (SQLite, and PostgreSQL when `TEST_DATABASE_URL`
//! answers) with `BENCH_ACCOUNTS` accounts holding `BENCH_DEPOSITS` deposits
//! in all, serves the API on a random port, and times authenticated requests
//! from `BENCH_CLIENTS` concurrent clients: the first page of an account's
//! deposits, a walk through every page of the busiest account, one deposit,
//! and `/v2/assets` (authentication and routing alone). Prints figures;
//! asserts nothing.
//!
//! `cargo bench --bench api`

#[path = "../tests/common/mod.rs"]
mod common;

use std::{num::NonZeroU32, time::Instant};

use alloy::{primitives::U256, transports::http::reqwest};
use common::db::{BACKENDS, Backend, TestDb};
use custody_indexer::deposits::commit;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    api::{ApiState, RateLimit},
    api_key,
    chain::Chain,
    config::Chains,
    deposits::resource::{Detected, Position},
    store::{CursorMove, NewAccount, ScanCommit, Store},
};
use futures::{StreamExt, stream};
use tokio_util::sync::CancellationToken;

const CHAIN: Chain = Chain::BaseSepolia;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn address(n: u64) -> String {
    format!("0x{n:040x}")
}

/// `accounts` accounts; account 0 holds a tenth of the deposits, the rest share the others.
async fn fill(store: &Store, accounts: u64, deposits: u64) {
    let new: Vec<NewAccount> = (0..accounts)
        .map(|i| NewAccount {
            watch_from: Default::default(),
            id: format!("acct-{i}"),
            organization: "default".into(),
            identity_id: format!("identity-{}", i % 100),
            kind: AccountType::Segregated,
            request_id: None,
            addresses: vec![AccountAddress { chains: vec![CHAIN], address: address(i + 1) }],
        })
        .collect();
    for i in 0..100 {
        common::identity(store, "default", &format!("identity-{i}")).await;
    }
    custody_indexer::keys::accounts::add_accounts(store, &new).await.unwrap();
    let busy = deposits / 10;
    for chunk in (0..deposits).collect::<Vec<_>>().chunks(2_000) {
        let detected = chunk
            .iter()
            .map(|&n| {
                let account = if n < busy { 0 } else { 1 + n % (accounts - 1).max(1) };
                Detected {
                    chain: CHAIN,
                    tx_hash: format!("0x{n:064x}"),
                    position: Position::Native,
                    block_number: n,
                    block_hash: format!("0x{n:064x}"),
                    block_time_ms: (1_700_000_000 + n / 4) * 1000,
                    account_id: format!("acct-{account}"),
                    account_address: address(account + 1),
                    source_address: address(0xdead),
                    source_account_id: None,
                    currency_symbol: "USDC".into(),
                    amount: Amount::from_raw(U256::from(1_000_000 + n), 6),
                }
            })
            .collect();
        commit::commit_scan(
            store,
            &ScanCommit {
                chain: CHAIN,
                from: chunk[0],
                to: *chunk.last().unwrap(),
                head: *chunk.last().unwrap(),
                blocks: Vec::new(),
                deposits: detected,
                confirmed_through: None,
                cursor: CursorMove::Backfill,
                keep_blocks: 1,
            },
        )
        .await
        .unwrap();
    }
}

/// Requests per second for `paths`, `clients` at a time.
async fn rate(client: &reqwest::Client, key: &str, paths: Vec<String>, clients: usize) -> f64 {
    let started = Instant::now();
    let count = paths.len();
    stream::iter(paths)
        .map(|url| async move {
            let response = client.get(url).bearer_auth(key).send().await.unwrap();
            assert!(response.status().is_success(), "{}", response.status());
            response.bytes().await.unwrap();
        })
        .buffer_unordered(clients)
        .collect::<Vec<_>>()
        .await;
    count as f64 / started.elapsed().as_secs_f64()
}

async fn bench(backend: Backend, accounts: u64, deposits: u64, requests: u64, clients: usize) {
    let db = TestDb::new(backend).await;
    let filled = Instant::now();
    fill(&db.store, accounts, deposits).await;
    let fill_time = filled.elapsed();
    let secret = api_key::generate();
    let actor = custody_indexer::audit::Actor::local(None);
    custody_indexer::api_key::manage::create_with(
        &db.store,
        "default",
        "bench",
        (&secret.id, &secret.hash),
        &actor,
    )
    .await
    .unwrap();
    let unlimited = NonZeroU32::new(1_000_000).unwrap();
    let state = ApiState::new(
        db.store.clone(),
        Chains::load(None).unwrap(),
        Vec::new(),
        RateLimit { per_second: unlimited, burst: unlimited },
    );
    let listener = custody_indexer::server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(custody_indexer::service::workers::serve_api(listener, state, shutdown.clone()));
    let client = reqwest::Client::new();
    let key = secret.token.as_str();

    let first_pages: Vec<String> = (0..requests)
        .map(|i| {
            format!("{base}/v2/crypto/deposits?account_id=acct-{}&limit=25", 1 + i % (accounts - 1).max(1))
        })
        .collect();
    let first_page = rate(&client, key, first_pages, clients).await;

    // Walk every page of the busiest account, one client, as an integration would.
    let walked = Instant::now();
    let (mut pages, mut seen, mut cursor) = (0u64, 0u64, None::<String>);
    loop {
        let mut url = format!("{base}/v2/crypto/deposits?account_id=acct-0&limit=25");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page: serde_json::Value = serde_json::from_slice(
            &client.get(url).bearer_auth(key).send().await.unwrap().bytes().await.unwrap(),
        )
        .unwrap();
        pages += 1;
        seen += page["deposits"].as_array().unwrap().len() as u64;
        match page.get("cursor").and_then(|c| c.as_str()) {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let walk = walked.elapsed();

    let any: serde_json::Value = serde_json::from_slice(
        &client
            .get(format!("{base}/v2/crypto/deposits?account_id=acct-1&limit=1"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let id = any["deposits"][0]["id"].as_str().unwrap();
    let one = rate(
        &client,
        key,
        (0..requests).map(|_| format!("{base}/v2/crypto/deposits/{id}")).collect(),
        clients,
    )
    .await;
    let assets =
        rate(&client, key, (0..requests).map(|_| format!("{base}/v2/assets")).collect(), clients).await;
    shutdown.cancel();

    println!(
        "{backend:?}: {deposits} deposits in {accounts} accounts (filled in {:.1} s); {clients} clients",
        fill_time.as_secs_f64()
    );
    println!("  first page of 25 deposits  {first_page:>8.0} requests/s");
    println!("  one deposit by id          {one:>8.0} requests/s");
    println!("  /v2/assets (auth only)     {assets:>8.0} requests/s");
    println!(
        "  walk of {seen} deposits in {pages} pages: {:.2} s, {:.1} ms a page",
        walk.as_secs_f64(),
        walk.as_secs_f64() * 1000.0 / pages as f64
    );
}

#[tokio::main]
async fn main() {
    let accounts = env_or("BENCH_ACCOUNTS", 1_000);
    let deposits = env_or("BENCH_DEPOSITS", 100_000);
    let requests = env_or("BENCH_REQUESTS", 2_000);
    let clients = env_or("BENCH_CLIENTS", 8) as usize;
    for backend in BACKENDS {
        if backend == Backend::Postgres && sqlx::PgPool::connect(&common::db::admin_url()).await.is_err() {
            println!("PostgreSQL: not reachable at TEST_DATABASE_URL; skipped");
            continue;
        }
        bench(backend, accounts, deposits, requests, clients).await;
    }
}
