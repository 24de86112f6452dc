//! Several `run` instances on one PostgreSQL and one anvil, each reaching
//! anvil through its own fault proxy (so calls tell which instance made
//! them), with every sending route's wallets funded: the omnibus wallet
//! (ETH, TUSD), the sponsor, and `SEGREGATED` payers holding TUSD (sent
//! with a gas top-up) and USDC (sent by EIP-3009 authorization).

use std::{collections::BTreeSet, sync::atomic::Ordering, time::Duration};

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    transports::http::reqwest::Method,
};
use custody_indexer::store::{Store, WorkerKind, WorkerLease};
use serde_json::{Value, json};

use super::{
    Anvil, CHAIN,
    anvil::Mined,
    api::{answers, send, send_json},
    chain_toml,
    cli::{Env, Process},
    db::{Backend, TestDb},
    dead_port, eventually, proxy,
    transfers::{ETH, MNEMONIC},
};

/// Each payer's TUSD and USDC, in base units (6 decimals).
const PAYER_TOKENS: u64 = 1_000_000_000;

pub struct Instance {
    pub process: Process,
    pub port: u16,
    /// Its order of start, which names it in [`Cluster::proxies`].
    pub number: usize,
}

/// A transfer of `raw` base units of `symbol` from `account` to `to`, a
/// fresh address: paid twice, it shows.
#[derive(Debug, Clone)]
pub struct Order {
    pub account: String,
    pub symbol: &'static str,
    pub raw: u128,
    pub to: Address,
}

impl Order {
    pub fn new(account: &str, symbol: &'static str, raw: u128) -> Self {
        let to = Address::left_padding_from(&uuid::Uuid::new_v4().into_bytes());
        Self { account: account.to_string(), symbol, raw, to }
    }

    fn amount(&self) -> String {
        let decimals = if self.symbol == "ETH" { 18 } else { 6 };
        custody_indexer::amount::Amount::from_raw(U256::from(self.raw), decimals).to_string()
    }
}

pub struct Cluster {
    pub anvil: Anvil,
    pub env: Env,
    pub db: TestDb,
    /// One per instance started, in order.
    pub proxies: Vec<proxy::FaultyRpc>,
    /// Every answer of a proxy waits this long (milliseconds, min and max).
    slow_ms: (u64, u64),
    /// The worker lease's time to live.
    lease: &'static str,
    /// The instances killed, by number.
    pub killed: Vec<usize>,
    pub key: String,
    pub tusd: Address,
    pub usdc: Address,
    pub sponsor: Address,
    pub omnibus: Address,
    /// A watched `SEGREGATED` account that receives deposits.
    pub alice: Address,
    /// `SEGREGATED` accounts `payer-0`… holding TUSD and USDC.
    pub payers: Vec<Address>,
    pub instances: Vec<Instance>,
}

impl Cluster {
    /// Starts anvil with both tokens, one PostgreSQL, the wallets funded,
    /// `payers` payer accounts, and `count` `run` instances holding worker
    /// leases for `lease`.
    pub async fn start(count: usize, payers: usize, slow_ms: (u64, u64), lease: &'static str) -> Self {
        let anvil = Anvil::start().await;
        let tusd = anvil.deploy_token("TUSD").await;
        let usdc = anvil.deploy_auth_token("USDC").await;
        let mut env = Env::with_chain_file(&chain_file(&anvil.url(), tusd, usdc));
        let db = TestDb::new(Backend::Postgres).await;
        env.database_url = db.url.clone();
        let key = env.organization_with_key();
        let wallets: Value = serde_json::from_str(&cli(&env, &["wallets", "list", "--json"])).unwrap();
        let wallet = |role: &str| wallets[0][role].as_str().unwrap().parse::<Address>().unwrap();
        let (sponsor, omnibus) = (wallet("sponsor"), wallet("omnibus"));
        assert_eq!(create(&env, "treasury", "OMNIBUS"), omnibus);
        let mut cluster = Self {
            alice: create(&env, "alice", "SEGREGATED"),
            payers: (0..payers).map(|i| create(&env, &format!("payer-{i}"), "SEGREGATED")).collect(),
            anvil,
            env,
            db,
            proxies: Vec::new(),
            slow_ms,
            lease,
            killed: Vec::new(),
            key,
            tusd,
            usdc,
            sponsor,
            omnibus,
            instances: Vec::new(),
        };
        cluster.fund().await;
        for _ in 0..count {
            cluster.add_instance().await;
        }
        cluster
    }

    async fn fund(&self) {
        let (rich, minter) = (self.anvil.accounts[0], self.anvil.accounts[5]);
        for wallet in [self.sponsor, self.omnibus] {
            self.anvil.send_eth(rich, wallet, U256::from(1000 * ETH)).await;
        }
        let tokens = U256::from(PAYER_TOKENS);
        self.anvil.token(self.tusd).mint(self.omnibus, tokens * U256::from(100)).from(minter).mined().await;
        for payer in &self.payers {
            for token in [self.tusd, self.usdc] {
                self.anvil.token(token).mint(*payer, tokens).from(minter).mined().await;
            }
        }
    }

    pub async fn add_instance(&mut self) {
        let number = self.proxies.len();
        let proxy = proxy::start(self.anvil.url()).await;
        proxy.faults.slow_min_ms.store(self.slow_ms.0, Ordering::SeqCst);
        proxy.faults.slow_max_ms.store(self.slow_ms.1, Ordering::SeqCst);
        let chains = self.env.dir.path().join(format!("chains-{number}"));
        std::fs::create_dir_all(&chains).unwrap();
        std::fs::write(chains.join("test.toml"), chain_file(&proxy.url, self.tusd, self.usdc)).unwrap();
        let chains = chains.display().to_string();
        self.proxies.push(proxy);
        let port = dead_port();
        let env = [
            ("CUSTODY_INDEXER_MNEMONIC", MNEMONIC),
            ("CUSTODY_INDEXER_WORKER_LEASE", self.lease),
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

    /// The live instance holding the chain's `kind` lease, once one does.
    pub async fn holder(&self, kind: WorkerKind) -> usize {
        eventually(Duration::from_secs(30), &format!("a live {kind} holder"), || async {
            let lease = lease(self.store(), kind).await?;
            let held = lease.held;
            let index = self.instances.iter().position(|i| owner_pid(&lease) == i.process.id());
            index.filter(|_| held)
        })
        .await
    }

    /// SIGKILLs the instance holding `kind`; returns the lease's epoch then.
    pub async fn kill_holder(&mut self, kind: WorkerKind) -> i64 {
        let index = self.holder(kind).await;
        let epoch = lease(self.store(), kind).await.unwrap().epoch;
        let mut killed = self.instances.remove(index);
        killed.process.kill().unwrap();
        killed.process.wait().unwrap();
        self.killed.push(killed.number);
        epoch
    }

    /// Posts `order` through instance `via`; the transfer's id.
    pub async fn post(&self, via: usize, order: &Order) -> String {
        let body = json!({
            "request_id": uuid::Uuid::new_v4().to_string(), "account_id": order.account,
            "amount": order.amount(), "currency_symbol": order.symbol,
            "address_destination": { "address": order.to.to_string(), "chain": CHAIN.as_str() },
        });
        let url = format!("http://127.0.0.1:{}/v2/crypto/transfers", self.instances[via].port);
        // As a client does: the same request again after a rate limit.
        let mut answer = send_json(Method::POST, &url, Some(&self.key), Some(&body)).await;
        while answer.status == 429 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            answer = send_json(Method::POST, &url, Some(&self.key), Some(&body)).await;
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

    /// What `order`'s destination holds of its asset.
    pub async fn received(&self, order: &Order) -> U256 {
        match order.symbol {
            "ETH" => self.anvil.provider.get_balance(order.to).await.unwrap(),
            "TUSD" => self.anvil.token(self.tusd).balanceOf(order.to).call().await.unwrap(),
            _ => self.anvil.token(self.usdc).balanceOf(order.to).call().await.unwrap(),
        }
    }

    /// `address`'s transactions mined, and counted with the pending ones.
    pub async fn nonces(&self, address: Address) -> (u64, u64) {
        let provider = &self.anvil.provider;
        let mined = provider.get_transaction_count(address).await.unwrap();
        (mined, provider.get_transaction_count(address).pending().await.unwrap())
    }
}

/// The chain file of an instance reaching anvil at `url`: TUSD and USDC
/// (EIP-3009) listed.
fn chain_file(url: &str, tusd: Address, usdc: Address) -> String {
    let mut toml = chain_toml(&[url.to_string()], Some(&tusd.to_string()), "confirmation = { depth = 2 }");
    toml.push_str(&format!(
        "\n[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = 6\neip3009 = true\n\
         \n[transfers]\nnative_usd = \"2000\"\n"
    ));
    toml
}

fn cli(env: &Env, args: &[&str]) -> String {
    let out = env.command(args).env("CUSTODY_INDEXER_MNEMONIC", MNEMONIC).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// An account `id` of `acme` of type `kind`; its address.
fn create(env: &Env, id: &str, kind: &str) -> Address {
    let identity = format!("identity-{id}");
    env.identity("acme", &identity);
    let args = ["accounts", "create", "--organization", "acme", "--account-id", id, "--identity-id"];
    let out = cli(env, &[&args[..], &[identity.as_str(), "--type", kind, "--json"]].concat());
    let account: Value = serde_json::from_str(&out).unwrap();
    account["addresses"][0]["address"].as_str().unwrap().parse().unwrap()
}

pub async fn lease(store: &Store, kind: WorkerKind) -> Option<WorkerLease> {
    store.worker_leases().await.unwrap().into_iter().find(|l| l.kind == kind && l.chain == CHAIN)
}

/// The process id in an instance name `host/pid/tag`.
fn owner_pid(lease: &WorkerLease) -> u32 {
    lease.owner.split('/').nth(1).and_then(|p| p.parse().ok()).unwrap_or(0)
}
