//! The `custody-indexer` binary end to end: crashes and restarts, clean
//! shutdown, backfill beside `run`, refusal of a wrong chain, JSON output.

use crate::common;

use std::{collections::BTreeSet, path::Path, process::Stdio, time::Duration};

use alloy::primitives::{B256, U256};
use common::{
    Anvil, CHAIN, chain_toml,
    cli::{Env, terminate},
    eventually,
};
use custody_indexer::deposits::resource::DepositStatus;

fn env(anvil: &Anvil, extra: &str) -> Env {
    Env::with_chain_file(&chain_toml(&[anvil.url()], None, extra))
}

async fn send_deposits(anvil: &Anvil, to: alloy::primitives::Address, count: u64) -> BTreeSet<B256> {
    let mut hashes = BTreeSet::new();
    for i in 0..count {
        hashes.insert(anvil.send_eth(anvil.accounts[0], to, U256::from(1_000 + i)).await);
    }
    hashes
}

#[tokio::test]
async fn a_killed_run_restarts_without_missing_or_duplicating_a_deposit() {
    let anvil = Anvil::start().await;
    let env = env(&anvil, "max_block_range = 1");
    let alice = anvil.accounts[1];
    env.add_account("alice", &alice.to_string(), CHAIN);
    let sent = send_deposits(&anvil, alice, 300).await;
    let store = env.store().await;

    let mut run = env.spawn_run(CHAIN);
    let seen_at_kill = eventually(Duration::from_secs(60), "the first deposits", || {
        let store = store.clone();
        async move {
            let n = store.deposits_on_chain(CHAIN).await.unwrap().len();
            (n >= 10).then_some(n)
        }
    })
    .await;
    run.kill().unwrap(); // SIGKILL, wherever it is
    run.wait().unwrap();
    let after_kill = store.deposits_on_chain(CHAIN).await.unwrap().len();
    assert!(after_kill < sent.len(), "the kill must land mid-scan (found {after_kill} of {})", sent.len());
    assert!(after_kill >= seen_at_kill);

    let mut run = env.spawn_run(CHAIN);
    let last_block = anvil.head().await;
    eventually(Duration::from_secs(120), "the restarted run to catch up", || {
        let store = store.clone();
        async move {
            let state = store.chain_state(CHAIN).await.unwrap()?;
            (state.next_block > last_block).then_some(())
        }
    })
    .await;
    let status = terminate(&mut run);
    assert!(status.success(), "SIGTERM stops run cleanly: {status}");

    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    let found: BTreeSet<B256> = deposits.iter().map(|d| d.transaction_hash.parse().unwrap()).collect();
    assert_eq!(deposits.len(), sent.len(), "no duplicates");
    assert_eq!(found, sent, "nothing missed");
}

#[tokio::test]
async fn backfill_beside_a_running_indexer_adds_each_deposit_once() {
    let anvil = Anvil::start().await;
    let env = env(&anvil, "");
    let alice = anvil.accounts[1];
    env.add_account("alice", &alice.to_string(), CHAIN);
    let sent = send_deposits(&anvil, alice, 60).await;
    anvil.mine(5).await;
    let head = anvil.head().await;

    let mut run = env.spawn_run(CHAIN);
    let backfill = env.output(&["backfill", "--chain", CHAIN.as_str(), "--from", "0"]);
    assert!(backfill.status.success(), "{}", String::from_utf8_lossy(&backfill.stderr));
    let stdout = String::from_utf8(backfill.stdout).unwrap();
    assert!(
        stdout.contains(&format!("0..={}", head - 3)),
        "backfill stops at the confirmed height: {stdout}"
    );
    assert!(stdout.contains("60 deposits found"), "{stdout}");

    let store = env.store().await;
    eventually(Duration::from_secs(60), "run to catch up", || {
        let store = store.clone();
        async move { (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(()) }
    })
    .await;
    assert!(terminate(&mut run).success());
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(deposits.len(), sent.len());
    assert!(deposits.iter().all(|d| d.status == DepositStatus::Confirmed));

    let again = env.ok(&["backfill", "--chain", CHAIN.as_str(), "--from", "0"]);
    assert!(again.contains("60 deposits found, 0 new or updated"), "{again}");
    let above =
        env.output(&["backfill", "--chain", CHAIN.as_str(), "--from", "0", "--to", &(head + 10).to_string()]);
    assert!(!above.status.success());
    let stderr = String::from_utf8_lossy(&above.stderr);
    assert!(stderr.contains("above the confirmed height"), "{stderr}");
}

#[tokio::test]
async fn run_refuses_a_node_of_another_chain() {
    let anvil = Anvil::start_with(&["--chain-id", "5"]).await;
    let env = env(&anvil, "");
    let out = env.output(&["run", "--chain", CHAIN.as_str()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("answers chain id 5, expected 31337"), "{stderr}");
}

#[tokio::test]
async fn rpc_url_secrets_never_reach_the_logs() {
    let anvil = Anvil::start().await;
    let dead = format!("http://127.0.0.1:{}/v3/TOPSECRETKEY", common::dead_port());
    let env =
        Env::with_chain_file(&chain_toml(&[dead, format!("{}/?key=ALSOSECRET", anvil.url())], None, ""));
    let mut run = env.command(&["run"]).stderr(Stdio::piped()).spawn().unwrap();
    // The log is read as it is written, until the watcher started past the
    // dead URL (bounded), then to its end once `run` stopped.
    let stderr = run.stderr.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
                let mut all = lines.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        })
    };
    eventually(Duration::from_secs(60), "the watcher to start", || async {
        lines.lock().unwrap().contains("watcher started").then_some(())
    })
    .await;
    assert!(terminate(&mut run).success());
    reader.join().unwrap();
    let logs = lines.lock().unwrap().clone();
    assert!(logs.contains("127.0.0.1"), "logs name the host: {logs}");
    assert!(!logs.contains("TOPSECRETKEY") && !logs.contains("ALSOSECRET"), "{logs}");
}

#[tokio::test]
async fn json_output_is_the_api_resource() {
    let anvil = Anvil::start().await;
    let env = env(&anvil, "");
    let (alice, bob) = (anvil.accounts[1], anvil.accounts[2]);
    env.add_account("alice", &alice.to_string().to_lowercase(), CHAIN);
    env.add_account("bob", &bob.to_string(), CHAIN);
    let accounts: serde_json::Value = serde_json::from_str(&env.ok(&["accounts", "list", "--json"])).unwrap();
    assert_eq!(accounts[0]["id"], "alice");
    assert_eq!(accounts[0]["type"], "SEGREGATED");
    assert_eq!(accounts[0]["status"], "ACTIVE");
    assert_eq!(accounts[0]["addresses"][0]["address"], alice.to_checksum(None));
    assert_eq!(accounts[0]["addresses"][0]["chains"][0], CHAIN.as_str());

    anvil.send_eth(alice, bob, U256::from(1_500_000_000_000_000_000u64)).await;
    anvil.mine(3).await;
    env.ok(&["backfill", "--chain", CHAIN.as_str(), "--from", "0"]);
    let list: serde_json::Value =
        serde_json::from_str(&env.ok(&["deposits", "list", "--account-id", "bob", "--json"])).unwrap();
    let deposit = &list[0];
    let mut fields: Vec<&str> = deposit.as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "account_address",
            "account_id",
            "amount",
            "confirmed_at",
            "created_at",
            "currency_symbol",
            "dedup_key",
            "destination_chain",
            "id",
            "source_account_id",
            "source_address",
            "source_type",
            "status",
            "transaction_hash"
        ]
    );
    assert_eq!(deposit["amount"], "1.5");
    assert_eq!(deposit["currency_symbol"], "ETH");
    assert_eq!(deposit["source_type"], "ACCOUNT");
    assert_eq!(deposit["source_account_id"], "alice");
    assert_eq!(deposit["status"], "CONFIRMED");
    assert!(deposit["created_at"].as_str().unwrap().ends_with('Z'));
    let id = deposit["id"].as_str().unwrap();
    let one: serde_json::Value = serde_json::from_str(&env.ok(&["deposits", "get", id, "--json"])).unwrap();
    assert_eq!(&one, deposit);

    let missing = env.output(&["deposits", "get", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("deposit nope not found"));
    env.identity("default", "i");
    let bad = env.output(&[
        "accounts",
        "add",
        "--account-id",
        "x",
        "--identity-id",
        "i",
        "--type",
        "SEGREGATED",
        "--address",
        "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB4",
        "--chains",
        CHAIN.as_str(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a 20-byte hex address"));
    let bad_chain = env.output(&["deposits", "list", "--account-id", "bob", "--chains", "x"]);
    assert!(!bad_chain.status.success());
    assert!(Path::new(&env.dir.path().join("store.db")).exists());
}

#[test]
fn keys_come_from_the_mnemonic_or_its_file_and_never_show() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".to_string()], None, ""));
    let phrase = "legal winner thank year wave sausage worth useful legal winner thank yellow";
    let wallets = |vars: &[(&str, &str)]| {
        env.command(&["wallets", "list", "--json"]).envs(vars.iter().copied()).output().unwrap()
    };

    let inline = wallets(&[("CUSTODY_INDEXER_MNEMONIC", phrase)]);
    assert!(inline.status.success(), "{}", String::from_utf8_lossy(&inline.stderr));
    let file = env.dir.path().join("mnemonic");
    std::fs::write(&file, format!("{phrase}\n")).unwrap();
    let from_file = wallets(&[("CUSTODY_INDEXER_MNEMONIC_FILE", file.to_str().unwrap())]);
    assert_eq!(from_file.stdout, inline.stdout, "the file holds the same keys");
    let listed: serde_json::Value = serde_json::from_slice(&inline.stdout).unwrap();
    assert_eq!(listed[0]["chain"], CHAIN.as_str());
    assert_ne!(listed[0]["sponsor"], listed[0]["omnibus"]);

    // Refusals name the variables, never a word of the phrase.
    let wrong = phrase.replace("yellow", "zebra");
    for (vars, says) in [
        (vec![], "CUSTODY_INDEXER_MNEMONIC"),
        (vec![("CUSTODY_INDEXER_MNEMONIC", wrong.as_str())], "not a valid BIP-39"),
        (
            vec![
                ("CUSTODY_INDEXER_MNEMONIC", phrase),
                ("CUSTODY_INDEXER_MNEMONIC_FILE", file.to_str().unwrap()),
            ],
            "only one",
        ),
    ] {
        let out = wallets(&vars);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("legal") && !stderr.contains("zebra"), "{stderr}");
    }
    env.identity("default", "i");
    let created = env
        .command(&["accounts", "create", "--identity-id", "i", "--type", "SEGREGATED", "--json"])
        .env("CUSTODY_INDEXER_MNEMONIC", phrase)
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let account: serde_json::Value = serde_json::from_slice(&created.stdout).unwrap();
    assert_eq!(account["type"], "SEGREGATED");
    assert_eq!(account["status"], "ACTIVE");
    assert!(!String::from_utf8_lossy(&created.stdout).contains("legal"));
}

/// Whether the process has a handler for SIGTERM (Linux's `SigCgt` mask).
fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(str::trim).unwrap_or("0");
    u64::from_str_radix(mask, 16).is_ok_and(|mask| mask & (1 << (15 - 1)) != 0)
}

#[tokio::test]
async fn run_and_serve_stopped_while_their_store_does_not_answer_stop_cleanly() {
    let anvil = Anvil::start().await;
    let mut env = env(&anvil, "");
    // A PostgreSQL address that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    env.database_url = format!("postgres://postgres@{}/store", silent.local_addr().unwrap());
    for command in ["run", "serve"] {
        let mut process = env.command(&[command]).stderr(Stdio::piped()).spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !catches_sigterm(process.id()) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (listening, asked) = (catches_sigterm(process.id()), std::time::Instant::now());
        let status = terminate(&mut process);
        let mut logs = String::new();
        std::io::Read::read_to_string(process.stderr.as_mut().unwrap(), &mut logs).unwrap();
        assert!(listening, "{command} listens for SIGTERM while its store opens: {logs}");
        assert!(status.success(), "{command} exited {status}: {logs}");
        assert!(asked.elapsed() < Duration::from_secs(10), "{command} stopped at once, not on a timeout");
        assert!(logs.contains("stopped before the store was open"), "{command}: {logs}");
    }
    drop(silent);
}

/// A rolling restart's stopping half: on SIGTERM `run` answers `/readyz`
/// `503` at once, while its listener still answers, gives its leases up
/// (so that a standby takes each at its next look, within a second) and
/// exits cleanly.
#[tokio::test]
async fn a_stopping_run_answers_readyz_503_and_gives_its_leases_up() {
    let anvil = Anvil::start().await;
    let env = env(&anvil, "");
    let port = common::dead_port();
    let mut run = env.listen("run", CHAIN, port, &[]);
    common::platform::api_up(port).await;
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    let client = alloy::transports::http::reqwest::Client::new();
    let status = || async { client.get(&readyz).send().await.map(|answer| answer.status().as_u16()) };
    eventually(Duration::from_secs(60), "a ready run", || async {
        (status().await.ok() == Some(200)).then_some(())
    })
    .await;
    let store = env.store().await;
    let held = |leases: Vec<custody_indexer::store::WorkerLease>| leases.iter().filter(|l| l.held).count();
    assert_eq!(held(store.worker_leases().await.unwrap()), 1, "the watcher's");

    let sent = std::process::Command::new("kill").args(["-TERM", &run.id().to_string()]).status().unwrap();
    assert!(sent.success());
    let draining = eventually(Duration::from_secs(5), "readyz 503 while stopping", || async {
        match status().await {
            Ok(503) => Some(Ok(())),
            Ok(_) => None,
            Err(error) => Some(Err(error.to_string())),
        }
    })
    .await;
    assert_eq!(draining, Ok(()), "the listener closed before it answered 503: {}", env.run_logs());
    let exited = run.wait().unwrap();
    assert!(exited.success(), "SIGTERM stops run cleanly: {exited}");
    assert_eq!(held(store.worker_leases().await.unwrap()), 0, "every lease given up");
}
