//! `run` reconciles in the background (`reconcile_every_secs`): a watched
//! address whose own key sends ether outside the platform is an
//! unexplained debit, alarmed once however many passes see it (counted in
//! `/metrics`, written to the audit log), and alarmed even when the
//! database's owner marked it known beforehand; shown with its block and
//! transaction at `GET /operator/v1/reconciliation`, and in `health`.

use crate::common;

use std::time::Duration;

use alloy::{primitives::U256, transports::http::reqwest};
use common::{
    CHAIN, OPERATOR_TOKEN, anvil::Anvil, api::send, chain_toml, cli::Env, dead_port, eventually,
    platform::api_up,
};
use serde_json::Value;
use sqlx::Connection;

/// The `/metrics` lines of `name` with `asset="ETH"`, their values.
async fn metric(base: &str, name: &str) -> Vec<String> {
    let text = reqwest::Client::new()
        .get(format!("{base}/metrics"))
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains("asset=\"ETH\""))
        .filter_map(|l| l.rsplit(' ').next().map(String::from))
        .collect()
}

#[tokio::test]
async fn run_alarms_once_for_money_sent_from_an_address_without_the_platform() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, "reconcile_every_secs = 1"));
    // A dev account: its key signs outside the platform.
    let (funder, alice, stranger) = (anvil.accounts[0], anvil.accounts[3], anvil.accounts[7]);
    let start = anvil.head().await + 1;
    let alice_text = alice.to_string();
    env.add_account_from("alice", &alice_text, start);
    let key = env.production_operator("Tess", "treasury");
    let port = dead_port();
    let _run = env.listen("run", CHAIN, port, &[]);
    api_up(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let reconciliation = || async {
        let answer =
            send(reqwest::Method::GET, &format!("{base}/operator/v1/reconciliation"), Some(&key)).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        answer.body["data"][0].clone()
    };

    anvil.send_eth(funder, alice, U256::from(100u64)).await;
    anvil.mine(4).await;
    let credited = anvil.head().await - 4;
    let agreed =
        eventually(Duration::from_secs(60), "a reconciliation that agrees past the deposit", || async {
            let run = reconciliation().await;
            (run["at_block"].as_u64().is_some_and(|b| b >= credited) && run["differ"] == 0).then_some(run)
        })
        .await;
    assert_eq!(
        (agreed["chain"].as_str(), agreed["lines"].as_u64()),
        (Some(CHAIN.as_str()), Some(1)),
        "{agreed}"
    );

    let out = anvil.send_eth(alice, stranger, U256::from(30u64)).await;
    let sent_in = anvil.head().await;
    // Whoever writes the database marks the debit known before any pass
    // sees it: the alarm is decided by the hash-chained audit log, not by
    // that row.
    let mut sql = sqlx::AnyConnection::connect(&env.database_url).await.unwrap();
    sqlx::query(
        "INSERT INTO unexplained_debits (chain, address, asset, block, account_id, change, transactions, first_seen_at)
         VALUES ($1, $2, 'ETH', $3, 'alice', '-1', '[]', 0)",
    )
    .bind(CHAIN.as_str())
    .bind(&alice_text)
    .bind(sent_in as i64)
    .execute(&mut sql)
    .await
    .unwrap();
    anvil.mine(4).await;
    let run = eventually(Duration::from_secs(60), "the debit reconciled", || async {
        let run = reconciliation().await;
        (run["differ"] == 1).then_some(run)
    })
    .await;
    let line = &run["detail"]["differences"][0];
    assert_eq!(line["address"].as_str().unwrap().to_lowercase(), alice_text.to_lowercase(), "{run}");
    assert!(
        line["difference"].as_str().unwrap().starts_with('-'),
        "more left than the ledger explains: {line}"
    );
    assert_eq!(line["divergent_block"], Value::from(sent_in), "{line}");
    let movements = line["movements"].as_array().unwrap();
    assert!(
        movements.iter().any(|m| m["transaction_hash"] == format!("{out:#x}") && m["direction"] == "out"),
        "the transaction is named: {line}"
    );

    // Several passes later: one alarm, one audit entry.
    let seen = run["at"].clone();
    eventually(Duration::from_secs(30), "two more passes", || async {
        let again = reconciliation().await;
        (again["at"] != seen && again["differ"] == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(metric(&base, "custody_indexer_unexplained_debits_total").await, vec!["1"]);
    assert_eq!(metric(&base, "custody_indexer_reconcile_differences").await, vec!["1"]);
    let store = env.store().await;
    let entries = store.audit_entries(0, None, 1000).await.unwrap();
    let alarms: Vec<_> = entries.iter().filter(|e| e.action == "reconcile.unexplained_debit").collect();
    assert_eq!(
        alarms.len(),
        1,
        "alarmed once: {:?}",
        alarms.iter().map(|e| &e.target_id).collect::<Vec<_>>()
    );
    assert_eq!(alarms[0].actor, "system");
    let target = format!("{}:{}:ETH:{sent_in}", CHAIN.as_str(), alice_text).to_lowercase();
    assert_eq!(alarms[0].target_id.to_lowercase(), target);

    let health: Value = serde_json::from_str(&env.ok(&["health", "--json"])).unwrap();
    let chain = &health["chains"][0];
    assert_eq!(chain["reconciled"]["differ"], 1, "{health}");
    let warned =
        health["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("1 differ"));
    assert!(warned, "{health}");
}
