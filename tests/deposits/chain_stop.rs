//! A chain whose watcher cannot continue (a reorg deeper than its
//! `reorg_window`) stops alone: the other chain, the senders and the API keep
//! running; `health`, `/readyz` and `/metrics` show it; no instance runs its
//! watcher again until `chains resume`.

use crate::common;

use std::{path::PathBuf, process::Stdio, time::Duration};

use alloy::{primitives::U256, transports::http::reqwest::Method};
use common::{
    Anvil, CHAIN, OPERATOR_TOKEN,
    api::{answers, send},
    chain_toml,
    cli::{Env, Process, terminate},
    db::{Backend, TestDb},
    dead_port, eventually,
    transfers::MNEMONIC,
};
use custody_indexer::{
    chain::Chain,
    store::{Store, WorkerKind},
};
use serde_json::Value;

/// The chain that keeps running: a second anvil labelled Base Sepolia.
const OTHER: Chain = Chain::BaseSepolia;

/// An instance of `run` watching both chains, its log in a file.
struct Instance {
    process: Process,
    port: u16,
    log: PathBuf,
}

impl Instance {
    async fn start(env: &Env, name: &str) -> Self {
        let port = dead_port();
        let log = env.dir.path().join(format!("{name}.log"));
        let process = env
            .command(&["run", "--listen", &format!("127.0.0.1:{port}")])
            .env("CUSTODY_INDEXER_WORKER_LEASE", "10s")
            .env("CUSTODY_INDEXER_MNEMONIC", MNEMONIC)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .map(Process)
            .unwrap();
        let healthz = format!("http://127.0.0.1:{port}/healthz");
        eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) })
            .await;
        Self { process, port, log }
    }

    async fn get(&self, path: &str, key: Option<&str>) -> common::api::Answer {
        send(Method::GET, &format!("http://127.0.0.1:{}{path}", self.port), key).await
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    fn pid(&self) -> String {
        self.process.id().to_string()
    }
}

/// `chain`'s part of `health --json`.
fn health_of(env: &Env, chain: Chain) -> Value {
    let out = env.output(&["health", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let chains = report["chains"].as_array().unwrap();
    chains.iter().find(|c| c["chain"] == chain.as_str()).cloned().unwrap_or(Value::Null)
}

/// Waits until `account` has `n` deposits, as the API of `instance` serves them.
async fn deposits_over_api(instance: &Instance, key: &str, account: &str, n: usize) {
    let path = format!("/v2/crypto/deposits?account_id={account}");
    eventually(Duration::from_secs(30), &format!("{n} deposits of {account} over the API"), || async {
        let answer = instance.get(&path, Some(key)).await;
        (answer.body.get("deposits")?.as_array()?.len() == n).then_some(())
    })
    .await;
}

/// The instance (process id) holding `chain`'s `kind` lease, if held.
async fn holder(store: &Store, kind: WorkerKind, chain: Chain) -> Option<String> {
    let leases = store.worker_leases().await.unwrap();
    let lease = leases.into_iter().find(|l| l.kind == kind && l.chain == chain && l.held)?;
    lease.owner.split('/').nth(1).map(String::from)
}

async fn indexed_past(store: &Store, chain: Chain, block: u64) {
    eventually(Duration::from_secs(30), &format!("{chain} indexed past {block}"), || async {
        (store.chain_state(chain).await.unwrap()?.next_block > block).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_reorg_deeper_than_the_window_stops_its_chain_alone_until_resumed() {
    let (stopping, running) = (Anvil::start().await, Anvil::start_with(&["--chain-id", "84532"]).await);
    // The URL carries a key, which no log may show.
    let url = format!("{}/?key=TOPSECRETKEY", stopping.url());
    let mut env = Env::with_chain_file(&chain_toml(&[url], None, "reorg_window = 2"));
    let other = chain_toml(&[running.url()], None, "chain = \"BASE_SEPOLIA\"\nchain_id = 84532");
    std::fs::write(env.chains.join("base.toml"), other).unwrap();
    let db = TestDb::new(Backend::Postgres).await;
    env.database_url = db.url.clone();
    let key = env.organization_with_key();
    let (alice, bob) = (stopping.accounts[1], running.accounts[2]);
    env.add_account_of("acme", "alice", "SEGREGATED", &alice.to_string(), CHAIN);
    env.add_account_of("acme", "bob", "SEGREGATED", &bob.to_string(), OTHER);
    let first = Instance::start(&env, "first").await;

    stopping.send_eth(stopping.accounts[0], alice, U256::from(1_000u64)).await;
    stopping.mine(8).await;
    let head = stopping.head().await;
    indexed_past(&db.store, CHAIN, head).await;
    deposits_over_api(&first, &key, "alice", 1).await;

    // Five blocks replaced; the store keeps the hashes of the last two.
    stopping.reorg(5, vec![]).await;
    let stopped = eventually(Duration::from_secs(30), "the chain STOPPED in health", || async {
        let chain = health_of(&env, CHAIN);
        (chain["status"] == "STOPPED").then_some(chain)
    })
    .await;
    let reason = stopped["stop"]["reason"].as_str().unwrap();
    assert!(reason.contains("reorg deeper than the 2 stored block hashes"), "{stopped}");
    assert_eq!(stopped["healthy"], false);
    assert_eq!(health_of(&env, OTHER)["status"], "HEALTHY");
    let text = env.output(&["health"]);
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("STOPPED") && text.contains("chains resume ETHEREUM_TESTNET"), "{text}");

    // The process, the API, the other chain and the senders keep running.
    let mut first = first;
    assert!(first.process.try_wait().unwrap().is_none(), "run keeps running: {}", first.log());
    running.send_eth(running.accounts[0], bob, U256::from(2_000u64)).await;
    deposits_over_api(&first, &key, "bob", 1).await;
    let metrics = first.get("/metrics", Some(OPERATOR_TOKEN)).await.body;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("custody_indexer_chain_stopped{chain=\"ETHEREUM_TESTNET\"} 1"), "{metrics}");
    assert!(metrics.contains("custody_indexer_chain_stopped{chain=\"BASE_SEPOLIA\"} 0"), "{metrics}");
    let ready = first.get("/readyz", Some(OPERATOR_TOKEN)).await;
    assert_eq!(ready.status, 503);
    assert!(ready.body["problems"].to_string().contains("ETHEREUM_TESTNET: STOPPED"), "{:?}", ready.body);
    assert_eq!(holder(&db.store, WorkerKind::Sender, CHAIN).await, Some(first.pid()), "the sender runs");
    let log = first.log();
    assert!(log.contains("ERROR") && log.contains("chain STOPPED on every instance"), "{log}");
    assert!(!log.contains("TOPSECRETKEY"), "{log}");

    // Another instance does not take the stopped chain up, even alone.
    let second = Instance::start(&env, "second").await;
    eventually(Duration::from_secs(30), "the second instance to see the stop", || async {
        second.log().contains("chain STOPPED: its watcher runs nowhere").then_some(())
    })
    .await;
    assert!(terminate(&mut first.process).success(), "a clean stop: {}", first.log());
    eventually(Duration::from_secs(30), "the second instance to take the other chain", || async {
        (holder(&db.store, WorkerKind::Watcher, OTHER).await == Some(second.pid())).then_some(())
    })
    .await;
    running.send_eth(running.accounts[0], bob, U256::from(3_000u64)).await;
    deposits_over_api(&second, &key, "bob", 2).await;
    assert_eq!(holder(&db.store, WorkerKind::Watcher, CHAIN).await, None, "{}", second.log());
    assert_eq!(health_of(&env, CHAIN)["status"], "STOPPED");

    // Resumed (its cursor rewound below the reorg), it runs again.
    let ancestor = (head - 5).to_string();
    let resumed =
        env.ok(&["chains", "resume", CHAIN.as_str(), "--by", "oncall-ana", "--rewind-to", &ancestor]);
    assert!(resumed.contains("resumed ETHEREUM_TESTNET by oncall-ana"), "{resumed}");
    stopping.send_eth(stopping.accounts[0], alice, U256::from(4_000u64)).await;
    stopping.mine(3).await;
    deposits_over_api(&second, &key, "alice", 2).await;
    let chain = health_of(&env, CHAIN);
    assert_ne!(chain["status"], "STOPPED", "{chain}");
    assert_eq!(holder(&db.store, WorkerKind::Watcher, CHAIN).await, Some(second.pid()));
    let metrics = second.get("/metrics", Some(OPERATOR_TOKEN)).await.body;
    assert!(
        metrics.as_str().unwrap().contains("custody_indexer_chain_stopped{chain=\"ETHEREUM_TESTNET\"} 0")
    );
    let stops = env.ok(&["chains", "stops", CHAIN.as_str()]);
    assert!(stops.contains("reorg deeper") && stops.contains("by oncall-ana"), "{stops}");
}
