//! A payout answered in a real browser, on a `production` platform whose
//! `run` sends on anvil: a treasury operator records the bank's `RETURNED`,
//! the same operator's confirmation is refused, a second treasury operator
//! confirms it, and the stablecoin comes back to the account once.

use std::time::Duration;

use alloy::{
    primitives::{Address, U256},
    transports::http::reqwest::Method,
};
use custody_indexer::store::Store;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, Row};

use super::{
    browser::Browser,
    common::{
        api::send_json,
        db::Backend,
        dead_port, eventually,
        governance::Admins,
        off_ramp::{USDC, bank, ended, fund_directly, new_id, off_ramp, submit, usdc_of},
        platform::{Platform, api_up},
        transfers::ETH,
    },
    operators::{sign_in, sign_out},
};

/// A treasury operator `name` (`<name>@platform.example`) proposed by one
/// admin and approved by the other; its console enrol link.
async fn treasury_operator(base: &str, store: &Store, admins: &Admins, name: &str) -> String {
    let body = json!({ "name": name, "email": format!("{name}@platform.example"), "roles": ["treasury"] });
    let url = format!("{base}/operator/v1/operators");
    let proposed = send_json(Method::POST, &url, Some(&admins.first.1), Some(&body)).await;
    assert_eq!(proposed.status, 202, "{proposed:?}");
    let change = proposed.body["change"]["id"].as_str().unwrap();
    let url = format!("{base}/operator/v1/changes/{change}/approve");
    let approved = send_json(Method::POST, &url, Some(&admins.second.1), Some(&json!({}))).await;
    assert_eq!(approved.status, 200, "{approved:?}");
    let id = approved.body["created"]["operator"]["id"].as_str().unwrap();
    let path = super::common::governance::minted_link(store, id).await;
    format!("{base}{path}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returned_payout_is_confirmed_by_a_second_treasury_operator_in_the_console() {
    let platform = Platform::new(Backend::Postgres).await;
    let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
    let settlement: Address = wallets[0]["settlement"].as_str().unwrap().parse().unwrap();
    platform.anvil.send_eth(platform.anvil.accounts[0], settlement, U256::from(ETH)).await;
    let port = dead_port();
    let _run = platform.run_production(port, &[]);
    api_up(port).await;
    fund_directly(&platform, 30).await;
    let us = bank(&platform, port, "us", "000123456789").await;
    let created = submit(&platform, port, &off_ramp(&new_id(), &us, "30.00", None)).await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["id"].as_str().unwrap().to_string();
    let conversion = format!("/v2/conversions/{id}");
    eventually(Duration::from_secs(60), "the payout handed to the bank", || async {
        platform.anvil.mine(1).await;
        (platform.get(port, &conversion).await["status"] == "PAYOUT_INITIATED").then_some(())
    })
    .await;
    assert_eq!(platform.balance().await, U256::ZERO, "the stablecoin collected");

    let base = format!("http://127.0.0.1:{port}");
    let store = platform.env.store().await;
    let admins = platform.env.admins(&base, &store).await;
    let alice = treasury_operator(&base, &store, &admins, "alice").await;
    let bob = treasury_operator(&base, &store, &admins, "bob").await;

    // One operator records the bank's answer: a return waits for another.
    let browser = Browser::start("payouts").await;
    sign_in(&browser, &base, "alice", &alice).await;
    let row = browser.text("#payouts tbody").await;
    assert!(row.contains(&id) && row.contains("BANK_ANSWER"), "{row}");
    browser.find("#outcome-1").await.select_by_value("RETURNED").await.unwrap();
    browser.fill("#payout-reason-1", "R03: no account").await;
    browser.click(&format!("#payouts form[action='/console/queues/payouts/{id}'] button")).await;
    let row = browser.text("#payouts tbody").await;
    assert!(row.contains(&id) && row.contains("CONFIRMATION"), "{row}");
    browser.check("payouts-answered").await;
    assert_eq!(platform.get(port, &conversion).await["status"], "PAYOUT_INITIATED", "nothing sent back yet");

    // The same operator's confirmation is refused.
    let confirm = format!("#payouts form[action='/console/queues/payouts/{id}/confirm'] button");
    browser.click(&confirm).await;
    assert_eq!(browser.text("h1").await, "403", "four eyes");
    let page = browser.source().await;
    assert!(page.contains(&format!("conversion {id}: ")), "refused as the answer's own operator: {page}");
    browser.check("payouts-own-confirmation").await;
    assert_eq!(platform.get(port, &conversion).await["status"], "PAYOUT_INITIATED");
    browser.client.goto(&format!("{base}/console/queues")).await.unwrap();
    sign_out(&browser).await;

    // A second treasury operator confirms: the stablecoin goes back once.
    sign_in(&browser, &base, "bob", &bob).await;
    browser.click(&confirm).await;
    assert!(browser.text("#payouts caption").await.starts_with("0 "), "out of the queue");
    browser.check("payouts-confirmed").await;
    let returned = ended(&platform, port, &id).await;
    assert_eq!(
        (&returned["status"], &returned["failure_reason"]),
        (&json!("RETURNED"), &json!("R03: no account")),
        "{returned}"
    );
    assert_eq!(returned["refund_details"]["amount"], "30", "{returned}");
    assert_eq!(platform.balance().await, U256::from(30 * USDC), "the stablecoin back on chain");
    assert_eq!(usdc_of(&platform, settlement).await, U256::ZERO, "nothing kept by the settlement wallet");
    // Confirmed once: a second confirmation finds nothing to confirm.
    let again = format!(
        "const done = arguments[0];
         fetch('/console/queues/payouts/{id}/confirm', {{ method: 'POST',
           headers: JSON.parse(document.body.getAttribute('hx-headers')), body: new URLSearchParams({{}}) }})
           .then(r => done(r.status));"
    );
    assert_eq!(browser.client.execute_async(&again, vec![]).await.unwrap(), 404, "confirmed once");
    let mut db = PgConnection::connect(&platform._db.url).await.unwrap();
    let refunds: i64 = sqlx::query("SELECT COUNT(*) AS n FROM transfers WHERE route = 'SETTLEMENT'")
        .fetch_one(&mut db)
        .await
        .unwrap()
        .get("n");
    assert_eq!(refunds, 1, "one refund transfer");
    let log = platform.operator(&["audit", "list"]);
    let entries = |action: &str| log.lines().filter(|l| l.contains(action)).collect::<Vec<_>>();
    let answered = entries("payout.answered_awaiting_confirmation");
    assert!(answered.len() == 1 && answered[0].contains("(alice)"), "{log}");
    let confirmed = entries("payout.confirmed");
    assert!(confirmed.len() == 1 && confirmed[0].contains("(bob)"), "confirmed once, by bob: {log}");
}
