//! `custody-indexer dev` as a user runs it: one command, no configuration,
//! the platform offline on its own anvil and local Solana network; deposits
//! made with `dev deposit` become CONFIRMED, reach the pull API and a
//! signed webhook; a transfer sent as the printed command sends it
//! completes; the nodes stop with it; its state is kept, and `--reset`
//! starts over.

use crate::common;

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use alloy::transports::http::reqwest::Method;
use common::{
    api::{send, send_json},
    cli::{Process, terminate},
    eventually,
    receiver::Receiver,
};
use serde_json::{Value, json};

const EVM: &str = "ETHEREUM_TESTNET";
const SOLANA: &str = "SOLANA_DEVNET";

/// A running `dev --json`: its process and the line it printed.
struct Dev {
    process: Process,
    line: Value,
    log: PathBuf,
    /// The lines it prints after the first (a chain joining).
    more: std::sync::mpsc::Receiver<String>,
}

impl Dev {
    /// The next line `dev` prints, within `wait`.
    async fn next_line(&self, wait: Duration) -> Value {
        let deadline = std::time::Instant::now() + wait;
        loop {
            match self.more.try_recv() {
                Ok(line) => return serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => panic!("dev ended:\n{}", self.stderr()),
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    assert!(std::time::Instant::now() < deadline, "no second line:\n{}", self.stderr());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn field(&self, name: &str) -> &str {
        self.line[name].as_str().unwrap_or_else(|| panic!("{name} in {}", self.line))
    }

    async fn get(&self, path: &str) -> Value {
        let answer =
            send(Method::GET, &format!("{}{path}", self.field("api_url")), Some(self.field("api_key"))).await;
        assert_eq!(answer.status, 200, "GET {path}: {}", answer.body);
        answer.body
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// The processes `dev` started (its nodes), by pid.
    fn children(&self) -> BTreeSet<u32> {
        let parent = self.process.id().to_string();
        let mut children = BTreeSet::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // pid (comm) state ppid …; comm may hold spaces, so split after ')'.
            let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
            if after.split_whitespace().nth(1) == Some(parent.as_str()) {
                children.insert(entry.file_name().to_string_lossy().parse().unwrap());
            }
        }
        children
    }
}

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_custody-indexer"));
    for name in
        ["DATABASE_URL", "CUSTODY_INDEXER_CHAINS", "CUSTODY_INDEXER_LISTEN", "CUSTODY_INDEXER_ENVIRONMENT"]
    {
        command.env_remove(name);
    }
    command.env("RUST_LOG", "info");
    command
}

/// Starts `dev --json` on `state` with `args` and `env`, and reads its line.
async fn start(state: &Path, args: &[&str], env: &[(&str, &str)]) -> Dev {
    let log = state.with_extension(format!("{}.log", uuid::Uuid::new_v4()));
    let mut command = binary();
    command
        .args(["dev", "--json", "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut process = Process(command.spawn().unwrap());
    let stdout = process.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (more_tx, more) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next());
        // Keep reading: a chain that joins prints the line again, and the
        // pipe stays open.
        for line in lines.map_while(Result::ok) {
            let _ = more_tx.send(line);
        }
    });
    let line = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(600)))
        .await
        .unwrap()
        .ok()
        .flatten()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("dev printed no line: {}", std::fs::read_to_string(&log).unwrap()));
    let line = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    Dev { process, line, log, more }
}

/// `dev deposit` against the running dev; returns the printed hash.
fn deposit(state: &Path, chain: &str, asset: Option<&str>, amount: &str) -> String {
    deposit_to(state, chain, asset, amount, &[])
}

/// `dev deposit` with `extra` arguments.
fn deposit_to(state: &Path, chain: &str, asset: Option<&str>, amount: &str, extra: &[&str]) -> String {
    let mut command = binary();
    command.args([
        "dev",
        "deposit",
        "--state-dir",
        state.to_str().unwrap(),
        "--chain",
        chain,
        "--amount",
        amount,
    ]);
    if let Some(asset) = asset {
        command.args(["--asset", asset]);
    }
    command.args(extra);
    let out = command.output().unwrap();
    assert!(out.status.success(), "dev deposit {chain} {amount}: {}", String::from_utf8_lossy(&out.stderr));
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(!hash.is_empty() && !hash.contains(char::is_whitespace), "one hash: {hash:?}");
    hash
}

/// Every field of the JSON line, as a user would check it.
fn check_line(dev: &Dev, state: &Path, webhook: Option<&str>) {
    let line = &dev.line;
    let mut keys: Vec<&str> = line.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    let mut expected = vec![
        "account_id",
        "addresses",
        "api_key",
        "api_url",
        "assets",
        "chains_dir",
        "console_enrol_url",
        "console_url",
        "database_url",
        "environment",
        "identity_id",
        "operator_enrol_urls",
        "operator_keys",
        "organization",
        "rpc_urls",
    ];
    if webhook.is_some() {
        expected.push("webhook");
    }
    expected.sort();
    assert_eq!(keys, expected, "{line}");
    assert_eq!(line["environment"], "sandbox");
    let api = dev.field("api_url");
    assert!(api.starts_with("http://127.0.0.1:") && !api.ends_with(":0"), "{api}");
    assert!(dev.field("api_key").starts_with("cik_"));
    assert_eq!(dev.field("console_url"), format!("{api}/console/"));
    assert!(dev.field("console_enrol_url").starts_with(&format!("{api}/console/enrol/")));
    let links = line["operator_enrol_urls"].as_array().unwrap();
    let keys = line["operator_keys"].as_array().unwrap();
    assert_eq!((links.len(), keys.len()), (2, 2), "compliance and treasury: {line}");
    assert!(links.iter().all(|l| l.as_str().unwrap().starts_with(&format!("{api}/console/enrol/"))));
    assert!(keys.iter().all(|k| k.as_str().unwrap().starts_with("cio_")));
    for id in ["organization", "identity_id", "account_id"] {
        assert!(!dev.field(id).is_empty(), "{id}");
    }
    let state = state.canonicalize().unwrap();
    assert!(dev.field("database_url").starts_with(&format!("sqlite://{}", state.display())));
    let chains = PathBuf::from(dev.field("chains_dir"));
    assert!(chains.starts_with(&state));
    let files = std::fs::read_dir(&chains).unwrap().count();
    assert_eq!(files, line["rpc_urls"].as_object().unwrap().len(), "one chain file per local chain");
    for (chain, url) in line["rpc_urls"].as_object().unwrap() {
        assert!(url.as_str().unwrap().starts_with("http://127.0.0.1:"), "{chain}: {url}");
        let assets = &line["assets"][chain];
        assert_eq!(assets.as_array().unwrap().len(), 1, "{assets}");
        assert_eq!(assets[0]["symbol"], "USDC");
        assert_eq!(assets[0]["decimals"], 6);
        assert!(!assets[0]["contract_address"].as_str().unwrap().is_empty());
        assert!(line["addresses"][chain].is_string(), "an address on {chain}");
    }
    if let Some(url) = webhook {
        assert_eq!(line["webhook"]["url"], url);
        assert!(line["webhook"]["signing_secret"].as_str().unwrap().starts_with("whsec_"));
    }
}

/// Waits until the account's deposit in `hash` is CONFIRMED; returns it.
async fn confirmed(dev: &Dev, hash: &str) -> Value {
    confirmed_to(dev, dev.field("account_id"), hash).await
}

async fn confirmed_to(dev: &Dev, account: &str, hash: &str) -> Value {
    let path = format!("/v2/crypto/deposits?account_id={account}&limit=25");
    eventually(Duration::from_secs(120), &format!("deposit {hash} CONFIRMED"), || async {
        let deposits = dev.get(&path).await;
        let found = deposits["deposits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["transaction_hash"].as_str().is_some_and(|h| h.eq_ignore_ascii_case(hash)));
        found.filter(|d| d["status"] == "CONFIRMED").cloned()
    })
    .await
}

#[tokio::test]
async fn dev_runs_the_platform_offline_and_keeps_its_state_between_runs() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let receiver = Receiver::start().await;
    let dev = start(&state, &["--webhook-url", &receiver.url], &[]).await;
    check_line(&dev, &state, Some(&receiver.url));
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&state).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700, "the state directory holds keys: its owner's alone");
    for chain in [EVM, SOLANA] {
        assert!(dev.line["rpc_urls"][chain].is_string(), "{chain} runs: {}", dev.stderr());
    }
    let account = dev.get(&format!("/v2/accounts/{}", dev.field("account_id"))).await;
    assert_eq!(account["identity_id"], dev.field("identity_id"));

    deposits_are_confirmed(&dev, &state).await;
    events_are_pulled_and_signed_webhooks_arrive(&dev, &receiver).await;
    a_transfer_out_completes(&dev).await;
    an_on_ramp_completes(&dev, &state).await;
    off_ramps_pay_out_or_come_back(&dev, &state).await;
    // The operator commands act on the same store and chains.
    let health = binary()
        .args(["--database-url", dev.field("database_url"), "health", "--chains", dev.field("chains_dir")])
        .output()
        .unwrap();
    assert!(health.status.success(), "{}", String::from_utf8_lossy(&health.stdout));
    // Every USDC was minted for a wire: the books balance on both chains.
    let books = binary()
        .args(["--database-url", dev.field("database_url"), "issuance", "reconcile", "--json"])
        .args(["--chains", dev.field("chains_dir")])
        .output()
        .unwrap();
    assert!(books.status.success(), "{}", String::from_utf8_lossy(&books.stdout));
    let books: Value = serde_json::from_slice(&books.stdout).unwrap();
    assert_eq!(books.as_array().unwrap().len(), 2, "USDC on both chains: {books}");
    assert!(books.as_array().unwrap().iter().all(|b| b["minted"] != "0"), "{books}");

    let before = history(&dev).await;
    let first = stops_with_its_nodes(dev, &state);
    let mut again = start(&state, &["--nats"], &[]).await;
    kept_between_runs(&again, &first, &before).await;
    nats_holds_every_event(&again).await;
    // Killed without a chance to stop its nodes: the next dev ends them
    // (anvil writes its state on SIGTERM) and goes on with all of it.
    let before = history(&again).await;
    again.process.0.kill().unwrap();
    again.process.0.wait().unwrap();
    let mut third = start(&state, &[], &[]).await;
    assert!(third.stderr().contains("ending a node the previous dev left running"), "{}", third.stderr());
    kept_between_runs(&third, &first, &before).await;
    assert!(terminate(&mut third.process).success());

    // A chain whose node lost its state is not the one the store indexed.
    for file in ["anvil-state.json", "anvil-state.next.json"] {
        let _ = std::fs::remove_file(state.join(file));
    }
    let refused = binary()
        .args(["dev", "--json", "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{message}");
    assert!(
        message.contains("ETHEREUM_TESTNET is not the chain the store") && message.contains("--reset"),
        "{message}"
    );
    assert!(refused.stdout.is_empty(), "no line printed: {}", String::from_utf8_lossy(&refused.stdout));

    let mut reset = start(&state, &["--reset"], &[]).await;
    check_line(&reset, &state, None);
    assert_ne!(reset.line["api_key"], first["api_key"]);
    assert_ne!(reset.line["addresses"], first["addresses"]);
    assert!(terminate(&mut reset.process).success());
}

/// The account's deposits and the organization's events, as a user lists them.
async fn history(dev: &Dev) -> (Vec<Value>, Vec<Value>) {
    let deposits =
        dev.get(&format!("/v2/crypto/deposits?account_id={}&limit=25", dev.field("account_id"))).await;
    let mut events: Vec<Value> = Vec::new();
    loop {
        let after =
            events.last().map(|e| format!("&after={}", e["id"].as_str().unwrap())).unwrap_or_default();
        let page = dev.get(&format!("/v2/events?limit=100{after}")).await;
        let page = page["events"].as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        events.extend(page);
    }
    (deposits["deposits"].as_array().unwrap().clone(), events)
}

/// A later run is the same platform: the same keys, ids and tokens, every
/// deposit and event of before as it was (none sent again), and both
/// chains going on where they stood.
async fn kept_between_runs(dev: &Dev, first: &Value, before: &(Vec<Value>, Vec<Value>)) {
    for field in ["api_key", "organization", "identity_id", "account_id", "addresses", "assets"] {
        assert_eq!(dev.line[field], first[field], "{field} kept");
    }
    let deposit = deposit(&dev_state(dev), EVM, Some("USDC"), "2");
    confirmed(dev, &deposit).await;
    let signature = deposit_to(&dev_state(dev), SOLANA, None, "0.125", &[]);
    confirmed(dev, &signature).await;
    let (deposits, events) = history(dev).await;
    for old in &before.0 {
        let now = deposits.iter().find(|d| d["id"] == old["id"]).unwrap_or_else(|| panic!("{old} kept"));
        assert_eq!(now["status"], old["status"], "{now}");
    }
    assert_eq!(deposits.len(), before.0.len() + 2, "the two new deposits, nothing else");
    let mut seen = BTreeSet::new();
    for event in events.iter().filter(|e| e["type"] == "deposit_v2") {
        let state = (event["data"]["id"].to_string(), event["data"]["status"].to_string());
        assert!(seen.insert(state.clone()), "one event per state of a deposit: {state:?} twice");
    }
    assert!(before.1.iter().all(|old| events.iter().any(|e| e["id"] == old["id"])), "every event kept");
}

/// With `--nats`, every event of the outbox, those of earlier runs first,
/// reaches the local JetStream as the pull API serves it.
async fn nats_holds_every_event(dev: &Dev) {
    let url = dev.line["nats_url"].as_str().unwrap_or_else(|| panic!("nats_url in {}", dev.line));
    let (_, events) = history(dev).await;
    let client = async_nats::connect(url).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let organization = dev.field("organization").to_string();
    let count = events.len() as u64;
    let stream = eventually(Duration::from_secs(60), "every event on NATS", || {
        let js = js.clone();
        async move {
            let mut stream = js.get_stream("CUSTODY_EVENTS").await.ok()?;
            (stream.info().await.ok()?.state.messages >= count).then_some(stream)
        }
    })
    .await;
    for (seq, event) in (1..).zip(&events) {
        let message = stream.get_raw_message(seq).await.unwrap();
        let body: Value = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(&body, event, "the stream in the pull API's order");
        let subject = format!("custody.events.{organization}.{}", event["type"].as_str().unwrap());
        assert_eq!(message.subject.as_str(), subject);
    }
}

/// The state directory a running dev announced (its chains directory's parent).
fn dev_state(dev: &Dev) -> PathBuf {
    PathBuf::from(dev.field("chains_dir")).parent().unwrap().to_path_buf()
}

/// `dev deposit` of each asset on each chain, and of a token to another
/// account by `--account-id`: each becomes CONFIRMED as sent.
async fn deposits_are_confirmed(dev: &Dev, state: &Path) {
    let sent = [
        (EVM, None, "0.5", "ETH"),
        (EVM, Some("USDC"), "25", "USDC"),
        (SOLANA, None, "0.25", "SOL"),
        (SOLANA, Some("USDC"), "7.5", "USDC"),
    ];
    for (chain, asset, amount, symbol) in sent {
        let hash = deposit(state, chain, asset, amount);
        let deposit = confirmed(dev, &hash).await;
        assert_eq!(deposit["destination_chain"], chain);
        assert_eq!(deposit["currency_symbol"], symbol);
        assert_eq!(deposit["amount"], amount);
        assert_eq!(deposit["account_address"], dev.line["addresses"][chain]);
    }
    // Another account of the organization, created through the API.
    let body =
        json!({ "request_id": "second", "identity_id": dev.field("identity_id"), "type": "SEGREGATED" });
    let url = format!("{}/v2/accounts", dev.field("api_url"));
    let created = send_json(Method::POST, &url, Some(dev.field("api_key")), Some(&body)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let second = created.body["id"].as_str().unwrap().to_string();
    let hash = deposit_to(state, SOLANA, Some("USDC"), "3", &["--account-id", &second]);
    let deposit = confirmed_to(dev, &second, &hash).await;
    assert_ne!(deposit["account_address"], dev.line["addresses"][SOLANA]);
}

async fn events_are_pulled_and_signed_webhooks_arrive(dev: &Dev, receiver: &Receiver) {
    let events = dev.get("/v2/events?limit=100").await;
    let deposit_events =
        events["events"].as_array().unwrap().iter().filter(|e| e["type"] == "deposit_v2").count();
    assert!(deposit_events >= 5, "a deposit_v2 event per deposit: {events}");
    let secret = dev.line["webhook"]["signing_secret"].as_str().unwrap().to_string();
    let delivered = eventually(Duration::from_secs(60), "a deposit_v2 webhook", || async {
        let delivered = receiver.delivered();
        delivered.into_iter().find(|r| r.json()["type"] == "deposit_v2")
    })
    .await;
    assert!(delivered.signed_by(&secret), "the webhook is signed with the printed secret");
}

/// The printed command's shape: 1 USDC out of the account on the EVM chain.
async fn a_transfer_out_completes(dev: &Dev) {
    let transfer = json!({
        "request_id": uuid::Uuid::new_v4().to_string(),
        "account_id": dev.field("account_id"),
        "amount": "1",
        "currency_symbol": "USDC",
        "address_destination": { "address": "0x000000000000000000000000000000000000dEaD", "chain": EVM },
    });
    let url = format!("{}/v2/crypto/transfers", dev.field("api_url"));
    let answer = send_json(Method::POST, &url, Some(dev.field("api_key")), Some(&transfer)).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    let id = answer.body["id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(120), "the transfer CONFIRMED", || async {
        let transfer = dev.get(&format!("/v2/crypto/transfers/{id}")).await;
        assert!(!["FAILED", "DROPPED"].contains(&transfer["status"].as_str().unwrap()), "{transfer}");
        (transfer["status"] == "CONFIRMED").then_some(())
    })
    .await;
}

/// SIGTERM: dev stops cleanly, its nodes with it, and `dev deposit` says
/// none runs. Returns the line it had printed.
/// `dev on-ramp --follow`: dollars wired to a virtual account of the dev
/// account arrive as USDC, the conversion announced at each status.
async fn an_on_ramp_completes(dev: &Dev, state: &Path) {
    let out = binary()
        .args(["dev", "on-ramp", "--state-dir", state.to_str().unwrap(), "--amount", "12.34", "--follow"])
        .output()
        .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{printed}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = printed.lines().collect();
    let id = lines[0];
    assert_eq!(lines.last().copied(), Some(format!("{id} COMPLETED 12.34 USDC").as_str()), "{printed}");
    let conversion = dev.get(&format!("/v2/conversions/{id}")).await;
    assert_eq!(
        (&conversion["type"], &conversion["account_id"]),
        (&json!("ON_RAMP"), &json!(dev.field("account_id")))
    );
    let five = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"];
    assert_eq!(announced(dev, id).await, five);
}

/// The statuses `conversion_notification_update` announced for conversion `id`.
async fn announced(dev: &Dev, id: &str) -> Vec<Value> {
    let page = json!({ "events": history(dev).await.1 });
    common::api::events_about(&page, "conversion_notification_update", id)
        .iter()
        .map(|e| e["data"]["status"].clone())
        .collect()
}

/// `dev off-ramp --follow`: the dev account's USDC paid out by a US wire;
/// to an account number ending `9999` the payment comes back and the USDC
/// with it.
async fn off_ramps_pay_out_or_come_back(dev: &Dev, state: &Path) {
    let off_ramp = |number: &str| {
        let args = ["dev", "off-ramp", "--state-dir", state.to_str().unwrap(), "--amount", "2.34"];
        binary().args(args).args(["--account-number", number, "--follow"]).output().unwrap()
    };
    let out = off_ramp("000123456789");
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{printed}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = printed.lines().collect();
    let id = lines[0];
    assert_eq!(lines.last().copied(), Some(format!("{id} COMPLETED 2.34 USD").as_str()), "{printed}");
    let five = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"];
    assert_eq!(announced(dev, id).await, five);

    let out = off_ramp("000123459999");
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{printed}{}", String::from_utf8_lossy(&out.stderr));
    let id = printed.lines().next().unwrap();
    assert_eq!(printed.lines().last(), Some(format!("{id} RETURNED 2.34 USD").as_str()), "{printed}");
    let conversion = dev.get(&format!("/v2/conversions/{id}")).await;
    assert_eq!(conversion["refund_details"]["amount"], "2.34", "{conversion}");
}

fn stops_with_its_nodes(mut dev: Dev, state: &Path) -> Value {
    let children = dev.children();
    assert_eq!(children.len(), 2, "anvil and the Solana node: {children:?}");
    assert!(terminate(&mut dev.process).success(), "{}", dev.stderr());
    for pid in &children {
        assert!(gone(*pid), "node {pid} outlived dev");
    }
    assert!(!state.join("dev.json").exists(), "no dev runs any more");
    let refused = binary()
        .args(["dev", "deposit", "--state-dir", state.to_str().unwrap(), "--chain", EVM, "--amount", "1"])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && message.contains("no `custody-indexer dev` is running"),
        "{message}"
    );
    dev.line
}

#[tokio::test]
async fn without_nodes_dev_installs_anvil_says_what_else_is_missing_and_serves_the_evm_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (state, cache) = (dir.path().join("state"), dir.path().join("cache"));
    std::fs::create_dir_all(&cache).unwrap();
    let missing_bin = dir.path().join("nowhere/custody-indexer-solana-node");
    let no_source = dir.path().join("no-source");
    // No anvil anywhere either: dev installs the pinned one from npm into
    // the (empty) cache, as scripts/install-anvil.sh does.
    let env = [
        ("ANVIL_BIN", ""),
        ("SOLANA_NODE_BIN", missing_bin.to_str().unwrap()),
        ("PATH", "/usr/bin:/bin"),
        ("CUSTODY_INDEXER_CACHE", cache.to_str().unwrap()),
        ("CUSTODY_INDEXER_SOLANA_NODE_SOURCE", no_source.to_str().unwrap()),
    ];
    let mut dev = start(&state, &[], &env).await;
    check_line(&dev, &state, None);
    let stderr = dev.stderr();
    for expected in [
        "the local Solana network (custody-indexer-solana-node) is missing".to_string(),
        format!("SOLANA_NODE_BIN names {}, which does not exist", missing_bin.display()),
        format!("its source (tools/solana-node) is not at {}", no_source.display()),
        "scripts/install-solana-node.sh".to_string(),
        "Running without SOLANA_DEVNET".to_string(),
        format!("installing anvil 1.7.1 from npm into {}", cache.join("anvil-1.7.1").display()),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} in:\n{stderr}");
    }
    let chains: Vec<&String> = dev.line["rpc_urls"].as_object().unwrap().keys().collect();
    assert_eq!(chains, [EVM]);
    let hash = deposit(&state, EVM, None, "1.25");
    assert_eq!(confirmed(&dev, &hash).await["amount"], "1.25");

    // Killed outright, dev cannot stop its node: the next dev on the state
    // directory ends it.
    let children = dev.children();
    assert_eq!(children.len(), 1, "anvil alone: {children:?}");
    dev.process.kill().unwrap();
    dev.process.wait().unwrap();
    assert!(children.iter().all(|pid| !gone(*pid)), "the killed dev's anvil is still running");
    let mut next = start(&state, &[], &env).await;
    for pid in &children {
        assert!(gone(*pid), "the next dev ended the orphaned node {pid}");
    }
    assert_eq!(next.line["api_key"], dev.line["api_key"]);
    assert!(terminate(&mut next.process).success());
}

/// A signal at any moment of the setup stops `dev`: it exits, and no node
/// it started outlives it, whether the signal comes while anvil starts,
/// while the chain and the store are seeded, or as the service takes over
/// (one listener takes the signal from the start to the end).
#[tokio::test]
async fn a_signal_during_the_setup_stops_dev_and_its_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let missing_bin = dir.path().join("nowhere/custody-indexer-solana-node");
    let no_source = dir.path().join("no-source");
    for delay in [0, 150, 400, 800, 1_500, 3_000, 6_000] {
        let state = dir.path().join(format!("state-{delay}"));
        let log = dir.path().join(format!("dev-{delay}.log"));
        let mut command = binary();
        command
            .args(["dev", "--json", "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .env("SOLANA_NODE_BIN", &missing_bin)
            .env("CUSTODY_INDEXER_SOLANA_NODE_SOURCE", &no_source)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut process = Process(command.spawn().unwrap());
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let status = tokio::task::spawn_blocking(move || {
            let status = terminate(&mut process.0);
            drop(process);
            status
        });
        let status = tokio::time::timeout(Duration::from_secs(120), status)
            .await
            .unwrap_or_else(|_| panic!("dev still runs 120 s after SIGTERM at {delay} ms"))
            .unwrap();
        // Before its listener is in place dev has started nothing, and the
        // signal's default action ends it; from then on it stops by itself.
        let stderr = std::fs::read_to_string(&log).unwrap();
        let what = format!("no node left after a SIGTERM at {delay} ms ({status:?}):\n{stderr}");
        let on = &state;
        eventually(Duration::from_secs(10), &what, || async move { running_on(on).is_empty().then_some(()) })
            .await;
        assert!(!state.join("dev.json").exists(), "no dev runs any more after {delay} ms:\n{stderr}");
    }
}

/// Processes whose command line names a path under `dir`: the nodes `dev`
/// started on it.
fn running_on(dir: &Path) -> Vec<u32> {
    let dir = dir.to_string_lossy();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(dir.as_ref()) && !gone(pid) {
            pids.push(pid);
        }
    }
    pids
}

/// A missing local Solana network is built once into the cache with cargo,
/// as scripts/install-solana-node.sh does, in the background: the platform
/// is ready on its EVM chain first (its line names the Solana chain as
/// joining, and the account already has its Solana address), then starts
/// again with the Solana chain once it is built and prints its line again;
/// the next run reuses the build. The crate built here stands in for
/// tools/solana-node (whose first build takes minutes and runs in every CI
/// through the install script): a binary of the same name that execs the
/// real node, so `dev` goes on to serve the Solana chain from what it built.
#[tokio::test]
async fn a_missing_solana_node_is_built_once_into_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (state, cache, source) =
        (dir.path().join("state"), dir.path().join("cache"), dir.path().join("source"));
    let real = std::env::var("SOLANA_NODE_BIN").expect("SOLANA_NODE_BIN: run the tests with scripts/test.sh");
    std::fs::create_dir_all(source.join("src")).unwrap();
    std::fs::write(
        source.join("Cargo.toml"),
        "[package]\nname = \"custody-indexer-solana-node\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        source.join("src/main.rs"),
        format!(
            "use std::os::unix::process::CommandExt;\nfn main() {{\n    let error = \
             std::process::Command::new({real:?}).args(std::env::args().skip(1)).exec();\n    \
             panic!(\"{{error}}\");\n}}\n"
        ),
    )
    .unwrap();
    // The build finishes once the test opens this gate: the platform is
    // checked on its EVM chain first, however fast the machine builds.
    let gate = dir.path().join("gate");
    std::fs::write(
        source.join("build.rs"),
        format!(
            "fn main() {{\n    while !std::path::Path::new({gate:?}).exists() {{\n        \
             std::thread::sleep(std::time::Duration::from_millis(100));\n    }}\n}}\n"
        ),
    )
    .unwrap();
    let locked = Command::new("cargo").arg("generate-lockfile").current_dir(&source).status().unwrap();
    assert!(locked.success());
    // cargo stays on PATH; a node installed there does not.
    let path = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .filter(|dir| !dir.join("custody-indexer-solana-node").exists())
        .collect::<Vec<_>>();
    let path = std::env::join_paths(path).unwrap().into_string().unwrap();
    let env = [
        ("SOLANA_NODE_BIN", ""),
        ("PATH", path.as_str()),
        ("CUSTODY_INDEXER_CACHE", cache.to_str().unwrap()),
        ("CUSTODY_INDEXER_SOLANA_NODE_SOURCE", source.to_str().unwrap()),
    ];
    let mut dev = start(&state, &[], &env).await;
    let built = cache.join("solana-node-target/debug/custody-indexer-solana-node");
    let expected = format!(
        "building the local Solana network from {} into {} once",
        source.display(),
        built.parent().unwrap().parent().unwrap().display()
    );
    // Ready on the EVM chain while the Solana network builds.
    assert_eq!(dev.line["joining"], json!([SOLANA]), "{}", dev.line);
    assert!(dev.line["rpc_urls"][SOLANA].is_null(), "{}", dev.line);
    let solana_address = dev.line["addresses"][SOLANA].clone();
    assert!(solana_address.is_string(), "the account's Solana address, from the start: {}", dev.line);
    let hash = deposit(&state, EVM, None, "1.5");
    assert_eq!(confirmed(&dev, &hash).await["amount"], "1.5");
    // Built, it joins: the line again, with the Solana chain.
    std::fs::write(&gate, "").unwrap();
    let joined = dev.next_line(Duration::from_secs(300)).await;
    assert!(dev.stderr().contains(&expected), "{expected:?} in:\n{}", dev.stderr());
    assert!(built.is_file(), "built into the cache");
    assert!(joined["rpc_urls"][SOLANA].is_string(), "serves the Solana chain: {joined}");
    assert!(joined.get("joining").is_none(), "{joined}");
    assert_eq!((&joined["api_key"], &joined["addresses"][SOLANA]), (&dev.line["api_key"], &solana_address));
    dev.line = joined;
    let signature = deposit(&state, SOLANA, None, "0.5");
    assert_eq!(confirmed(&dev, &signature).await["amount"], "0.5");
    assert_eq!(confirmed(&dev, &hash).await["amount"], "1.5", "the EVM deposit kept");
    assert!(terminate(&mut dev.process).success());

    let mut again = start(&state, &[], &env).await;
    assert!(!again.stderr().contains("building the local Solana network"), "built once: {}", again.stderr());
    assert!(again.line["rpc_urls"][SOLANA].is_string());
    assert!(terminate(&mut again.process).success());
}

/// Whether process `pid` has ended (exited, perhaps not yet reaped).
fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, None | Some("Z" | "X"))
}

/// `dev` removes and reuses files by name in its state directory: a
/// directory it did not make (a checkout, a secrets directory) is refused
/// and left as it was.
#[test]
fn a_directory_dev_did_not_make_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("chains")).unwrap();
    std::fs::write(dir.path().join("chains/mine.toml"), "kept").unwrap();
    std::fs::write(dir.path().join("pii.key"), "a production key").unwrap();
    for args in [&["dev"][..], &["dev", "--reset"][..]] {
        let out = binary().args(args).args(["--state-dir", dir.path().to_str().unwrap()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("is not a dev state directory"), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("chains/mine.toml")).unwrap(), "kept");
    assert_eq!(std::fs::read_to_string(dir.path().join("pii.key")).unwrap(), "a production key");
}
