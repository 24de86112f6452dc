//! The console of `dev`, in a real browser: the admin `dev` seeded enrols
//! from the link it printed, registers a webhook on a local receiver, sees
//! a `dev deposit` appear on the deposits page without a reload, finds the
//! delivery's 2xx attempt and resends it; every tenant page photographed
//! and checked for accessibility.

use std::{
    io::{BufRead, BufReader},
    process::Stdio,
    time::Duration,
};

use fantoccini::Locator;
use serde_json::Value;

use super::{
    browser::Browser,
    common::{
        cli::{Process, terminate},
        eventually,
        receiver::Receiver,
    },
};

const PASSWORD: &str = "dev console password";

/// `dev --json` on the EVM chain alone (the local Solana network is left
/// out: this test is about the console); its process and its line.
async fn start_dev(state: &std::path::Path) -> (Process, Value) {
    let log = std::fs::File::create(state.with_extension("log")).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_custody-indexer"));
    for name in
        ["DATABASE_URL", "CUSTODY_INDEXER_CHAINS", "CUSTODY_INDEXER_LISTEN", "CUSTODY_INDEXER_ENVIRONMENT"]
    {
        command.env_remove(name);
    }
    command
        .args(["dev", "--json", "--state-dir", state.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("SOLANA_NODE_BIN", state.with_extension("no-solana-node"))
        .env("CUSTODY_INDEXER_SOLANA_NODE_SOURCE", state.with_extension("no-source"))
        .stdout(Stdio::piped())
        .stderr(log);
    let mut process = Process(command.spawn().unwrap());
    let stdout = process.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next();
        std::thread::spawn(move || for _ in lines {});
        first
    })
    .await
    .unwrap()
    .expect("dev printed its line")
    .unwrap();
    (process, serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
}

fn field<'a>(line: &'a Value, name: &str) -> &'a str {
    line[name].as_str().unwrap_or_else(|| panic!("{name} in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devs_admin_sees_deposits_live_and_webhook_deliveries_with_their_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (mut dev, line) = start_dev(&state).await;
    let api = field(&line, "api_url").to_string();
    assert_eq!(field(&line, "console_url"), format!("{api}/console/"));
    let receiver = Receiver::start().await;
    let browser = Browser::start("dev").await;

    browser.visit(field(&line, "console_enrol_url"), "enrol").await;
    assert!(browser.text("header .environment").await.contains("SANDBOX"));
    browser.fill("#password", PASSWORD).await;
    browser.fill("#again", PASSWORD).await;
    browser.click("form button[type=submit]").await;
    browser.visit(field(&line, "console_url"), "sign-in").await;
    browser.fill("#email", "admin@dev.example").await;
    browser.fill("#password", PASSWORD).await;
    browser.click("form button[type=submit]").await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/console/keys");
    browser.check("keys").await;

    // A webhook on the local receiver.
    browser.visit(&format!("{api}/console/webhooks"), "webhooks-empty").await;
    browser.fill("#url", &receiver.url).await;
    browser.fill("#label", "local receiver").await;
    browser.click("form[action='/console/webhooks'] button[type=submit]").await;
    browser.check("webhook-registered").await;
    assert!(browser.text("#signing-secret").await.starts_with("whsec_"));

    // A deposit shows on the open page, without a reload.
    browser.visit(&format!("{api}/console/deposits"), "deposits-empty").await;
    let before = browser.client.find_all(Locator::Css("#deposit-rows tr.deposit")).await.unwrap().len();
    browser.client.execute("window.__same_page = true", vec![]).await.unwrap();
    let deposited = tokio::process::Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
        .args(["dev", "deposit", "--state-dir", state.to_str().unwrap(), "--chain", "ETHEREUM_TESTNET"])
        .args(["--amount", "3"])
        .output()
        .await
        .unwrap();
    assert!(deposited.status.success(), "{}", String::from_utf8_lossy(&deposited.stderr));
    let hash = String::from_utf8_lossy(&deposited.stdout).trim().to_string();
    eventually(Duration::from_secs(30), "the deposit on the open page", || async {
        let rows = browser.client.find_all(Locator::Css("#deposit-rows tr.deposit")).await.unwrap();
        let text = browser.text("#deposit-rows").await;
        (rows.len() > before && text.contains(&hash)).then_some(())
    })
    .await;
    let same = browser.client.execute("return window.__same_page === true", vec![]).await.unwrap();
    assert_eq!(same, true, "the page was not reloaded");
    browser.check("deposits").await;

    // Its delivery, with a 2xx attempt; resent, it arrives again.
    let delivered = eventually(Duration::from_secs(30), "a delivery", || async {
        let arrived = receiver.delivered();
        (!arrived.is_empty()).then_some(arrived)
    })
    .await;
    let event = delivered[0].id.clone();
    browser.visit(&format!("{api}/console/webhooks"), "webhooks").await;
    browser.click("tbody a").await;
    let attempt = browser.text("#deliveries .attempt").await;
    assert!(attempt.contains("#1") && attempt.contains(": 200 in "), "{attempt}");
    browser.check("deliveries").await;
    let arrived = receiver.received().iter().filter(|r| r.id == event).count();
    let row = format!("//table[@id='deliveries']//tr[contains(., '{event}')]");
    let resend = browser.client.find(Locator::XPath(&format!("{row}//button"))).await.unwrap();
    browser.navigating(async { resend.click().await.unwrap() }).await;
    eventually(Duration::from_secs(30), "the resent delivery", || async {
        (receiver.received().iter().filter(|r| r.id == event).count() > arrived).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "the second attempt shown", || async {
        browser.client.refresh().await.unwrap();
        let attempts = browser.client.find_all(Locator::XPath(&format!("{row}//li"))).await.ok()?;
        (attempts.len() == 2).then_some(())
    })
    .await;
    browser.check("delivery-resent").await;

    // The books, read only.
    browser.visit(&format!("{api}/console/identities"), "identities").await;
    assert!(browser.text("tbody").await.contains("ACTIVE"));
    browser.click("tbody a").await;
    browser.check("identity").await;
    browser.visit(&format!("{api}/console/accounts"), "accounts").await;
    browser.click("tbody a").await;
    browser.check("account").await;
    let balances = browser.text("tbody").await;
    assert!(balances.contains("ETHEREUM_TESTNET") && balances.contains("ETH"), "{balances}");
    browser.visit(&format!("{api}/console/transfers"), "transfers").await;
    browser.visit(&format!("{api}/console/conversions"), "conversions").await;
    browser.visit(&format!("{api}/console/team"), "team").await;
    browser.visit(&format!("{api}/console/activity"), "activity").await;
    let activity = browser.text("tbody").await;
    for action in ["webhook.registered", "webhook_delivery.resent", "console_user.enrolled"] {
        assert!(activity.contains(action), "{action} in {activity}");
    }
    assert!(activity.contains("admin@dev.example") && activity.contains("the platform"), "{activity}");
    assert!(!activity.contains("local:"), "no operating-system user: {activity}");

    // dev's compliance operator, from the link it printed: the chains, healthy.
    browser.click("header form button").await;
    let links = line["operator_enrol_urls"].as_array().unwrap();
    browser.visit(links[0].as_str().unwrap(), "operator-enrol").await;
    browser.fill("#password", PASSWORD).await;
    browser.fill("#again", PASSWORD).await;
    browser.click("form button[type=submit]").await;
    browser.client.goto(field(&line, "console_url")).await.unwrap();
    browser.fill("#email", "compliance@dev.example").await;
    browser.fill("#password", PASSWORD).await;
    browser.click("form button[type=submit]").await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/console/queues");
    eventually(Duration::from_secs(30), "healthy chains", || async {
        browser.client.goto(&format!("{api}/console/chains")).await.unwrap();
        let health = browser.text("#health").await;
        let chains = browser.text("#chains tbody").await;
        (health.starts_with("Healthy") && chains.contains("ETHEREUM_TESTNET")).then_some(())
    })
    .await;
    browser.check("chains").await;
    assert!(terminate(&mut dev).success());
}
