//! Several `run` instances on one PostgreSQL, every RPC answer slowed past
//! the worker lease's time to live, transfers posted at once and deposits
//! arriving while the instances holding the chain are killed (SIGKILL):
//! every transfer lands exactly once, the omnibus wallet's nonces have no
//! gap, the chain's watcher and sender are each held by one live instance
//! and taken over after a kill, and no deposit is missed or doubled.

mod common;

use std::{collections::BTreeSet, sync::atomic::Ordering, time::Duration};

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    transports::http::reqwest::Method,
};
use common::{
    Anvil, CHAIN,
    api::{answers, send, send_json},
    chain_toml,
    cli::{Env, Process},
    db::{Backend, TestDb},
    dead_port, eventually, proxy,
};
use custody_indexer::{
    deposit::DepositStatus,
    store::{Store, TxState, WorkerKind, WorkerLease},
};
use serde_json::{Value, json};

const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
const ETH: u128 = 1_000_000_000_000_000_000;
/// The worker lease's time to live; RPC answers take up to 1.2 s.
const LEASE: &str = "1s";

struct Instance {
    process: Process,
    port: u16,
    /// Its order of start, which names it in [`Cluster::proxies`].
    number: usize,
}

struct Cluster {
    anvil: Anvil,
    env: Env,
    db: TestDb,
    /// One per instance started, in order: each instance reaches anvil
    /// through its own, so calls tell which instance made them.
    proxies: Vec<proxy::FaultyRpc>,
    /// The instances killed, by number.
    killed: Vec<usize>,
    key: String,
    omnibus: Address,
    alice: Address,
    instances: Vec<Instance>,
}

impl Cluster {
    /// anvil, one PostgreSQL, the omnibus wallet funded, `alice` watched,
    /// and `count` `run` instances, each behind a proxy that delays every
    /// answer 20 ms to 1.2 s.
    async fn start(count: usize) -> Self {
        let anvil = Anvil::start().await;
        let mut env = Env::with_chain_file(&chain_file(&anvil.url()));
        let db = TestDb::new(Backend::Postgres).await;
        env.database_url = db.url.clone();
        let key = env.organization_with_key();
        let cli = |args: &[&str]| {
            let out = env.command(args).env("CUSTODY_INDEXER_MNEMONIC", MNEMONIC).output().unwrap();
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        let create = |id: &str, kind: &str| -> Address {
            let identity = format!("identity-{id}");
            env.identity("acme", &identity);
            let args = ["accounts", "create", "--organization", "acme", "--account-id", id, "--identity-id"];
            let out = cli(&[&args[..], &[identity.as_str(), "--type", kind, "--json"]].concat());
            let account: Value = serde_json::from_str(&out).unwrap();
            account["addresses"][0]["address"].as_str().unwrap().parse().unwrap()
        };
        let omnibus = create("treasury", "OMNIBUS");
        let alice = create("alice", "SEGREGATED");
        anvil.send_eth(anvil.accounts[0], omnibus, U256::from(100 * ETH)).await;
        let mut cluster = Self {
            anvil,
            env,
            db,
            proxies: Vec::new(),
            killed: Vec::new(),
            key,
            omnibus,
            alice,
            instances: Vec::new(),
        };
        for _ in 0..count {
            cluster.add_instance().await;
        }
        cluster
    }

    async fn add_instance(&mut self) {
        let number = self.proxies.len();
        let proxy = proxy::start(self.anvil.url()).await;
        proxy.faults.slow_min_ms.store(20, Ordering::SeqCst);
        proxy.faults.slow_max_ms.store(1200, Ordering::SeqCst);
        let chains = self.env.dir.path().join(format!("chains-{number}"));
        std::fs::create_dir_all(&chains).unwrap();
        std::fs::write(chains.join("test.toml"), chain_file(&proxy.url)).unwrap();
        let chains = chains.display().to_string();
        self.proxies.push(proxy);
        let port = dead_port();
        let env = [
            ("CUSTODY_INDEXER_MNEMONIC", MNEMONIC),
            ("CUSTODY_INDEXER_WORKER_LEASE", LEASE),
            ("CUSTODY_INDEXER_CHAINS", chains.as_str()),
        ];
        let process = self.env.listen("run", CHAIN, port, &env);
        let healthz = format!("http://127.0.0.1:{port}/healthz");
        eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) })
            .await;
        self.instances.push(Instance { process, port, number });
    }

    /// The instances that made calls of `methods`, in the order of the
    /// calls, each run of calls by one instance as one entry.
    fn runs(&self, methods: &[&str]) -> Vec<usize> {
        let mut calls: Vec<(std::time::Instant, usize)> = Vec::new();
        for (number, proxy) in self.proxies.iter().enumerate() {
            let recorded = proxy.faults.calls.lock().unwrap();
            calls.extend(
                recorded.iter().filter(|(_, m)| methods.contains(&m.as_str())).map(|(at, _)| (*at, number)),
            );
        }
        calls.sort();
        let mut runs: Vec<usize> = calls.into_iter().map(|(_, number)| number).collect();
        runs.dedup();
        runs
    }

    /// One instance at a time did the work of `methods`: the work moved
    /// from one instance to another only when the first was killed, and
    /// never back.
    fn assert_one_at_a_time(&self, what: &str, methods: &[&str]) {
        let runs = self.runs(methods);
        let distinct: BTreeSet<usize> = runs.iter().copied().collect();
        assert_eq!(distinct.len(), runs.len(), "{what} moved back and forth between instances: {runs:?}");
        for number in &runs[..runs.len().saturating_sub(1)] {
            assert!(
                self.killed.contains(number),
                "{what} left instance {number}, which was not killed: {runs:?}"
            );
        }
    }

    fn store(&self) -> &Store {
        &self.db.store
    }

    /// The live instance holding the chain's `kind` lease, once one does.
    async fn holder(&self, kind: WorkerKind) -> usize {
        eventually(Duration::from_secs(30), &format!("a live {kind} holder"), || async {
            let lease = lease(self.store(), kind).await?;
            let held = lease.held_at(chrono::Utc::now());
            let index = self.instances.iter().position(|i| owner_pid(&lease) == i.process.id());
            index.filter(|_| held)
        })
        .await
    }

    /// SIGKILLs the instance holding `kind`; returns the lease's epoch then.
    async fn kill_holder(&mut self, kind: WorkerKind) -> i64 {
        let index = self.holder(kind).await;
        let epoch = lease(self.store(), kind).await.unwrap().epoch;
        let mut killed = self.instances.remove(index);
        killed.process.kill().unwrap();
        killed.process.wait().unwrap();
        self.killed.push(killed.number);
        epoch
    }

    /// Posts an omnibus ETH transfer of `wei` to `to` through instance
    /// `via`; its id.
    async fn transfer(&self, via: usize, wei: u128, to: Address) -> String {
        let amount = ether(wei);
        let body = json!({
            "request_id": uuid::Uuid::new_v4().to_string(), "account_id": "treasury", "amount": amount,
            "currency_symbol": "ETH", "address_destination": { "address": to.to_string(), "chain": CHAIN.as_str() },
        });
        let url = format!("http://127.0.0.1:{}/v2/crypto/transfers", self.instances[via].port);
        let answer = send_json(Method::POST, &url, Some(&self.key), Some(&body)).await;
        assert_eq!(answer.status, 201, "{body}: {:?}", answer.body);
        answer.body["id"].as_str().unwrap().to_string()
    }

    async fn status(&self, id: &str) -> String {
        let url = format!("http://127.0.0.1:{}/v2/crypto/transfers/{id}", self.instances[0].port);
        let transfer = send(Method::GET, &url, Some(&self.key)).await.body;
        transfer["status"].as_str().unwrap_or_default().to_string()
    }
}

/// The chain file of an instance reaching anvil at `url`.
fn chain_file(url: &str) -> String {
    let mut toml = chain_toml(&[url.to_string()], None, "confirmation = { depth = 2 }");
    toml.push_str("\n[transfers]\nnative_usd = \"2000\"\n");
    toml
}

/// `wei` as a decimal amount of ETH.
fn ether(wei: u128) -> String {
    custody_indexer::amount::Amount::from_raw(U256::from(wei), 18).to_string()
}

async fn lease(store: &Store, kind: WorkerKind) -> Option<WorkerLease> {
    store.worker_leases().await.unwrap().into_iter().find(|l| l.kind == kind && l.chain == CHAIN)
}

/// The process id in an instance name `host/pid/tag`.
fn owner_pid(lease: &WorkerLease) -> u32 {
    lease.owner.split('/').nth(1).and_then(|p| p.parse().ok()).unwrap_or(0)
}

/// A random pause of up to `max_ms`.
async fn random_pause(max_ms: u64) {
    let random = u64::from(uuid::Uuid::new_v4().as_bytes()[0]);
    tokio::time::sleep(Duration::from_millis(random * max_ms / 255)).await;
}

async fn scenario(instances: usize, kills: usize, transfers: usize, deposits: usize) {
    let mut c = Cluster::start(instances).await;
    let omnibus_nonce_before = c.anvil.provider.get_transaction_count(c.omnibus).await.unwrap();
    // Distinct amounts to fresh addresses: a destination paid twice shows.
    let destinations: Vec<(Address, u128)> = (0..transfers)
        .map(|i| (Address::left_padding_from(&uuid::Uuid::new_v4().into_bytes()), ETH / 1000 + i as u128))
        .collect();
    let posts = destinations.iter().enumerate().map(|(i, (to, wei))| c.transfer(i % instances, *wei, *to));
    let ids = futures::future::join_all(posts).await;
    let deposit_amounts: Vec<u128> = (0..deposits).map(|i| ETH / 100 + i as u128).collect();
    let mut epochs = Vec::new();
    for (round, amount) in deposit_amounts.iter().enumerate() {
        c.anvil.send_eth(c.anvil.accounts[1], c.alice, U256::from(*amount)).await;
        if round < kills {
            random_pause(2000).await;
            let kind = if round % 2 == 0 { WorkerKind::Sender } else { WorkerKind::Watcher };
            epochs.push((kind, c.kill_holder(kind).await));
        }
    }
    c.assert_one_at_a_time("the sender", &["eth_sendRawTransaction", "eth_getTransactionCount"]);
    c.assert_one_at_a_time("the watcher", &["eth_getBlockByNumber(full)"]);
    // A killed holder's chain is taken over by a live instance.
    for (kind, killed_at) in &epochs {
        c.holder(*kind).await;
        let now = lease(c.store(), *kind).await.unwrap().epoch;
        assert!(now > *killed_at, "{kind}: taken over after the kill ({killed_at} -> {now})");
    }
    eventually(Duration::from_secs(150), "every transfer CONFIRMED and deposit CONFIRMED", || async {
        c.anvil.mine(1).await;
        let mut done = true;
        for id in &ids {
            let status = c.status(id).await;
            assert!(["ACCEPTED", "SUBMITTED", "CONFIRMED"].contains(&status.as_str()), "{id}: {status}");
            done &= status == "CONFIRMED";
        }
        let seen = c.store().deposits_of_account("alice").await.unwrap();
        done &= seen.len() >= deposits && seen.iter().all(|d| d.status == DepositStatus::Confirmed);
        done.then_some(())
    })
    .await;

    // The chain's watcher and sender each ran on one instance at a time.
    assert!(
        !c.runs(&["eth_sendRawTransaction"]).is_empty()
            && !c.runs(&["eth_getBlockByNumber(full)"]).is_empty()
    );
    c.assert_one_at_a_time("the sender", &["eth_sendRawTransaction", "eth_getTransactionCount"]);
    c.assert_one_at_a_time("the watcher", &["eth_getBlockByNumber(full)"]);

    // Every destination holds exactly its amount: paid once.
    for (to, wei) in &destinations {
        assert_eq!(c.anvil.provider.get_balance(*to).await.unwrap(), U256::from(*wei), "{to}");
    }
    // One omnibus nonce per transfer, each mined, none skipped or left pending.
    let mined = c.anvil.provider.get_transaction_count(c.omnibus).await.unwrap();
    let pending = c.anvil.provider.get_transaction_count(c.omnibus).pending().await.unwrap();
    assert_eq!(mined - omnibus_nonce_before, transfers as u64, "one transaction per transfer");
    assert_eq!(pending, mined, "nothing left pending at a later nonce");
    assert_eq!(c.store().stored_nonce(CHAIN, &c.omnibus.to_string()).await.unwrap(), Some(mined));
    let mut nonces = BTreeSet::new();
    for id in &ids {
        let txs = c.store().transfer_transactions(id).await.unwrap();
        let included: Vec<_> = txs.iter().filter(|t| t.state == TxState::Mined).collect();
        assert_eq!(included.len(), 1, "{id}: {txs:?}");
        assert!(nonces.insert(included[0].nonce), "{id}: nonce {} used twice", included[0].nonce);
    }
    let expected: BTreeSet<u64> = (omnibus_nonce_before..mined).collect();
    assert_eq!(nonces, expected, "the transfers' nonces are contiguous");

    // Every deposit recorded once, with its amount.
    let seen = c.store().deposits_of_account("alice").await.unwrap();
    let mut amounts: Vec<String> = seen.iter().map(|d| d.amount.clone()).collect();
    let mut expected: Vec<String> = deposit_amounts.iter().map(|wei| ether(*wei)).collect();
    amounts.sort();
    expected.sort();
    assert_eq!(amounts, expected, "no deposit missed or doubled");

    // `health` names the live instance holding each worker.
    let health = c.env.output(&["health", "--json", "--chain", CHAIN.as_str()]);
    let report: Value = serde_json::from_slice(&health.stdout).unwrap();
    let workers = report["chains"][0]["workers"].as_array().unwrap().clone();
    assert_eq!(workers.len(), 2, "{report}");
    for worker in workers {
        assert_eq!(worker["held"], true, "{worker}");
        let pid: u32 = worker["instance"].as_str().unwrap().split('/').nth(1).unwrap().parse().unwrap();
        assert!(c.instances.iter().any(|i| i.process.id() == pid), "{worker}: held by a live instance");
    }
}

#[tokio::test]
async fn two_instances_one_killed_send_each_transfer_once() {
    scenario(2, 1, 10, 4).await;
}

#[tokio::test]
async fn three_instances_two_killed_send_each_transfer_once() {
    scenario(3, 2, 14, 5).await;
}
