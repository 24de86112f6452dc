//! `reconcile` on anvil: a watched address whose balance before the watch
//! is read from the node, its deposits confirmed by `run`, and a credit the
//! watcher cannot see (a contract forwarding ether in an internal call,
//! with traces off): the difference is reported with the block it arose
//! in, found within the bisection's bound of balance reads, and named as
//! the internal call of its transaction; the token that agrees exits 0,
//! a height before the credit agrees; on this production store `--repair`
//! goes through the service as a treasury operator's request, which a
//! second one approves (the ether being unpriced) or refuses, never its
//! requester even when the row names another; it credits once, with its
//! event, and neither another repair nor a backfill that reads traces
//! credits it again; a height not indexed is refused. A token listed only
//! after its transfers reached an address is reconciled from the archive.

use crate::common;

use std::time::Duration;

use alloy::primitives::{Address, U256};
use alloy::transports::http::reqwest::Method;
use common::{
    CHAIN,
    anvil::{Anvil, Mined},
    api::{send, send_json},
    chain_toml,
    cli::Env,
    dead_port, eventually,
    platform::api_up,
};
use serde_json::{Value, json};
use sqlx::Connection;

/// `reconcile` with `args`: its exit code, JSON lines (with `--json`) or
/// text, and stderr.
fn reconcile(env: &Env, args: &[&str]) -> (i32, String, String) {
    let out = env.output(&[&["reconcile", "--chain", CHAIN.as_str()][..], args].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    (out.status.code().unwrap(), text, String::from_utf8_lossy(&out.stderr).into())
}

fn lines(json: &str) -> Vec<Value> {
    json.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The highest block the watcher indexed.
async fn head_now(store: &custody_indexer::store::Store) -> u64 {
    store.chain_state(CHAIN).await.unwrap().unwrap().next_block - 1
}

/// ⌈log2(n)⌉.
fn log2_ceil(n: u64) -> u64 {
    u64::from(64 - (n.max(1) - 1).leading_zeros())
}

#[tokio::test]
async fn an_internal_credit_the_watcher_missed_is_found_in_its_block_and_named() {
    let anvil = Anvil::start().await;
    let tusd = anvil.deploy_token("TUSD").await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], Some(&tusd.to_string()), ""));
    let (funder, alice) = (anvil.accounts[0], Address::repeat_byte(0xa1));
    let forwarder = anvil.forwarder(anvil.deploy_forwarder().await);

    // 5 wei before the watch begins: the baseline, read from the node.
    anvil.send_eth(funder, alice, U256::from(5u64)).await;
    anvil.mine(3).await;
    let start = anvil.head().await + 1;
    env.add_account_from("alice", &alice.to_string(), start);
    let _run = env.spawn_run(CHAIN);
    anvil.send_eth(funder, alice, U256::from(100u64)).await;
    anvil.token(tusd).mint(alice, U256::from(7_000_000u64)).from(anvil.accounts[5]).mined().await;
    anvil.mine(4).await;
    // Traces are off: the watcher never sees this 11 wei.
    forwarder.forward(alice).from(funder).value(U256::from(11u64)).mined().await;
    let missed = anvil.head().await;
    anvil.mine(20).await;
    let store = env.store().await;
    // The 5 wei are found too (a watch start is a guarantee, not a filter):
    // the baseline holds them, so the ledger counts deposits after it only.
    eventually(Duration::from_secs(60), "three deposits CONFIRMED and the chain indexed", || async {
        let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
        let confirmed = deposits.iter().filter(|d| d.status.as_str() == "CONFIRMED").count();
        let indexed = store.chain_state(CHAIN).await.unwrap()?.next_block;
        (confirmed == 3 && deposits.len() == 3 && indexed > missed + 10).then_some(())
    })
    .await;

    // `run` recorded alice's balances at the watch start, once that block
    // was settled: 5 wei and no TUSD.
    let address = alice.to_checksum(None);
    for (asset, balance) in [("ETH", 5u64), ("TUSD", 0)] {
        let recorded = eventually(Duration::from_secs(30), "the baselines recorded by run", || async {
            store.reconcile_baseline(CHAIN, &address, asset).await.unwrap()
        })
        .await;
        let expected = custody_indexer::reconcile::Anchor { block: start - 1, balance: U256::from(balance) };
        assert_eq!(recorded, (expected, custody_indexer::reconcile::Baseline::Recorded), "{asset}");
    }

    let (code, json, err) = reconcile(&env, &["--json"]);
    assert_eq!(code, 1, "a difference: {json}{err}");
    let found = lines(&json);
    assert_eq!(found.len(), 2, "ETH and TUSD of alice: {json}");
    let eth = found.iter().find(|l| l["asset"] == "ETH").unwrap();
    assert_eq!(eth["account_id"], "alice");
    assert_eq!(eth["address"], address);
    assert_eq!(eth["baseline"], "recorded", "read at the block before the watch, when it began: {eth}");
    assert_eq!(eth["onchain"], "0.000000000000000116");
    assert_eq!(eth["ledger"], "0.000000000000000105", "5 before + 100 deposited: {eth}");
    assert_eq!(eth["difference"], "0.000000000000000011");
    assert_eq!(eth["divergent_block"], missed, "{eth}");
    let at = eth["at_block"].as_u64().unwrap();
    let bound = log2_ceil(at - (start - 1)) + 1;
    assert!(eth["reads"].as_u64().unwrap() <= bound, "{} reads, bound {bound}: {eth}", eth["reads"]);
    let movements = eth["movements"].as_array().unwrap();
    assert_eq!(movements.len(), 1, "{eth}");
    assert_eq!(movements[0]["how"], "internal_call", "{eth}");
    assert_eq!(movements[0]["direction"], "in");
    assert_eq!(movements[0]["amount"], "0.000000000000000011");
    assert_eq!(movements[0]["block"], missed);
    let tusd_line = found.iter().find(|l| l["asset"] == "TUSD").unwrap();
    assert_eq!((&tusd_line["difference"], &tusd_line["onchain"]), (&Value::from("0"), &Value::from("7")));
    assert_eq!(tusd_line["divergent_block"], Value::Null);

    // The table says the same, and a second reconciliation finds it again.
    let (code, text, _) = reconcile(&env, &[]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(text.lines().last(), Some("reconciled 1 addresses: 1 differ"), "{text}");
    assert!(text.contains(&format!("block {missed} in 0.000000000000000011 ETH internal_call")), "{text}");

    // What agrees exits 0: the token, and the native coin before the credit.
    let (code, text, err) = reconcile(&env, &["--asset", "TUSD"]);
    assert_eq!((code, text.lines().last()), (0, Some("reconciled 1 addresses: 0 differ")), "{text}{err}");
    let (code, json, _) =
        reconcile(&env, &["--json", "--asset", "ETH", "--at-block", &(missed - 1).to_string()]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(lines(&json)[0]["ledger"], "0.000000000000000105");

    // In production a repair is a treasury operator's decision through the
    // service: the store alone refuses it.
    let internal = movements[0]["transaction_hash"].as_str().unwrap().to_string();
    let (code, _, err) = reconcile(&env, &["--repair"]);
    assert!(code == 2 && err.contains("--server"), "{err}");
    let credited = |deposits: Vec<custody_indexer::deposits::resource::Deposit>| {
        deposits.into_iter().filter(|d| d.transaction_hash == internal).collect::<Vec<_>>()
    };
    let (tess, theo) =
        (env.production_operator("Tess", "treasury"), env.production_operator("Theo", "treasury"));
    let port = dead_port();
    let _serve = env.serve(port);
    api_up(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let ask = |key: &str| {
        let args =
            ["reconcile", "--chain", CHAIN.as_str(), "--repair", "--server", &base, "--reason", "traces off"];
        let out = env.command(&args).env("CUSTODY_INDEXER_OPERATOR_KEY", key).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        (out.status.code().unwrap(), text, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let decide = |key: String, id: String, verdict: &'static str| {
        let url = format!("{base}/operator/v1/reconciliation/repairs/{id}/{verdict}");
        async move { send_json(Method::POST, &url, Some(&key), Some(&json!({}))).await }
    };
    // The ether has no price in the chain file: the repair waits for a
    // second treasury operator, and a refusal records nothing.
    let (code, text, err) = ask(&tess);
    assert_eq!(code, 1, "it waits: {text}{err}");
    assert!(text.contains("AWAITING_APPROVAL (unpriced)"), "{text}");
    assert!(
        text.contains(&format!("block {missed} 0.000000000000000011 ETH to alice ({internal})")),
        "{text}"
    );
    let id = |text: &str| text.split_whitespace().nth(1).unwrap().trim_end_matches(':').to_string();
    let refused = decide(theo.clone(), id(&text), "refuse").await;
    assert_eq!((refused.status, &refused.body["status"]), (200, &json!("REFUSED")), "{:?}", refused.body);
    assert!(credited(store.deposits_on_chain(CHAIN).await.unwrap()).is_empty(), "a refusal records nothing");

    // Asked again: its requester cannot approve it, even after whoever
    // writes the database names another requester on its row (the audit
    // log names who asked); another treasury operator can, once.
    let (code, text, _) = ask(&tess);
    assert_eq!(code, 1, "{text}");
    let repair = id(&text);
    let mut sql = sqlx::AnyConnection::connect(&env.database_url).await.unwrap();
    sqlx::query("UPDATE reconcile_repairs SET requested_by = 'operator:someone-else' WHERE id = $1")
        .bind(&repair)
        .execute(&mut sql)
        .await
        .unwrap();
    let own = decide(tess.clone(), repair.clone(), "approve").await;
    assert_eq!(own.status, 403, "four eyes: {:?}", own.body);
    // Nor can the row be made to ask for other credits than its request
    // did: the request's audit entry holds their digest.
    let credits: String = sqlx::query_scalar("SELECT credits FROM reconcile_repairs WHERE id = $1")
        .bind(&repair)
        .fetch_one(&mut sql)
        .await
        .unwrap();
    let rewrite = |credits: String| {
        sqlx::query("UPDATE reconcile_repairs SET credits = $1 WHERE id = $2")
            .bind(credits)
            .bind(repair.clone())
    };
    rewrite(credits.replace("0.000000000000000011", "0.000000000000000012")).execute(&mut sql).await.unwrap();
    let bent = decide(theo.clone(), repair.clone(), "approve").await;
    assert_eq!(bent.status, 409, "{:?}", bent.body);
    let said = bent.body["message"].as_str().unwrap();
    assert!(said.contains("not what its request in the audit log asked for"), "{said}");
    assert!(credited(store.deposits_on_chain(CHAIN).await.unwrap()).is_empty());
    rewrite(credits).execute(&mut sql).await.unwrap();
    let approved = decide(theo.clone(), repair.clone(), "approve").await;
    assert_eq!((approved.status, &approved.body["status"]), (200, &json!("APPLIED")), "{:?}", approved.body);
    let again = decide(theo.clone(), repair.clone(), "approve").await;
    assert_eq!(again.status, 409, "{:?}", again.body);

    // The missed credit is recorded as the scan would have: once,
    // CONFIRMED, announced; then everything agrees, and neither another
    // repair nor a backfill that reads traces credits it again.
    let repaired = credited(store.deposits_on_chain(CHAIN).await.unwrap());
    assert_eq!(repaired.len(), 1);
    assert_eq!(approved.body["deposits"], json!([repaired[0].id]), "{:?}", approved.body);
    assert_eq!(
        (repaired[0].status.as_str(), repaired[0].amount.as_str()),
        ("CONFIRMED", "0.000000000000000011")
    );
    let events = store.events_after("default", None, 100).await.unwrap();
    let announced = events.iter().filter(|e| e.envelope["data"]["id"] == repaired[0].id).count();
    assert!(announced >= 1, "its deposit_v2 event: {events:?}");
    let (code, text, _) = reconcile(&env, &[]);
    assert_eq!((code, text.lines().last()), (0, Some("reconciled 1 addresses: 0 differ")), "{text}");
    let (code, _, err) = ask(&theo);
    assert!(code == 2 && err.contains("finds no missed credit"), "{err}");
    let listed = send(Method::GET, &format!("{base}/operator/v1/reconciliation/repairs"), Some(&theo)).await;
    let statuses: Vec<&str> =
        listed.body["data"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["APPLIED", "REFUSED"], "{:?}", listed.body);
    let logged: Vec<String> = sqlx::query_scalar(
        "SELECT action FROM audit_log WHERE target_kind = 'repair' AND target_id = $1 ORDER BY seq",
    )
    .bind(&repair)
    .fetch_all(&mut sql)
    .await
    .unwrap();
    assert_eq!(logged, ["reconcile.repair_requested", "reconcile.repair_applied"]);
    let file = env.chains.join("test.toml");
    let traced = std::fs::read_to_string(&file).unwrap().replacen("chain_id", "traces = true\nchain_id", 1);
    std::fs::write(&file, traced).unwrap();
    let to = found[0]["at_block"].as_u64().unwrap().to_string();
    let out = env.output(&["backfill", "--chain", CHAIN.as_str(), "--from", &start.to_string(), "--to", &to]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // It reads the internal call (3 found from the watch start: the 100
    // wei, the token and the 11 wei), and records nothing new.
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("3 deposits found, 0 new or updated"), "{said}");
    assert_eq!(credited(store.deposits_on_chain(CHAIN).await.unwrap()).len(), 1, "credited once");
    assert_eq!(store.deposits_on_chain(CHAIN).await.unwrap().len(), 4);

    // A repair is the service's, at its settled height: never at a height
    // the caller picks.
    let head = head_now(&store).await.to_string();
    let args = ["reconcile", "--chain", CHAIN.as_str(), "--repair", "--server", &base, "--at-block", &head];
    let out = env.command(&args).env("CUSTODY_INDEXER_OPERATOR_KEY", &theo).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("--at-block is refused with --server"), "{err}");

    // A height not indexed, an unknown asset and an unwatched address are
    // refused, with 2: never 1, which says something differs.
    let (code, _, err) = reconcile(&env, &["--at-block", "999999"]);
    assert!(code == 2 && err.contains("block 999999 is not indexed yet"), "{err}");
    let (code, _, err) = reconcile(&env, &["--asset", "DAI"]);
    assert!(code == 2 && err.contains("DAI is not an asset of"), "{err}");
    let (code, _, err) = reconcile(&env, &["--address", &Address::repeat_byte(0xb2).to_string()]);
    assert!(code == 2 && err.contains("is not watched on"), "{err}");
}

/// An address whose watch began long before `run` first saw it (more than
/// `RECENT` blocks): its baseline is read from the archive node by the
/// first reconciliation, and the answer says so.
#[tokio::test]
async fn a_watch_start_run_never_saw_is_read_from_the_archive() {
    use custody_indexer::reconcile::baselines::RECENT;
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let carol = Address::repeat_byte(0xc3);
    anvil.send_eth(anvil.accounts[0], carol, U256::from(5u64)).await;
    let start = anvil.head().await + 1;
    env.add_account_from("carol", &carol.to_string(), start);
    anvil.mine(RECENT + 10).await;
    let _run = env.spawn_run(CHAIN);
    let store = env.store().await;
    eventually(Duration::from_secs(60), "the chain indexed", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > start + RECENT).then_some(())
    })
    .await;
    let (code, json, err) = reconcile(&env, &["--json"]);
    assert_eq!(code, 0, "{json}{err}");
    let line = &lines(&json)[0];
    assert_eq!(
        (&line["baseline"], &line["ledger"]),
        (&"archive".into(), &"0.000000000000000005".into()),
        "{line}"
    );
}

/// A node that keeps only the last 10 blocks' state (`--prune-history`),
/// and `run` started 40 blocks after the watch start: no node can read the
/// balance at the watch start any more, so the first reconciliation's
/// balance is the baseline and the answer says so; a credit missed later
/// cannot be located there, and `reconcile` names the reads that failed
/// (exit 2) instead of guessing.
#[tokio::test]
async fn a_node_without_old_state_is_said_never_guessed_over() {
    let anvil = Anvil::start_with(&["--prune-history", "10"]).await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let (funder, alice) = (anvil.accounts[0], Address::repeat_byte(0xa2));
    let forwarder = anvil.forwarder(anvil.deploy_forwarder().await);
    let start = anvil.head().await + 1;
    env.add_account("alice", &alice.to_string(), CHAIN);
    anvil.send_eth(funder, alice, U256::from(5u64)).await;
    anvil.mine(40).await;
    // `run` starts when the watch start's state is gone: it cannot record
    // the baseline then.
    let _run = env.spawn_run(CHAIN);
    let store = env.store().await;
    let indexed = |past: u64| {
        let store = &store;
        async move {
            eventually(Duration::from_secs(60), "the deposit CONFIRMED and the chain indexed", || async {
                let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
                let confirmed = deposits.iter().all(|d| d.status.as_str() == "CONFIRMED");
                (confirmed && !deposits.is_empty() && head_now(store).await > past).then_some(())
            })
            .await
        }
    };
    indexed(start + 30).await;

    let (code, json, err) = reconcile(&env, &["--json"]);
    assert_eq!(code, 0, "{json}{err}");
    let line: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(line["baseline"], "first_reconciliation", "{line}");
    assert_eq!((&line["onchain"], &line["difference"]), (&"0.000000000000000005".into(), &"0".into()));

    forwarder.forward(alice).from(funder).value(U256::from(11u64)).mined().await;
    anvil.mine(40).await;
    let past = anvil.head().await - 5;
    indexed(past).await;
    let (code, json, err) = reconcile(&env, &["--json"]);
    assert_eq!(code, 2, "{json}{err}");
    assert!(err.contains("read failed") && err.contains("eth_getBalance"), "{err}");
    assert!(json.is_empty(), "nothing guessed: {json}");
}

/// A provider whose `eth_getLogs` answers leave out every `Transfer` of a
/// token to a watched address: the watcher, which reads logs, never sees
/// the deposit; `reconcile` finds the difference in its block and names
/// the token log (the block's receipts hold it), and the repair, worth 7
/// USD, is one treasury operator's decision: applied at once, once.
// The proxy serves from this runtime while the commands block a thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_transfer_left_out_of_the_logs_is_found_and_a_small_repair_takes_one_operator() {
    let anvil = Anvil::start().await;
    let tusd = anvil.deploy_token("TUSD").await;
    let proxy = common::forging::start(anvil.url()).await;
    // TUSD is a dollar stablecoin: its repairs are priced.
    let toml = chain_toml(std::slice::from_ref(&proxy.url), Some(&tusd.to_string()), "") + "usd = \"1\"\n";
    let env = Env::with_chain_file(&toml);
    let alice = Address::repeat_byte(0xa1);
    proxy.drop_transfers(tusd, alice);
    let start = anvil.head().await + 1;
    env.add_account_from("alice", &alice.to_string(), start);
    let _run = env.spawn_run(CHAIN);
    anvil.token(tusd).mint(alice, U256::from(7_000_000u64)).from(anvil.accounts[5]).mined().await;
    let minted = anvil.head().await;
    anvil.mine(20).await;
    let store = env.store().await;
    eventually(Duration::from_secs(60), "the chain indexed past the mint", || async {
        let indexed = store.chain_state(CHAIN).await.unwrap()?.next_block;
        (indexed > minted + 10).then_some(())
    })
    .await;
    assert!(store.deposits_on_chain(CHAIN).await.unwrap().is_empty(), "the watcher never saw it");

    let (code, json, err) = reconcile(&env, &["--json", "--asset", "TUSD"]);
    assert_eq!(code, 1, "{json}{err}");
    let line = &lines(&json)[0];
    assert_eq!((&line["difference"], &line["divergent_block"]), (&json!("7"), &json!(minted)), "{line}");
    let movements = line["movements"].as_array().unwrap();
    assert_eq!(movements.len(), 1, "{line}");
    assert_eq!((&movements[0]["how"], &movements[0]["direction"]), (&json!("token_log"), &json!("in")));
    assert_eq!(movements[0]["amount"], "7");

    let tess = env.production_operator("Tess", "treasury");
    let port = dead_port();
    let _serve = env.serve(port);
    api_up(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let args =
        ["reconcile", "--chain", CHAIN.as_str(), "--repair", "--server", &base, "--reason", "logs lost"];
    let out = env.command(&args).env("CUSTODY_INDEXER_OPERATOR_KEY", &tess).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "applied at once: {text}");
    assert!(text.contains("APPLIED (7 USD)"), "{text}");
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(deposits.len(), 1, "{deposits:?}");
    assert_eq!((deposits[0].status.as_str(), deposits[0].amount.as_str()), ("CONFIRMED", "7"));
    assert_eq!(deposits[0].transaction_hash, movements[0]["transaction_hash"].as_str().unwrap());
    let (code, text, err) = reconcile(&env, &["--asset", "TUSD"]);
    assert_eq!((code, text.lines().last()), (0, Some("reconciled 1 addresses: 0 differ")), "{text}{err}");
    let again = env.command(&args).env("CUSTODY_INDEXER_OPERATOR_KEY", &tess).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "nothing left to repair");
}

/// A token the chain file lists only after transfers of it reached a
/// watched address: the watcher never read them. Its baseline is read at
/// the watch start from the archive node, and `reconcile` finds both
/// transfers, each in its block, named as token logs.
#[tokio::test]
async fn a_token_listed_after_its_transfers_is_reconciled_from_the_archive_and_each_is_found() {
    let anvil = Anvil::start().await;
    let tusd = anvil.deploy_token("TUSD").await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let alice = Address::repeat_byte(0xa4);
    let start = anvil.head().await + 1;
    env.add_account_from("alice", &alice.to_string(), start);
    let run = env.spawn_run(CHAIN);
    let token = anvil.token(tusd);
    let minter = anvil.accounts[5];
    let mut minted = Vec::new();
    for amount in [3_000_000u64, 4_000_000] {
        anvil.mine(3).await;
        token.mint(alice, U256::from(amount)).from(minter).mined().await;
        minted.push(anvil.head().await);
    }
    anvil.mine(20).await;
    let store = env.store().await;
    let last = minted[1];
    eventually(Duration::from_secs(60), "the chain indexed past the mints", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > last + 10).then_some(())
    })
    .await;
    drop(run);
    assert!(store.deposits_on_chain(CHAIN).await.unwrap().is_empty(), "TUSD was not listed");

    std::fs::write(env.chains.join("test.toml"), chain_toml(&[anvil.url()], Some(&tusd.to_string()), ""))
        .unwrap();
    let (code, json, err) = reconcile(&env, &["--json", "--asset", "TUSD"]);
    assert_eq!(code, 1, "{json}{err}");
    let line = &lines(&json)[0];
    assert_eq!(
        (&line["baseline"], &line["ledger"], &line["onchain"]),
        (&json!("archive"), &json!("0"), &json!("7"))
    );
    let found: Vec<(u64, String)> = line["divergent_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["block"].as_u64().unwrap(), d["change"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(found, vec![(minted[0], "3".to_string()), (minted[1], "4".to_string())], "{line}");
    let movements: Vec<(u64, &str, &str)> = line["movements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["block"].as_u64().unwrap(), m["how"].as_str().unwrap(), m["amount"].as_str().unwrap()))
        .collect();
    assert_eq!(movements, vec![(minted[0], "token_log", "3"), (minted[1], "token_log", "4")], "{line}");
}
