//! Several `run` instances of one chain on one PostgreSQL, each reaching
//! the chain's node through its own fault proxy (so calls tell which
//! instance made them): started, killed, asked who holds which worker, and
//! sent transfers through the API. The chain family's wallets and accounts
//! are the business of [`super::cluster`] (EVM) and
//! [`super::solana_cluster`] (Solana).

use std::{collections::BTreeSet, future::Future, sync::atomic::Ordering, time::Duration};

use alloy::{primitives::U256, transports::http::reqwest::Method};
use custody_indexer::{
    amount::Amount,
    chain::Chain,
    deposits::resource::DepositStatus,
    store::{Store, WorkerKind, WorkerLease},
};
use serde_json::{Value, json};

use super::{
    api::{answers, send, send_json},
    cli::{Env, Process},
    db::{Backend, TestDb},
    dead_port, eventually, proxy,
    transfers::MNEMONIC,
};

pub struct Instance {
    pub process: Process,
    pub port: u16,
    /// Its order of start, which names it in [`Fleet::proxies`].
    pub number: usize,
}

/// A transfer of `raw` base units (`decimals` of them make one `symbol`)
/// from `account` to `to`, a fresh address: paid twice, it shows.
#[derive(Debug, Clone)]
pub struct Order {
    pub account: String,
    pub symbol: &'static str,
    pub raw: u128,
    pub decimals: u8,
    pub to: String,
}

/// What a cluster scenario runs: `instances` instances, of which `kills`
/// holders are killed while `deposits` deposits arrive, `per_route`
/// transfers of each sending route.
pub struct Scenario {
    pub instances: usize,
    pub kills: usize,
    pub per_route: usize,
    pub deposits: usize,
    /// Every RPC answer waits this long (milliseconds, min and max).
    pub slow_ms: (u64, u64),
    /// The worker lease's time to live.
    pub lease: &'static str,
    /// Whether the scenario needs the machine to itself (see
    /// [`super::machine`]): a hundred transfers of every route do.
    pub alone: bool,
}

/// The chain file of an instance whose RPC URL is the argument.
type ChainFile = Box<dyn Fn(&str) -> String + Send + Sync>;

pub struct Fleet {
    pub chain: Chain,
    pub env: Env,
    pub db: TestDb,
    /// Where the proxies forward to.
    node_url: String,
    chain_file: ChainFile,
    /// One per instance started, in order.
    pub proxies: Vec<proxy::FaultyRpc>,
    /// Every answer of a proxy waits this long (milliseconds, min and max).
    slow_ms: (u64, u64),
    /// The worker lease's time to live.
    lease: &'static str,
    /// The instances killed, by number.
    pub killed: Vec<usize>,
    /// Organization `acme`'s API key.
    pub key: String,
    pub instances: Vec<Instance>,
    /// More variables every instance started from now on runs with.
    pub extra_env: Vec<(String, String)>,
}

impl Fleet {
    /// One PostgreSQL, organization `acme` with an API key, and no instance
    /// yet; instances will reach `node_url` through their proxies.
    pub async fn new(
        chain: Chain,
        node_url: String,
        chain_file: impl Fn(&str) -> String + Send + Sync + 'static,
        slow_ms: (u64, u64),
        lease: &'static str,
    ) -> Self {
        Self::new_on(Backend::Postgres, chain, node_url, chain_file, (slow_ms, lease)).await
    }

    /// [`Fleet::new`] on `backend` (SQLite holds one instance).
    pub async fn new_on(
        backend: Backend,
        chain: Chain,
        node_url: String,
        chain_file: impl Fn(&str) -> String + Send + Sync + 'static,
        (slow_ms, lease): ((u64, u64), &'static str),
    ) -> Self {
        let mut env = Env::with_chain_file(&chain_file(&node_url));
        let db = TestDb::new(backend).await;
        env.database_url = db.url.clone();
        let key = env.organization_with_key();
        Self {
            chain,
            env,
            db,
            node_url,
            chain_file: Box::new(chain_file),
            proxies: Vec::new(),
            slow_ms,
            lease,
            killed: Vec::new(),
            key,
            instances: Vec::new(),
            extra_env: Vec::new(),
        }
    }

    /// The CLI's output, which must succeed.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = self.env.command(args).env("CUSTODY_INDEXER_MNEMONIC", MNEMONIC).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The service's (sponsor, omnibus) wallets on the chain.
    pub fn wallets(&self) -> (String, String) {
        let wallets: Value = serde_json::from_str(&self.cli(&["wallets", "list", "--json"])).unwrap();
        let wallet = |role: &str| wallets[0][role].as_str().unwrap().to_string();
        (wallet("sponsor"), wallet("omnibus"))
    }

    /// An account `id` of `acme` of type `kind`, with an identity of its
    /// own; its address.
    pub fn create(&self, id: &str, kind: &str) -> String {
        let identity = format!("identity-{id}");
        self.env.identity("acme", &identity);
        let args = ["accounts", "create", "--organization", "acme", "--account-id", id, "--identity-id"];
        let out = self.cli(&[&args[..], &[identity.as_str(), "--type", kind, "--json"]].concat());
        let account: Value = serde_json::from_str(&out).unwrap();
        account["addresses"][0]["address"].as_str().unwrap().to_string()
    }

    pub async fn add_instance(&mut self) {
        let number = self.proxies.len();
        let proxy = proxy::start(self.node_url.clone()).await;
        proxy.faults.slow_min_ms.store(self.slow_ms.0, Ordering::SeqCst);
        proxy.faults.slow_max_ms.store(self.slow_ms.1, Ordering::SeqCst);
        let chains = self.env.dir.path().join(format!("chains-{number}"));
        std::fs::create_dir_all(&chains).unwrap();
        std::fs::write(chains.join("test.toml"), (self.chain_file)(&proxy.url)).unwrap();
        let chains = chains.display().to_string();
        self.proxies.push(proxy);
        let port = dead_port();
        let env = [
            ("CUSTODY_INDEXER_MNEMONIC", MNEMONIC),
            // A hundred transfers a route within seconds: the omnibus
            // wallet signs far more in a minute than the default allows a
            // key (the bound itself is keys/guard.rs's tests').
            ("CUSTODY_INDEXER_SIGNER_MAX_PER_MINUTE", "100000"),
            ("CUSTODY_INDEXER_WORKER_LEASE", self.lease),
            ("CUSTODY_INDEXER_CHAINS", chains.as_str()),
        ];
        let extra: Vec<(&str, &str)> = self.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let process = self.env.listen("run", self.chain, port, &[&env[..], &extra[..]].concat());
        let healthz = format!("http://127.0.0.1:{port}/healthz");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !answers(&healthz).await {
            assert!(std::time::Instant::now() < deadline, "the API did not answer: {}", self.env.run_logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.instances.push(Instance { process, port, number });
    }

    /// The instances that made calls of `methods`, in the order of the
    /// calls, each run of calls by one instance as one entry.
    pub fn runs(&self, methods: &[&str]) -> Vec<usize> {
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
    pub fn assert_one_at_a_time(&self, what: &str, methods: &[&str]) {
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

    pub fn store(&self) -> &Store {
        &self.db.store
    }

    /// The chain's `kind` lease, once taken.
    pub async fn lease(&self, kind: WorkerKind) -> Option<WorkerLease> {
        let leases = self.store().worker_leases().await.unwrap();
        leases.into_iter().find(|l| l.kind == kind && l.chain == self.chain)
    }

    /// The live instance holding the chain's `kind` lease, once one does.
    pub async fn holder(&self, kind: WorkerKind) -> usize {
        eventually(Duration::from_secs(30), &format!("a live {kind} holder"), || async {
            let lease = self.lease(kind).await?;
            let held = lease.held;
            let index = self.instances.iter().position(|i| owner_pid(&lease) == i.process.id());
            index.filter(|_| held)
        })
        .await
    }

    /// SIGKILLs the instance holding `kind`; returns the lease's epoch then.
    pub async fn kill_holder(&mut self, kind: WorkerKind) -> i64 {
        let index = self.holder(kind).await;
        let epoch = self.lease(kind).await.unwrap().epoch;
        let mut killed = self.instances.remove(index);
        killed.process.kill().unwrap();
        killed.process.wait().unwrap();
        self.killed.push(killed.number);
        epoch
    }

    /// Posts `order` through instance `via`, again after a rate limit as
    /// a client does; the transfer's id.
    pub async fn post(&self, via: usize, order: &Order) -> String {
        let amount = Amount::from_raw(U256::from(order.raw), order.decimals);
        let body = &json!({
            "request_id": uuid::Uuid::new_v4().to_string(), "account_id": order.account,
            "amount": amount.to_string(), "currency_symbol": order.symbol,
            "address_destination": { "address": order.to, "chain": self.chain.as_str() },
        });
        let url = format!("http://127.0.0.1:{}/v2/crypto/transfers", self.instances[via].port);
        let mut answer = send_json(Method::POST, &url, Some(&self.key), Some(body)).await;
        while answer.status == 429 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            answer = send_json(Method::POST, &url, Some(&self.key), Some(body)).await;
        }
        assert_eq!(answer.status, 201, "{body}: {:?}", answer.body);
        answer.body["id"].as_str().unwrap().to_string()
    }

    pub async fn status(&self, id: &str) -> String {
        let url = format!("http://127.0.0.1:{}/v2/crypto/transfers/{id}", self.instances[0].port);
        let mut answer = send(Method::GET, &url, Some(&self.key)).await;
        while answer.status == 429 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            answer = send(Method::GET, &url, Some(&self.key)).await;
        }
        answer.body["status"].as_str().unwrap_or_default().to_string()
    }

    /// After a random pause of up to 2 s, kills the holder of the sender
    /// (even rounds) or the watcher (odd ones); what was killed, at which
    /// epoch.
    pub async fn kill_a_holder(&mut self, round: usize) -> (WorkerKind, i64) {
        let random = u64::from(uuid::Uuid::new_v4().as_bytes()[0]);
        tokio::time::sleep(Duration::from_millis(random * 2000 / 255)).await;
        let kind = if round.is_multiple_of(2) { WorkerKind::Sender } else { WorkerKind::Watcher };
        (kind, self.kill_holder(kind).await)
    }

    /// Each killed holder's worker was taken over by a live instance.
    pub async fn assert_taken_over(&self, killed: &[(WorkerKind, i64)]) {
        for (kind, killed_at) in killed {
            self.holder(*kind).await;
            let now = self.lease(*kind).await.unwrap().epoch;
            assert!(now > *killed_at, "{kind}: taken over after the kill ({killed_at} -> {now})");
        }
    }

    /// Waits until every transfer of `ids` and at least `deposits` deposits
    /// of `account` are `CONFIRMED`, calling `nudge` (to mine a block, say)
    /// between looks; no transfer may end otherwise on the way.
    pub async fn all_confirmed<F: Future<Output = ()>>(
        &self,
        ids: &[String],
        account: &str,
        deposits: usize,
        nudge: impl Fn() -> F,
    ) {
        eventually(Duration::from_secs(300), "every transfer and deposit CONFIRMED", || async {
            nudge().await;
            let mut confirmed = 0;
            for (_, status, count) in self.store().transfer_counts().await.unwrap() {
                let status = status.as_str();
                let open = ["ACCEPTED", "SUBMITTED", "CONFIRMED"];
                assert!(open.contains(&status), "{count} transfers {status}");
                confirmed += if status == "CONFIRMED" { count } else { 0 };
            }
            let seen = self.store().deposits_of_account(account).await.unwrap();
            let deposited =
                seen.len() >= deposits && seen.iter().all(|d| d.status == DepositStatus::Confirmed);
            (confirmed == ids.len() as u64 && deposited).then_some(())
        })
        .await;
        for id in ids {
            assert_eq!(
                self.status(id).await,
                "CONFIRMED",
                "{id} as the API serves it: {}",
                self.env.run_logs()
            );
        }
    }

    /// `account`'s deposits are `raw` (base units of an asset of
    /// `decimals`), each once: none missed or doubled.
    pub async fn assert_deposits(&self, account: &str, raw: &[u128], decimals: u8) {
        let seen = self.store().deposits_of_account(account).await.unwrap();
        let mut got: Vec<String> = seen.iter().map(|d| d.amount.clone()).collect();
        let major = |raw: &u128| Amount::from_raw(U256::from(*raw), decimals).to_string();
        let mut expected: Vec<String> = raw.iter().map(major).collect();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "no deposit missed or doubled");
    }

    /// `health` names a live instance holding each of the chain's workers.
    pub fn assert_health_names_live_holders(&self) {
        let health = self.env.output(&["health", "--json", "--chain", self.chain.as_str()]);
        let report: Value = serde_json::from_slice(&health.stdout).unwrap();
        let workers = report["chains"][0]["workers"].as_array().unwrap().clone();
        assert_eq!(workers.len(), 2, "{report}");
        for worker in workers {
            assert_eq!(worker["held"], true, "{worker}");
            let pid: u32 = worker["instance"].as_str().unwrap().split('/').nth(1).unwrap().parse().unwrap();
            assert!(
                self.instances.iter().any(|i| i.process.id() == pid),
                "{worker}: held by a live instance"
            );
        }
    }
}

/// The process id in an instance name `host/pid/tag`.
fn owner_pid(lease: &WorkerLease) -> u32 {
    lease.owner.split('/').nth(1).and_then(|p| p.parse().ok()).unwrap_or(0)
}
