//! What a wrong setup makes the indexer wait on is said within a minute, at
//! the default log level (`info`) and in `health`: a node that pruned the
//! range, an RPC of another chain, a method the RPC refuses, an unfunded
//! gas sponsor, a webhook endpoint that never answers, and a `backfill` of
//! slots the node does not hold. A tenant's failing webhook and an unfunded
//! sponsor are warnings: `health` stays healthy.

use crate::common;

use std::{
    path::PathBuf,
    process::Stdio,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, U256},
    transports::http::reqwest::Method,
};
use common::{
    Anvil, CHAIN, OPERATOR_TOKEN,
    api::{answers, send, send_json},
    chain_toml,
    cli::{Env, Process, terminate},
    dead_port, eventually,
    receiver::Receiver,
    solana::SolanaNode,
    transfers::MNEMONIC,
};
use custody_indexer::{chain::Chain, conditions};
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;

const SOLANA: Chain = Chain::SolanaDevnet;
/// The longest a condition may take to show.
const MINUTE: Duration = Duration::from_secs(60);

/// A `run` of one chain at the default log level, its log in a file.
struct Run {
    process: Process,
    log: PathBuf,
    port: u16,
}

impl Run {
    fn start(env: &Env, chain: Chain, vars: &[(&str, &str)]) -> Self {
        let port = dead_port();
        let log = env.dir.path().join(format!("run-{}.log", uuid::Uuid::new_v4()));
        let process = env
            .command(&["run", "--chain", chain.as_str(), "--listen", &format!("127.0.0.1:{port}")])
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .map(Process)
            .unwrap();
        Self { process, log, port }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// The log's lines at `level` (`WARN`, `ERROR`, `INFO`) that contain `needle`.
    fn lines(&self, level: &str, needle: &str) -> Vec<String> {
        self.log().lines().filter(|l| l.contains(level) && l.contains(needle)).map(String::from).collect()
    }

    /// Waits until the log holds a line at `level` containing `needle`.
    async fn logged(&self, level: &str, needle: &str) -> String {
        let what = format!("a {level} line with {needle:?}");
        eventually(MINUTE, &what, || async { self.lines(level, needle).into_iter().next() }).await
    }

    /// Waits (a minute at most) for `run` to exit on its own.
    async fn exited(&mut self) -> std::process::ExitStatus {
        let child = &mut self.process.0;
        eventually(MINUTE, "run to exit", || {
            let status = child.try_wait().unwrap();
            async move { status }
        })
        .await
    }
}

/// `health --json`: its exit code and report.
fn health(env: &Env) -> (Option<i32>, Value) {
    let out = env.output(&["health", "--json"]);
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap())
}

/// `chain`'s part of a health report.
fn chain_of(report: &Value, chain: Chain) -> Value {
    let chains = report["chains"].as_array().cloned().unwrap_or_default();
    chains.into_iter().find(|c| c["chain"] == chain.as_str()).unwrap_or(Value::Null)
}

/// Waits until `health` reports a problem of `chain` containing `needle`.
async fn health_problem(env: &Env, chain: Chain, needle: &str) -> (Option<i32>, Value) {
    eventually(MINUTE, &format!("health to name {needle:?}"), || async {
        let (code, report) = health(env);
        let problems = chain_of(&report, chain)["problems"].to_string();
        problems.contains(needle).then_some((code, report))
    })
    .await
}

/// Waits until `health` warns about something containing `needle`.
async fn health_warning(env: &Env, needle: &str) -> (Option<i32>, Value) {
    eventually(MINUTE, &format!("health to warn {needle:?}"), || async {
        let (code, report) = health(env);
        report["warnings"].to_string().contains(needle).then_some((code, report))
    })
    .await
}

fn solana_file(node: &SolanaNode, url: &str, genesis_hash: &str, extra: &str) -> String {
    format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{genesis_hash}\"\nrpc_urls = [\"{url}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nstart_block = {}\n{extra}\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.first_slot
    )
}

#[tokio::test]
async fn an_evm_rpc_of_another_chain_stops_run_and_is_named_in_health() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, "chain_id = 1"));
    let mut run = Run::start(&env, CHAIN, &[]);
    assert!(!run.exited().await.success());
    let refused = run.logged("ERROR", "answers chain id 31337, expected 1").await;
    assert!(refused.contains("refusing to index it"), "{refused}");
    let (code, report) = health_problem(&env, CHAIN, "answers chain id 31337, expected 1").await;
    assert_eq!(code, Some(1), "{report}");
    assert!(chain_of(&report, CHAIN)["problems"].to_string().contains("cannot progress"), "{report}");
}

#[tokio::test]
async fn a_solana_rpc_of_another_cluster_stops_run_and_is_named_in_health() {
    let node = SolanaNode::start().await;
    let other = "11111111111111111111111111111111";
    let env = Env::with_chain_file(&solana_file(&node, &node.url, other, ""));
    let mut run = Run::start(&env, SOLANA, &[]);
    assert!(!run.exited().await.success());
    let named = format!("serves cluster {}, expected {other}", node.genesis_hash);
    run.logged("ERROR", &named).await;
    let (code, _) = health_problem(&env, SOLANA, &named).await;
    assert_eq!(code, Some(1));
}

#[tokio::test]
async fn a_method_the_rpc_refuses_is_warned_once_and_makes_the_chain_unhealthy_at_once() {
    let anvil = Anvil::start().await;
    anvil.mine(10).await;
    let proxy = common::proxy::start(anvil.url()).await;
    let refusal = "the method debug_traceBlockByHash does not exist/is not available";
    proxy.faults.method_errors.lock().unwrap().push((
        "debug_traceBlockByHash".into(),
        -32601,
        refusal.into(),
        u32::MAX,
    ));
    let env = Env::with_chain_file(&chain_toml(std::slice::from_ref(&proxy.url), None, "traces = true"));
    let run = Run::start(&env, CHAIN, &[]);
    let warned = run.logged("WARN", "the watcher cannot progress").await;
    assert!(warned.contains(refusal), "{warned}");
    let (code, report) = health_problem(&env, CHAIN, refusal).await;
    assert_eq!(code, Some(1), "{report}");
    // Retried with back-off, logged once a minute: fewer lines than failures.
    eventually(MINUTE, "three refused calls", || async {
        (proxy.faults.failed.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    let lines = run.lines("WARN", "the watcher cannot progress").len();
    assert!(lines < proxy.faults.failed.load(Ordering::SeqCst) as usize, "{}", run.log());
}

#[tokio::test]
async fn an_evm_node_that_expired_the_history_is_warned_and_makes_the_chain_unhealthy() {
    let anvil = Anvil::start().await;
    anvil.mine(10).await;
    let proxy = common::proxy::start(anvil.url()).await;
    // geth's answer for blocks past its history expiry (EIP-4444).
    let expired = "pruned history unavailable";
    proxy.faults.method_errors.lock().unwrap().push(("eth_getLogs".into(), 4444, expired.into(), u32::MAX));
    // A token to watch: its transfers are read with eth_getLogs.
    let token = anvil.deploy_token("TUSD").await.to_string();
    let env = Env::with_chain_file(&chain_toml(std::slice::from_ref(&proxy.url), Some(&token), ""));
    env.add_account("acc-1", "0x00000000000000000000000000000000000000a1", CHAIN);
    let run = Run::start(&env, CHAIN, &[]);
    let warned = run.logged("WARN", "the watcher cannot progress").await;
    assert!(warned.contains(expired), "{warned}");
    let (code, report) = health_problem(&env, CHAIN, expired).await;
    assert_eq!(code, Some(1), "a node without the history cannot index it: {report}");
    assert_eq!(chain_of(&report, CHAIN)["healthy"], false, "{report}");
}

#[tokio::test]
async fn an_rpc_node_fallen_behind_the_indexed_blocks_is_warned_and_shown_in_health() {
    let anvil = Anvil::start().await;
    anvil.mine(20).await;
    let proxy = common::proxy::start(anvil.url()).await;
    let env = Env::with_chain_file(&chain_toml(std::slice::from_ref(&proxy.url), None, ""));
    let mut first = Run::start(&env, CHAIN, &[]);
    eventually(MINUTE, "block 20 indexed", || async {
        (chain_of(&health(&env).1, CHAIN)["indexed"] == 20).then_some(())
    })
    .await;
    terminate(&mut first.process.0);
    // Restarted on a node that answers a head of 5: it fell behind (or stalled).
    proxy.faults.stale.lock().unwrap().push(("eth_blockNumber".into(), json!("0x5"), u32::MAX));
    let run = Run::start(&env, CHAIN, &[]);
    let named = "the rpc node's head 5 is below block 20, indexed already";
    run.logged("WARN", named).await;
    let (_, report) = health_warning(&env, named).await;
    assert!(chain_of(&report, CHAIN)["warnings"].to_string().contains(named), "{report}");
}

#[tokio::test]
async fn a_live_watcher_on_a_pruned_solana_node_warns_and_is_unhealthy_at_once() {
    let node = SolanaNode::start().await;
    while node.slot(CommitmentConfig::confirmed()).await < node.first_slot + 30 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first_available = node.slot(CommitmentConfig::confirmed()).await;
    let proxy = common::proxy::start(node.url.clone()).await;
    proxy.faults.pruned_below.store(first_available, Ordering::SeqCst);
    // The watcher starts at the node's first slot, below the proxy's ledger.
    let env = Env::with_chain_file(&solana_file(&node, &proxy.url, &node.genesis_hash, ""));
    let run = Run::start(&env, SOLANA, &[]);
    let named = format!("below slot {first_available}, the first the RPC node still holds");
    run.logged("WARN", &named).await;
    let (code, report) = health_problem(&env, SOLANA, &named).await;
    assert_eq!(code, Some(1), "{report}");
    let problems = chain_of(&report, SOLANA)["problems"].to_string();
    assert!(problems.contains("the watcher cannot progress"), "{report}");
    // Each failed step asks for the first available slot; lines are fewer.
    let asked = || {
        let calls = proxy.faults.calls.lock().unwrap();
        calls.iter().filter(|(_, method)| method == "getFirstAvailableBlock").count()
    };
    eventually(MINUTE, "three failed steps", || async { (asked() >= 3).then_some(()) }).await;
    assert!(run.lines("WARN", &named).len() < asked(), "{}", run.log());
}

#[tokio::test]
async fn a_backfill_below_the_nodes_first_slot_fails_within_a_minute_saying_why() {
    let node = SolanaNode::start().await;
    node.wait_finalized(node.first_slot + 5).await;
    let env = Env::with_chain_file(&solana_file(&node, &node.url, &node.genesis_hash, ""));
    let to = (node.first_slot + 5).to_string();
    let started = Instant::now();
    let out = env.output(&["backfill", "--chain", SOLANA.as_str(), "--from", "0", "--to", &to]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("backfill below the first slot answered in {:?}", started.elapsed());
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let named = format!("slot 0 is below slot {}, the first the RPC node still holds", node.first_slot);
    assert!(stderr.contains(&named), "{stderr}");
}

#[tokio::test]
async fn an_unfunded_gas_sponsor_is_a_warning_naming_it_until_funded() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let run = Run::start(&env, CHAIN, &[("CUSTODY_INDEXER_MNEMONIC", MNEMONIC)]);
    let warned = run.logged("WARN", "the gas sponsor").await;
    // Deposits are still indexed and the API answers: healthy, with a warning.
    let (code, report) = eventually(MINUTE, "a healthy chain with the sponsor's warning", || async {
        let (code, report) = health_warning(&env, "the gas sponsor").await;
        (chain_of(&report, CHAIN)["healthy"] == true).then_some((code, report))
    })
    .await;
    assert_eq!(code, Some(0), "{report}");
    assert!(chain_of(&report, CHAIN)["warnings"].to_string().contains("the gas sponsor"), "{report}");
    // Beside the production warning of its keys (a mnemonic, allowed here).
    let kinds: Vec<&str> =
        report["conditions"].as_array().unwrap().iter().filter_map(|c| c["kind"].as_str()).collect();
    assert_eq!(kinds, ["local_keys", "sponsor_unfunded"], "{report}");
    let condition = &report["conditions"][1];
    assert_eq!(
        (condition["kind"].as_str(), condition["chain"].as_str()),
        (Some("sponsor_unfunded"), Some("ETHEREUM_TESTNET"))
    );
    let sponsor: Address = condition["subject"].as_str().unwrap().parse().unwrap();
    assert!(warned.contains(&sponsor.to_checksum(None)) && warned.contains("holds 0 wei"), "{warned}");
    assert!(!run.log().contains(MNEMONIC.split(' ').next().unwrap()), "no key material in the log");

    anvil.send_eth(anvil.accounts[0], sponsor, U256::from(10u64).pow(U256::from(18u64))).await;
    run.logged("INFO", "is funded: cleared").await;
    eventually(MINUTE, "the condition cleared", || async {
        let (code, report) = health(&env);
        let unfunded =
            report["conditions"].as_array().unwrap().iter().any(|c| c["kind"] == "sponsor_unfunded");
        (code == Some(0) && !unfunded).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_webhook_that_never_answers_is_a_warning_never_a_reason_to_be_unready() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let key = env.organization_with_key();
    let alice = anvil.accounts[1];
    env.add_account_of("acme", "alice", "SEGREGATED", &alice.to_string(), CHAIN);
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_secs(3600));
    let run = Run::start(
        &env,
        CHAIN,
        &[
            ("ALLOW_PRIVATE_WEBHOOK_URLS", "true"),
            ("CUSTODY_INDEXER_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
            ("CUSTODY_INDEXER_WEBHOOK_TIMEOUT", "1s"),
        ],
    );
    let base = format!("http://127.0.0.1:{}", run.port);
    eventually(MINUTE, "the API", || async { answers(&format!("{base}/healthz")).await.then_some(()) }).await;
    let body = json!({ "url": receiver.url, "label": "ledger" });
    let created = send_json(Method::POST, &format!("{base}/v2/webhooks"), Some(&key), Some(&body)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let webhook = created.body["id"].as_str().unwrap().to_string();
    anvil.send_eth(anvil.accounts[0], alice, U256::from(1_000u64)).await;

    let warned = run.logged("WARN", &format!("webhook {webhook}")).await;
    assert!(warned.contains("did not answer"), "{warned}");
    let (code, report) = health_warning(&env, &format!("webhook {webhook}")).await;
    assert_eq!(code, Some(0), "a tenant's endpoint never makes the service unhealthy: {report}");
    assert_eq!(report["healthy"], true);
    let text = env.output(&["health"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("warning: webhook {webhook}")) && text.contains("healthy"), "{text}");
    let ready = send(Method::GET, &format!("{base}/readyz"), Some(OPERATOR_TOKEN)).await;
    assert_eq!(ready.status, 200, "{:?}", ready.body);
    assert!(ready.body["warnings"].to_string().contains(&webhook), "{:?}", ready.body);
    assert!(!ready.body["warnings"].to_string().contains(&receiver.url), "the host only, not the URL");
}

#[tokio::test]
async fn a_condition_keeps_its_first_time_until_cleared_on_both_stores() {
    for backend in [common::Backend::Sqlite, common::Backend::Postgres] {
        let db = common::TestDb::new(backend).await;
        let store = &db.store;
        conditions::raise(store, Some(CHAIN), "sponsor_unfunded", "0xabc", "empty").await.unwrap();
        conditions::raise(store, None, "webhook_failing", "hook-1", "times out").await.unwrap();
        let first = store.conditions().await.unwrap();
        assert_eq!(first.len(), 2, "{backend:?}");
        let since = first.iter().find(|c| c.chain == Some(CHAIN)).unwrap().since;
        tokio::time::sleep(Duration::from_millis(5)).await;
        conditions::raise(store, Some(CHAIN), "sponsor_unfunded", "0xabc", "still empty").await.unwrap();
        let again = store.conditions().await.unwrap();
        let sponsor = again.iter().find(|c| c.chain == Some(CHAIN)).unwrap();
        assert_eq!((sponsor.message.as_str(), sponsor.since), ("still empty", since));
        assert!(sponsor.seen_at > sponsor.since, "{backend:?}");
        let webhook = again.iter().find(|c| c.chain.is_none()).unwrap();
        assert_eq!((webhook.kind.as_str(), webhook.subject.as_str()), ("webhook_failing", "hook-1"));

        conditions::clear(store, Some(CHAIN), "sponsor_unfunded", "0xabc").await.unwrap();
        conditions::clear(store, Some(CHAIN), "sponsor_unfunded", "0xabc").await.unwrap();
        let left = store.conditions().await.unwrap();
        assert_eq!(left.iter().map(|c| c.subject.as_str()).collect::<Vec<_>>(), ["hook-1"], "{backend:?}");

        // Deleting a webhook clears its condition: nothing else ever would.
        let hook = common::webhook(store, "default", ("https://hooks.example/x", ""), "whsec_test").await;
        conditions::raise(store, None, "webhook_failing", &hook.id, "times out").await.unwrap();
        custody_indexer::webhooks::delete(store, None, &hook.id, &custody_indexer::audit::Actor::System)
            .await
            .unwrap();
        let left = store.conditions().await.unwrap();
        assert_eq!(left.iter().map(|c| c.subject.as_str()).collect::<Vec<_>>(), ["hook-1"], "{backend:?}");
    }
}
