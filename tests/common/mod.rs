//! Shared test helpers: a real anvil on a free port, fresh SQLite and
//! PostgreSQL stores, chain files pointing at the node, and contract bindings.
#![allow(dead_code)]

pub mod anvil;
pub mod api;
pub mod camt054;
pub mod checkpoints;
pub mod cli;
pub mod cluster;
pub mod console;
pub mod db;
pub mod fleet;
pub mod forging;
pub mod governance;
pub mod instances;
pub mod issuance;
pub mod kms;
pub mod lagging;
pub mod nats;
pub mod nats_proxy;
pub mod off_ramp;
pub mod openbao;
pub mod platform;
pub mod procs;
pub mod proxy;
pub mod python;
pub mod receiver;
pub mod signing;
pub mod smtp;
pub mod softhsm;
pub mod solana;
pub mod solana_cluster;
pub mod solana_forging;
pub mod solana_instances;
pub mod totp;
pub mod transfers;
pub mod writer;

use std::{future::Future, path::Path, time::Duration};

use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType, DEFAULT_ORGANIZATION},
    chain::Chain,
    config::ChainConfig,
    identity::{State, Type},
    store::{NewAccount, NewIdentity, Store, StoreError, WatchFrom},
};

#[allow(unused_imports)]
pub use anvil::Anvil;
#[allow(unused_imports)]
pub use db::{Backend, TestDb};

/// The chain the EVM tests index: anvil labelled as the API's Sepolia.
pub const CHAIN: Chain = Chain::EthereumTestnet;

/// The operator token every `run` and `serve` of the tests is started with
/// (`/metrics` and the detail of `/readyz` need it).
pub const OPERATOR_TOKEN: &str = "test-operator-token-0123456789abcdef";

/// Held by a cluster test for its whole run: one that must have the
/// machine to itself (`alone`; a worker starved of CPU past its lease
/// loses it, as it should, and the test would measure the machine) runs
/// after the others of its binary are done and before the next starts;
/// the others share it, two at a time as the test harness runs them.
pub async fn machine(alone: bool) -> Machine {
    static MACHINE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());
    if alone { Machine::Alone(MACHINE.write().await) } else { Machine::Shared(MACHINE.read().await) }
}

/// What [`machine`] holds until it is dropped.
pub enum Machine {
    Alone(tokio::sync::RwLockWriteGuard<'static, ()>),
    Shared(tokio::sync::RwLockReadGuard<'static, ()>),
}

/// A chain file for anvil, with the test token listed as `TUSD` (6 decimals).
/// `extra` lines (`key = value`) replace the defaults of the same key.
pub fn chain_toml(rpc_urls: &[String], token: Option<&str>, extra: &str) -> String {
    let urls: Vec<String> = rpc_urls.iter().map(|u| format!("{u:?}")).collect();
    let defaults = [
        format!("chain = \"{CHAIN}\""),
        "chain_id = 31337".to_string(),
        format!("rpc_urls = [{}]", urls.join(", ")),
        "confirmation = { depth = 3 }".to_string(),
        "poll_interval_ms = 100".to_string(),
        "max_block_range = 20".to_string(),
        "start_block = 0".to_string(),
        "native = { symbol = \"ETH\", decimals = 18 }".to_string(),
    ];
    // A setting in seconds replaces the default's older form.
    let key = |line: &str| {
        let key = line.split('=').next().unwrap_or_default().trim();
        if key == "poll_interval_secs" { "poll_interval_ms" } else { key }.to_string()
    };
    let overridden: Vec<String> = extra.lines().filter(|l| l.contains('=')).map(key).collect();
    let mut lines: Vec<String> = defaults.into_iter().filter(|l| !overridden.contains(&key(l))).collect();
    lines.extend(extra.lines().map(String::from));
    let mut text = lines.join("\n") + "\n";
    if let Some(token) = token {
        text.push_str(&format!(
            "\n[[assets]]\nsymbol = \"TUSD\"\ncontract_address = \"{token}\"\ndecimals = 6\n"
        ));
    }
    text
}

pub fn chain_config(rpc_urls: &[String], token: Option<&str>, extra: &str) -> ChainConfig {
    let text = chain_toml(rpc_urls, token, extra);
    ChainConfig::from_toml(&text, Path::new("test-chain.toml"), &|_| None).expect("test chain file")
}

/// Writes a chains directory holding only the test chain.
pub fn chains_dir(dir: &Path, rpc_urls: &[String], token: Option<&str>, extra: &str) -> std::path::PathBuf {
    let chains = dir.join("chains");
    std::fs::create_dir_all(&chains).unwrap();
    std::fs::write(chains.join("anvil.toml"), chain_toml(rpc_urls, token, extra)).unwrap();
    chains
}

/// An `ACTIVE` individual identity `id` of `organization`, registered once
/// (again: nothing happens), as an operator registers one onboarded elsewhere.
pub async fn identity(store: &Store, organization: &str, id: &str) {
    let new = NewIdentity {
        organization: organization.into(),
        id: id.into(),
        request_id: None,
        kind: Type::Individual,
        label: id.into(),
        state: State::Active { rfi: false },
        actor: "operator:test".into(),
    };
    match custody_indexer::identity::register::create_identity(store, &new).await {
        Ok(_) | Err(StoreError::Taken { .. }) => {}
        Err(error) => panic!("identity {id}: {error}"),
    }
}

/// Account `acc-{i}` of the default organization with `addresses`, of one
/// of the 100 identities [`numbered_identities`] registers: the benchmarks'
/// many watched accounts.
pub fn numbered_account(i: u64, addresses: Vec<AccountAddress>) -> NewAccount {
    NewAccount {
        watch_from: Default::default(),
        id: format!("acc-{i}"),
        organization: DEFAULT_ORGANIZATION.into(),
        identity_id: format!("identity-{}", i % 100),
        kind: AccountType::Segregated,
        request_id: None,
        addresses,
    }
}

/// Watches each of `addresses` on [`CHAIN`] as a [`numbered_account`] of
/// its own (the identities of [`numbered_identities`] first).
pub async fn watch_numbered(store: &custody_indexer::store::Store, addresses: &[alloy::primitives::Address]) {
    let accounts: Vec<NewAccount> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| {
            numbered_account(i as u64, vec![AccountAddress { chains: vec![CHAIN], address: a.to_string() }])
        })
        .collect();
    for chunk in accounts.chunks(10_000) {
        accounts::add_accounts(store, chunk).await.unwrap();
    }
}

/// The identities of [`numbered_account`]s.
/// Grants or withdraws an identity's fiat entitlement as a local operator
/// would; `false` when it already was so.
pub async fn set_fiat(
    store: &Store,
    organization: &str,
    id: &str,
    enabled: bool,
    reason: &str,
) -> Result<bool, custody_indexer::store::StoreError> {
    use custody_indexer::identity::decide::{Decided, Decision, decide};
    let decision = if enabled { Decision::FiatEnable } else { Decision::FiatDisable };
    let actor = custody_indexer::audit::Actor::local(Some("test".into()));
    let chains = custody_indexer::config::Chains::default();
    match decide(store, &chains, (organization, id), decision, &actor, reason).await? {
        Decided::Fiat { changed, .. } => Ok(changed),
        Decided::Changed(_) => unreachable!("a fiat decision changes the entitlement"),
    }
}

pub async fn numbered_identities(store: &Store) {
    for i in 0..100 {
        identity(store, DEFAULT_ORGANIZATION, &format!("identity-{i}")).await;
    }
}

pub async fn add_account(store: &Store, id: &str, address: &str) {
    add_account_on(store, CHAIN, id, address).await;
}

/// An active segregated account of the default organization with one
/// address on `chain`.
pub async fn add_account_on(store: &Store, chain: Chain, id: &str, address: &str) {
    add_account_from(store, chain, id, address, WatchFrom::Registration).await;
}

/// An account with one address on `chain`, watched from `watch_from`.
pub async fn add_account_from(store: &Store, chain: Chain, id: &str, address: &str, watch_from: WatchFrom) {
    identity(store, DEFAULT_ORGANIZATION, &format!("identity-{id}")).await;
    accounts::add_account(
        store,
        NewAccount {
            watch_from,
            id: id.into(),
            organization: DEFAULT_ORGANIZATION.into(),
            identity_id: format!("identity-{id}"),
            kind: AccountType::Segregated,
            request_id: None,
            addresses: vec![AccountAddress { chains: vec![chain], address: address.into() }],
        },
    )
    .await
    .expect("account added");
}

/// Steps an EVM watcher until it has indexed the current head.
pub async fn catch_up(watcher: &mut custody_indexer::evm::EvmWatcher) {
    use custody_indexer::evm::Tick;
    for _ in 0..1000 {
        match watcher.tick().await.expect("tick") {
            Tick::Idle { .. } | Tick::Scanned { caught_up: true, .. } => return,
            _ => {}
        }
    }
    panic!("watcher did not catch up");
}

/// Polls `check` until it yields a value or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A local port nothing listens on.
pub fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A signed transaction as a sender records it before broadcast.
pub fn sent(
    hash: String,
    role: custody_indexer::store::TxRole,
    sender: &str,
    nonce: u64,
    value: alloy::primitives::U256,
    max_fee_per_gas: u128,
    created_at: i64,
) -> custody_indexer::store::SentTransaction {
    custody_indexer::store::SentTransaction {
        hash,
        role,
        sender: sender.into(),
        nonce,
        gas_limit: 21_000,
        value,
        max_fee_per_gas,
        max_priority_fee_per_gas: 1_000_000_000,
        raw: "0x02".into(),
        state: custody_indexer::store::TxState::Sent,
        block_number: None,
        block_hash: None,
        fee: None,
        created_at,
    }
}

/// A test node's binary: `env` when set, else `cached` under the cache the
/// install scripts fill, else `name` on the PATH.
pub fn binary(env: &str, cached: &str, name: &str) -> Option<std::path::PathBuf> {
    if let Some(bin) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        return Some(bin.into());
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default();
    let cached = home.join(".cache/custody-indexer").join(cached);
    if cached.exists() {
        return Some(cached);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.exists())
}

/// A webhook of `organization` at `url` with `label`, signing with
/// `secret`, registered through the webhooks wing (audited, by the
/// service itself).
pub async fn webhook(
    store: &Store,
    organization: &str,
    (url, label): (&str, &str),
    secret: &str,
) -> custody_indexer::store::Webhook {
    let by = custody_indexer::audit::Actor::System;
    custody_indexer::webhooks::register(store, organization, (url, label), secret, &by).await.unwrap()
}
