//! Gas-sponsored transfers on anvil: how fast the API accepts transfer
//! requests (balance and limit checks included), how fast the sender gets
//! them confirmed, and the time from acceptance to `CONFIRMED` per transfer.
//!
//! `BENCH_TRANSFERS` (default 200) omnibus ETH transfers, then as many
//! EIP-3009 USDC transfers from 10 segregated accounts, posted by 8 clients
//! at once to the API served in-process, with the sender in-process too;
//! anvil mines each transaction at once and the chain file confirms at
//! depth 1. The store is PostgreSQL at `TEST_DATABASE_URL` when it answers,
//! else SQLite. Prints figures; asserts nothing.
//!
//! `cargo bench --bench transfers`

#[path = "../tests/common/mod.rs"]
mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, U256},
    transports::http::reqwest::Method,
};
use common::{
    Anvil, CHAIN,
    anvil::Mined,
    api::send_json,
    chain_config,
    db::{Backend, TestDb},
};
use custody_indexer::{
    account::{AccountAddress, AccountType},
    api::{ApiState, RateLimit},
    api_key,
    config::Chains,
    evm::EvmSender,
    keys::{KeyRef, MnemonicSigner, Signer},
    store::{NewAccount, Store, WorkerKind},
    transfers::run_sender,
};
use futures::{StreamExt, stream};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
const ETH: u128 = 1_000_000_000_000_000_000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn backend() -> Backend {
    match sqlx::PgPool::connect(&common::db::admin_url()).await {
        Ok(_) => Backend::Postgres,
        Err(_) => Backend::Sqlite,
    }
}

/// Posts one transfer per `(account, symbol, amount)` with 8 clients;
/// returns the ids and the seconds it took.
async fn post_all(
    base: &str,
    key: &str,
    requests: Vec<(String, &'static str, &'static str)>,
) -> (Vec<String>, f64) {
    let started = Instant::now();
    let url = format!("{base}/v2/crypto/transfers");
    let ids: Vec<String> = stream::iter(requests)
        .map(|(account, symbol, amount)| {
            let body = json!({
                "request_id": uuid::Uuid::new_v4().to_string(), "account_id": account, "amount": amount,
                "currency_symbol": symbol,
                "address_destination": { "address": Address::repeat_byte(0x42).to_string(), "chain": CHAIN.as_str() },
            });
            let url = url.clone();
            async move {
                let answer = send_json(Method::POST, &url, Some(key), Some(&body)).await;
                assert_eq!(answer.status, 201, "{:?}", answer.body);
                answer.body["id"].as_str().unwrap().to_string()
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    (ids, started.elapsed().as_secs_f64())
}

/// Waits until every transfer is CONFIRMED; returns the seconds from `from`
/// and each transfer's acceptance-to-confirmation time in milliseconds.
async fn confirmed(store: &Store, anvil: &Anvil, ids: &[String], from: Instant) -> (f64, Vec<f64>) {
    loop {
        let mut done = Vec::with_capacity(ids.len());
        for id in ids {
            let transfer = store.transfer(id).await.unwrap();
            assert!(!matches!(transfer.status.as_str(), "FAILED" | "DROPPED"), "{transfer:?}");
            if let Some(at) = transfer.confirmed_at {
                done.push((at - transfer.created_at).num_microseconds().unwrap() as f64 / 1000.0);
            }
        }
        if done.len() == ids.len() {
            done.sort_by(f64::total_cmp);
            return (from.elapsed().as_secs_f64(), done);
        }
        anvil.mine(1).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn report(label: &str, count: usize, accept: f64, total: f64, latencies: &[f64]) {
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label}: {count} transfers, accepted {:.0}/s, confirmed {:.1}/s end to end; accepted → CONFIRMED p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        count as f64 / accept,
        count as f64 / total,
        at(0.5),
        at(0.99),
        latencies.last().copied().unwrap_or_default()
    );
}

#[tokio::main]
async fn main() {
    let count = env_or("BENCH_TRANSFERS", 200) as usize;
    let anvil = Anvil::start().await;
    let usdc = anvil.deploy_auth_token("USDC").await;
    let extra = "confirmation = { depth = 1 }\npoll_interval_ms = 50\n[transfers]\nnative_usd = \"3000\"";
    let mut config = chain_config(&[anvil.url()], None, extra);
    config.assets.push(custody_indexer::config::AssetConfig {
        symbol: "USDC".into(),
        contract_address: usdc.to_checksum(None),
        decimals: 6,
        token_program: None,
        eip3009: true,
        issued: false,
        daily_mint_cap: None,
        usd: Some("1".into()),
        precompile: false,
    });
    let mut chains = Chains::default();
    chains.insert(config.clone());
    let backend = backend().await;
    let db = TestDb::new(backend).await;
    let store = db.store.clone();

    let signer = Arc::new(MnemonicSigner::from_phrase(MNEMONIC).unwrap());
    let (sponsor, omnibus) =
        (signer.evm_address(KeyRef::Sponsor).unwrap(), signer.evm_address(KeyRef::Omnibus).unwrap());
    anvil.send_eth(anvil.accounts[0], sponsor, U256::from(1_000 * ETH)).await;
    anvil.send_eth(anvil.accounts[0], omnibus, U256::from(1_000 * ETH)).await;
    custody_indexer::operators::tenants::create_bare_organization(&store, "acme", None).await.unwrap();
    let secret = api_key::generate();
    let actor = custody_indexer::audit::Actor::local(None);
    custody_indexer::api_key::manage::create_with(
        &store,
        "acme",
        "bench",
        (&secret.id, &secret.hash),
        &actor,
    )
    .await
    .unwrap();
    let account = |id: &str, kind| NewAccount {
        watch_from: Default::default(),
        id: id.into(),
        organization: "acme".into(),
        identity_id: id.into(),
        kind,
        request_id: None,
        addresses: vec![AccountAddress { chains: vec![CHAIN], address: omnibus.to_checksum(None) }],
    };
    common::identity(&store, "acme", "treasury").await;
    for i in 0..10 {
        common::identity(&store, "acme", &format!("holder-{i}")).await;
    }
    custody_indexer::keys::accounts::add_account(&store, account("treasury", AccountType::Omnibus))
        .await
        .unwrap();
    let mut holders = Vec::new();
    for i in 0..10 {
        let holder = account(&format!("holder-{i}"), AccountType::Segregated);
        let created =
            custody_indexer::keys::accounts::create(&store, signer.as_ref(), [CHAIN], holder).await.unwrap();
        let address: Address = created.addresses[0].address.parse().unwrap();
        anvil
            .token(usdc)
            .mint(address, U256::from(1_000_000_000_000u64))
            .from(anvil.accounts[1])
            .mined()
            .await;
        holders.push(created.id);
    }

    let state = ApiState::new(
        store.clone(),
        chains,
        vec![],
        RateLimit {
            per_second: std::num::NonZeroU32::new(100_000).unwrap(),
            burst: std::num::NonZeroU32::new(100_000).unwrap(),
        },
    )
    .with_transfers(Some(signer.clone() as Arc<dyn Signer>), 100_000_000);
    let listener = custody_indexer::server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(custody_indexer::service::workers::serve_api(listener, state, shutdown.clone()));
    // The bench's one sender holds the chain's lease for an hour, unrenewed.
    let fence = custody_indexer::lease::take_lease(
        &store,
        WorkerKind::Sender,
        config.chain,
        "bench",
        3_600_000_000,
        true,
    )
    .await
    .unwrap();
    let sender = EvmSender::new(config, store.fenced(fence.unwrap()), signer.clone());
    tokio::spawn(run_sender(sender, shutdown.clone()));
    println!("store: {backend:?}, 2 cores, anvil automine, confirmation depth 1");

    let started = Instant::now();
    let requests = (0..count).map(|_| ("treasury".to_string(), "ETH", "0.001")).collect();
    let (ids, accept) = post_all(&base, &secret.token, requests).await;
    let (total, latencies) = confirmed(&store, &anvil, &ids, started).await;
    report("omnibus ETH", count, accept, total, &latencies);

    let started = Instant::now();
    let requests = (0..count).map(|i| (holders[i % holders.len()].clone(), "USDC", "1.5")).collect();
    let (ids, accept) = post_all(&base, &secret.token, requests).await;
    let (total, latencies) = confirmed(&store, &anvil, &ids, started).await;
    report("EIP-3009 USDC", count, accept, total, &latencies);
    shutdown.cancel();
}
