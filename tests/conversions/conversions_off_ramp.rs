//! Off-ramps on a real chain: `run` on anvil with the platform's USDC, an
//! `ACTIVE`, fiat-enabled identity holding USDC minted for a wire, and its
//! bank accounts. Every validation of `POST /v2/conversions` on both
//! stores; 20 concurrent identical submissions making one conversion; a US
//! wire paid out, a payout returned and one refused with the stablecoin
//! back on chain before the conversion ends; a suspension failing an
//! off-ramp that moved nothing; `production`'s operator answering the
//! payout; and a kill with the collect transactions in the pool followed by
//! two instances racing, every conversion announced exactly once per status.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, U256},
    transports::http::reqwest::Method,
};
use common::{
    api::send_json,
    db::{BACKENDS, Backend},
    dead_port, eventually,
    issuance::refused,
    off_ramp::{
        USDC, announced, bank, ended, fund_directly, funded, new_id, off_ramp, quote, submit, usdc_of,
    },
    platform::{Platform, api_up},
};
use serde_json::{Value, json};

#[tokio::test]
async fn every_off_ramp_request_is_checked_and_20_identical_submissions_make_one_conversion() {
    for backend in BACKENDS {
        let (platform, port, _run, _) = funded(backend, "3").await;
        let us = bank(&platform, port, "us", "000123456789").await;
        let mx = bank(&platform, port, "mx", "000123450000").await;
        let swift = bank(&platform, port, "swift", "000555").await;
        let priced = quote(&platform, port, &mx, "40.00").await;
        let q = priced["id"].as_str().unwrap();

        let cases = [
            (json!({ "fee": "1.00", "fee_bps": 5 }), 400, "INVALID_REQUEST", "fee, fee_bps"),
            (json!({ "type": "ON_RAMP" }), 400, "INVALID_REQUEST", "type"),
            (json!({ "request_id": "not-a-uuid" }), 400, "INVALID_REQUEST", "request_id"),
            (json!({ "amount": "1.005" }), 400, "INVALID_REQUEST", "amount"),
            (
                json!({ "source": { "currency": "TUSD", "chain": common::CHAIN.as_str() } }),
                400,
                "INVALID_REQUEST",
                "source.currency",
            ),
            (
                json!({ "source": { "currency": "USDC", "chain": "SOLANA_DEVNET" } }),
                400,
                "INVALID_REQUEST",
                "source.chain",
            ),
            (json!({ "quote_id": q }), 400, "INVALID_REQUEST", "quote_id"),
            (json!({ "amount": "10000.00" }), 400, "INSUFFICIENT_BALANCE", "available"),
            (json!({ "account_id": "nobody-1" }), 404, "NOT_FOUND", "nobody-1"),
            (json!({ "payment_instructions_id": "no-such-bank" }), 404, "NOT_FOUND", "no-such-bank"),
            (json!({ "payment_instructions_id": mx }), 400, "INVALID_REQUEST", "take a quote"),
            (
                json!({ "payment_instructions_id": mx, "quote_id": q, "amount": "41.00" }),
                400,
                "INVALID_REQUEST",
                "quoted source.amount",
            ),
            (
                json!({ "payment_instructions_id": swift, "quote_id": q, "amount": "40.00" }),
                400,
                "INVALID_REQUEST",
                "prices a payout to bank account",
            ),
            (
                json!({ "payment_instructions_id": mx, "quote_id": "no-such-quote", "amount": "40.00" }),
                404,
                "NOT_FOUND",
                "quote",
            ),
        ];
        for (change, status, code, mentions) in cases {
            let mut body = off_ramp(&new_id(), &us, "20.00", None);
            for (key, value) in change.as_object().unwrap() {
                body[key] = value.clone();
            }
            let answer = submit(&platform, port, &body).await;
            refused(&answer, status, code, mentions);
        }

        // A quoted off-ramp: INITIATED, nothing settled yet; the quote once.
        let first = new_id();
        let body = off_ramp(&first, &mx, "40.00", Some(q));
        let created = submit(&platform, port, &body).await;
        assert_eq!(created.status, 201, "{created:?}");
        let conversion = created.body;
        assert_eq!((&conversion["status"], &conversion["type"]), (&json!("INITIATED"), &json!("OFF_RAMP")));
        assert_eq!(conversion["quote_id"], q);
        assert_eq!(conversion["destination"], json!({ "currency": "MXN", "amount": null }));
        assert_eq!(
            conversion["source"],
            json!({ "currency": "USDC", "amount": "40.00", "chain": common::CHAIN.as_str() })
        );
        assert_eq!((&conversion["exchange_rate"], &conversion["completed_at"]), (&Value::Null, &Value::Null));
        let again = submit(&platform, port, &body).await;
        assert_eq!(
            (again.status, &again.body["id"]),
            (201, &conversion["id"]),
            "a retry is the same conversion"
        );
        refused(
            &submit(&platform, port, &off_ramp(&new_id(), &mx, "40.00", Some(q))).await,
            409,
            "QUOTE_ALREADY_USED",
            q,
        );
        let other = off_ramp(&first, &mx, "41.00", Some(q));
        refused(
            &submit(&platform, port, &other).await,
            409,
            "REQUEST_ID_REUSED",
            conversion["id"].as_str().unwrap(),
        );

        // A quote past expires_at.
        let stale = quote(&platform, port, &mx, "5.00").await;
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        let late = off_ramp(&new_id(), &mx, "5.00", stale["id"].as_str());
        refused(&submit(&platform, port, &late).await, 400, "QUOTE_EXPIRED", stale["id"].as_str().unwrap());

        // No list of conversions.
        let url = format!("http://127.0.0.1:{port}/v2/conversions");
        assert_eq!(common::api::send(Method::GET, &url, Some(&platform.key)).await.status, 405);

        // Another organization sees none of it: not the account, the bank
        // account, the quote nor the conversion.
        platform.cli(&["organizations", "create", "--id", "globex", "--name", "Globex"]);
        let created = platform.cli(&["api-keys", "create", "--organization", "globex", "--name", "ops"]);
        let globex = created.lines().last().unwrap();
        for body in [off_ramp(&new_id(), &us, "1.00", None), off_ramp(&first, &mx, "40.00", Some(q))] {
            let answer = send_json(Method::POST, &url, Some(globex), Some(&body)).await;
            refused(&answer, 404, "NOT_FOUND", "ada-1");
        }
        let read = format!("http://127.0.0.1:{port}/v2/conversions/{}", conversion["id"].as_str().unwrap());
        refused(&common::api::send(Method::GET, &read, Some(globex)).await, 404, "NOT_FOUND", "conversion");

        // 20 identical submissions at once: one conversion, one hold.
        let same = off_ramp(&new_id(), &us, "25.00", None);
        let answers = futures::future::join_all((0..20).map(|_| submit(&platform, port, &same))).await;
        let ids: std::collections::BTreeSet<String> = answers
            .iter()
            .map(|a| a.body["id"].as_str().unwrap_or_else(|| panic!("{a:?}")).to_string())
            .collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
        assert!(answers.iter().all(|a| a.status == 201), "a replay answers as the create: {answers:?}");
        let id = ids.into_iter().next().unwrap();
        assert_eq!(announced(&platform, port, &id).await.first().map(String::as_str), Some("INITIATED"));
        let transfers = platform.get(port, "/v2/crypto/transfers?account_id=ada-1&limit=100").await;
        let held: Vec<&Value> =
            transfers["transfers"].as_array().unwrap().iter().filter(|t| t["amount"] == "25").collect();
        assert_eq!(held.len(), 1, "one collect transfer: {held:?}");

        // Identity gates: fiat withdrawn, then suspended.
        let by = ["--organization", "acme", "--by", "kyc", "--reason", "review"];
        platform.cli(&[&["identities", "fiat", "disable", "ada"][..], &by].concat());
        let gated = off_ramp(&new_id(), &us, "1.00", None);
        refused(&submit(&platform, port, &gated).await, 400, "FIAT_NOT_ENABLED", "ada");
        platform.cli(&[&["identities", "fiat", "enable", "ada"][..], &by].concat());
        platform.cli(&[&["identities", "suspend", "ada"][..], &by].concat());
        refused(&submit(&platform, port, &gated).await, 400, "ACCOUNT_NOT_ACTIVE", "ada");
    }
}

#[tokio::test]
async fn a_us_wire_is_paid_out_and_a_returned_or_refused_payout_comes_back_on_chain() {
    let (platform, port, _run, settlement) = funded(Backend::Sqlite, "60").await;
    // At most 200 USDC a day leaves ada-1: what came back does not count.
    let limit =
        ["limits", "create", "--organization", "acme", "--account-id", "ada-1", "--currency-symbol", "USDC"];
    platform.cli(&[&limit[..], &["--max-24h", "200"]].concat());
    let paid_to = bank(&platform, port, "us", "000123456789").await;
    let returned_by = bank(&platform, port, "us", "000123459999").await;
    let refused_by = bank(&platform, port, "us", "000123458888").await;

    let paid = submit(&platform, port, &off_ramp(&new_id(), &paid_to, "100.00", None)).await;
    assert_eq!(paid.status, 201, "{paid:?}");
    // A US wire's payout is known at creation.
    assert_eq!(paid.body["destination"], json!({ "currency": "USD", "amount": "100.00" }));
    let back = submit(&platform, port, &off_ramp(&new_id(), &returned_by, "50.00", None)).await.body;
    let never = submit(&platform, port, &off_ramp(&new_id(), &refused_by, "30.00", None)).await.body;

    let completed = ended(&platform, port, paid.body["id"].as_str().unwrap()).await;
    assert_eq!(completed["status"], "COMPLETED", "{completed}");
    assert_eq!(
        (&completed["exchange_rate"], &completed["destination"]["amount"]),
        (&json!("1"), &json!("100.00"))
    );
    assert!(completed["completed_at"].is_string());
    assert_eq!((&completed["failure_reason"], &completed["refund_details"]), (&Value::Null, &Value::Null));
    let five = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"];
    assert_eq!(announced(&platform, port, completed["id"].as_str().unwrap()).await, five);

    let returned = ended(&platform, port, back["id"].as_str().unwrap()).await;
    assert_eq!(returned["status"], "RETURNED", "{returned}");
    assert!(returned["failure_reason"].as_str().unwrap().contains("returned"), "{returned}");
    let refund = &returned["refund_details"];
    assert_eq!((&refund["amount"], &refund["currency"]), (&json!("50"), &json!("USDC")), "{returned}");
    assert!(refund["transaction_hash"].as_str().unwrap().starts_with("0x"), "{returned}");
    assert_eq!(refund["failure"]["code"], "PAYOUT_RETURNED", "{returned}");
    assert_eq!(refund["failure"]["message"], returned["failure_reason"], "the bank's text");
    assert!(
        refund.as_object().unwrap().values().all(|v| !v.is_null()),
        "an unknown key is left out: {refund}"
    );
    // The credit is the platform's own transfer: named, not one of the
    // account's (the transfers the account sent do not include it).
    let credit = refund["transfer_id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(credit).is_ok(), "{refund}");
    let sent = platform.get(port, "/v2/crypto/transfers?account_id=ada-1&limit=100").await;
    assert!(sent["transfers"].as_array().unwrap().iter().all(|t| t["id"] != credit), "{sent}");
    assert_eq!(returned["completed_at"], Value::Null);
    let sent_back = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "RETURNED"];
    assert_eq!(announced(&platform, port, back["id"].as_str().unwrap()).await, sent_back);

    let failed = ended(&platform, port, never["id"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "FAILED", "{failed}");
    assert!(failed["failure_reason"].as_str().unwrap().contains("refused"), "{failed}");
    assert_eq!(failed["refund_details"], Value::Null);
    let refused_steps = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "FAILED"];
    assert_eq!(announced(&platform, port, never["id"].as_str().unwrap()).await, refused_steps);

    // Only the paid 100 left the account; the settlement wallet holds it.
    assert_eq!(platform.balance().await, U256::from(200 * USDC));
    assert_eq!(usdc_of(&platform, settlement).await, U256::from(100 * USDC));

    // Retried against the same instructions (150 USDC of the day's 200:
    // the 80 that came back are not counted), a return comes back again.
    let retry = submit(&platform, port, &off_ramp(&new_id(), &returned_by, "50.00", None)).await;
    assert_eq!(retry.status, 201, "{retry:?}");
    let retry = retry.body;
    assert_eq!(ended(&platform, port, retry["id"].as_str().unwrap()).await["status"], "RETURNED");
    assert_eq!(platform.balance().await, U256::from(200 * USDC));

    // A quoted corridor settles at the quote: its payout and its rate.
    let mx = bank(&platform, port, "mx", "000123450000").await;
    let priced = quote(&platform, port, &mx, "20.00").await;
    let body = off_ramp(&new_id(), &mx, "20.00", priced["id"].as_str());
    let abroad = submit(&platform, port, &body).await.body;
    let settled = ended(&platform, port, abroad["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "COMPLETED", "{settled}");
    assert_eq!(settled["destination"], priced["destination"]);
    assert_eq!(settled["exchange_rate"], priced["exchange_rate"]);
    assert_eq!(platform.balance().await, U256::from(180 * USDC));
    assert_eq!(usdc_of(&platform, settlement).await, U256::from(120 * USDC));
}

#[tokio::test]
async fn a_refund_the_settlement_wallet_cannot_pay_for_is_sent_again_once_it_can() {
    let platform = Platform::new(Backend::Sqlite).await;
    // Transactions not sent within 2 s fail: the unfunded wallet's first
    // refund does, provably (nothing was ever sent).
    let file = platform.env.chains.join("test.toml");
    let toml = std::fs::read_to_string(&file).unwrap();
    let toml = toml.replacen("native_usd = \"3000\"", "native_usd = \"3000\"\nsubmit_within_secs = 2", 1);
    std::fs::write(&file, toml).unwrap();
    let port = dead_port();
    let _run = platform.run(port);
    let mint = platform.wire(port, "30.00").await;
    platform.completed(port, &mint).await;
    let returned_by = bank(&platform, port, "us", "000123459999").await;
    let id = submit(&platform, port, &off_ramp(&new_id(), &returned_by, "10.00", None)).await.body;
    let id = id["id"].as_str().unwrap();

    let store = platform.env.store().await;
    let failed_refund = eventually(Duration::from_secs(60), "the first refund failed", || async {
        platform.anvil.mine(1).await;
        let refund = store.off_ramp_refund(id).await.unwrap()?;
        let refund = store.transfer(&refund).await.ok()?;
        (refund.status.as_str() == "FAILED").then_some(refund)
    })
    .await;
    assert_eq!(failed_refund.failure_details.unwrap().code, "NOT_SUBMITTED");
    let waiting = platform.get(port, &format!("/v2/conversions/{id}")).await;
    assert_eq!(waiting["status"], "PAYOUT_IN_PROGRESS", "nothing came back yet: {waiting}");
    assert_eq!(platform.balance().await, U256::from(20 * USDC));
    let listed = platform.operator(&["conversions", "payouts", "list"]);
    assert!(listed.contains(&format!("{id} acme REFUND 10.00 USDC")), "{listed}");
    assert!(listed.contains("owes back 10.00 USDC"), "{listed}");

    // Funded, the next attempt (after its backoff) sends it back, once.
    let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
    let settlement: Address = wallets[0]["settlement"].as_str().unwrap().parse().unwrap();
    let anvil = &platform.anvil;
    anvil.send_eth(anvil.accounts[0], settlement, U256::from(common::transfers::ETH)).await;
    let returned = ended(&platform, port, id).await;
    assert_eq!(returned["status"], "RETURNED", "{returned}");
    assert_ne!(returned["refund_details"]["transaction_hash"], Value::Null);
    assert_eq!(platform.balance().await, U256::from(30 * USDC));
    assert_eq!(usdc_of(&platform, settlement).await, U256::ZERO);
}

#[tokio::test]
async fn a_suspension_fails_an_off_ramp_that_moved_nothing_with_the_reason_and_frees_its_quote() {
    let platform = Platform::new(Backend::Sqlite).await;
    let port = dead_port();
    // The API alone: the off-ramp is accepted, its collect not yet signed.
    let _serve = platform.minted_then_serving(port, "20.00").await;
    let mx = bank(&platform, port, "mx", "000123456789").await;
    let q = quote(&platform, port, &mx, "20.00").await;
    let q = q["id"].as_str().unwrap();
    let created = submit(&platform, port, &off_ramp(&new_id(), &mx, "20.00", Some(q))).await;
    assert_eq!(created.status, 201, "{created:?}");
    let by = ["--organization", "acme", "--by", "kyc", "--reason", "fraud review"];
    platform.cli(&[&["identities", "suspend", "ada"][..], &by].concat());
    let id = created.body["id"].as_str().unwrap();
    let failed = ended(&platform, port, id).await;
    assert_eq!(failed["status"], "FAILED", "{failed}");
    assert!(failed["failure_reason"].as_str().unwrap().starts_with("ACCOUNT_NOT_ACTIVE"), "{failed}");
    assert_eq!(announced(&platform, port, id).await, ["INITIATED", "FAILED"]);
    assert_eq!(platform.balance().await, U256::from(20 * USDC), "nothing left the account");

    // A quote supports one successful conversion: the failed one did not
    // use it up, so another request may, once; the failed one keeps it.
    platform.cli(&[&["identities", "reinstate", "ada"][..], &by].concat());
    let again = submit(&platform, port, &off_ramp(&new_id(), &mx, "20.00", Some(q))).await;
    assert_eq!((again.status, &again.body["quote_id"]), (201, &json!(q)), "{again:?}");
    assert_ne!(again.body["id"], created.body["id"]);
    refused(
        &submit(&platform, port, &off_ramp(&new_id(), &mx, "20.00", Some(q))).await,
        409,
        "QUOTE_ALREADY_USED",
        q,
    );
    let path = format!("/v2/conversions/{id}");
    assert_eq!(platform.get(port, &path).await["quote_id"], q);
}

#[tokio::test]
async fn in_production_an_operator_answers_the_payout_and_a_return_comes_back() {
    use alloy::providers::Provider;
    let platform = Platform::new(Backend::Postgres).await;
    let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
    let settlement: Address = wallets[0]["settlement"].as_str().unwrap().parse().unwrap();
    let anvil = &platform.anvil;
    anvil.send_eth(anvil.accounts[0], settlement, U256::from(common::transfers::ETH)).await;
    let port = dead_port();
    let _run = platform.run_production(port, &[]);
    api_up(port).await;
    fund_directly(&platform, 80).await;
    let us = bank(&platform, port, "us", "000123456789").await;
    // Both are accepted before the first one's collection is mined: a
    // transfer mined but not yet confirmed is still held against the
    // balance the chain already shows without it (docs/transfers.md).
    platform.pause_mining().await;
    let paid = submit(&platform, port, &off_ramp(&new_id(), &us, "50.00", None)).await;
    let back = submit(&platform, port, &off_ramp(&new_id(), &us, "30.00", None)).await;
    platform.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (true,)).await.unwrap();
    assert_eq!((paid.status, back.status), (201, 201), "{paid:?} {back:?}");
    let (paid, back) = (paid.body["id"].as_str().unwrap(), back.body["id"].as_str().unwrap());
    for id in [paid, back] {
        eventually(Duration::from_secs(60), "the payout handed to the bank", || async {
            platform.anvil.mine(1).await;
            let conversion = platform.get(port, &format!("/v2/conversions/{id}")).await;
            (conversion["status"] == "PAYOUT_INITIATED").then_some(())
        })
        .await;
    }
    // Nothing happens until the bank answers: the operators see both wait.
    let listed: Value =
        serde_json::from_str(&platform.operator(&["conversions", "payouts", "list", "--json"])).unwrap();
    let waiting: std::collections::BTreeSet<(&str, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["conversion_id"].as_str().unwrap(), p["waiting_for"].as_str().unwrap()))
        .collect();
    assert_eq!(waiting, [(paid, "BANK_ANSWER"), (back, "BANK_ANSWER")].into());
    // Handed to the operators' bank under the off-ramp's id, its reference.
    for pending in listed.as_array().unwrap() {
        assert_eq!(pending["payout_reference"], pending["conversion_id"], "{pending}");
    }
    // Two treasury operators of the service answer.
    let [alice, bob] = <[String; 2]>::try_from(
        platform.operators(port, &[("Alice", "treasury"), ("Bob", "treasury")]).await,
    )
    .unwrap();
    let text = |out: &std::process::Output| {
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    let record = |key: &str, id: &str, outcome: &str, reason: &str| {
        let args = ["conversions", "payouts", "record", id, "--outcome", outcome, "--reason", reason];
        platform.as_operator(port, key, &args)
    };
    let answered = record(&alice, paid, "paid", "fed reference 2026112400001");
    assert!(answered.status.success(), "{}", text(&answered));
    let answered = record(&alice, back, "returned", "R03: no account");
    assert!(text(&answered).contains("awaiting a second operator"), "{}", text(&answered));
    // A return sends stablecoin back: it waits for a second operator.
    let listed = platform.operator(&["conversions", "payouts", "list"]);
    assert!(listed.contains(&format!("{back} acme CONFIRMATION")), "{listed}");
    let confirm = ["conversions", "payouts", "confirm", back];
    let own = platform.as_operator(port, &alice, &confirm);
    assert!(!own.status.success() && text(&own).contains("another operator"), "{}", text(&own));
    assert_eq!(platform.get(port, &format!("/v2/conversions/{back}")).await["status"], "PAYOUT_INITIATED");
    let confirmed = platform.as_operator(port, &bob, &confirm);
    assert!(confirmed.status.success(), "{}", text(&confirmed));
    let again = platform.as_operator(port, &bob, &confirm);
    assert!(!again.status.success(), "a confirmed answer is confirmed once: {}", text(&again));
    let out = record(&bob, paid, "paid", "again");
    assert!(!out.status.success(), "an answered payout takes no second answer");
    assert_eq!(ended(&platform, port, paid).await["status"], "COMPLETED");
    let returned = ended(&platform, port, back).await;
    assert_eq!(
        (&returned["status"], &returned["failure_reason"]),
        (&json!("RETURNED"), &json!("R03: no account"))
    );
    assert_eq!(returned["refund_details"]["amount"], "30");
    assert_eq!(
        returned["refund_details"]["failure"],
        json!({ "code": "PAYOUT_RETURNED", "message": "R03: no account" })
    );
    assert_eq!(platform.balance().await, U256::from(30 * USDC));
    assert_eq!(usdc_of(&platform, settlement).await, U256::from(50 * USDC));
    assert_eq!(platform.operator(&["conversions", "payouts", "list"]), "", "nothing pending");
    // Every answer is attributed in the audit log, whose chain holds.
    let log = platform.operator(&["audit", "list"]);
    for (action, who) in [("payout.answered_awaiting_confirmation", "Alice"), ("payout.confirmed", "Bob")] {
        assert!(log.lines().any(|l| l.contains(action) && l.contains(&format!("({who})"))), "{log}");
    }
    assert!(platform.operator(&["audit", "verify"]).contains("verified"));
}

#[tokio::test]
async fn killed_with_collect_transactions_out_then_raced_every_off_ramp_completes_once() {
    let (platform, port, mut run, settlement) = funded(Backend::Postgres, "60").await;
    let us = bank(&platform, port, "us", "000123456789").await;
    platform.pause_mining().await;
    let mut ids = Vec::new();
    for amount in ["10.00", "20.00", "30.00"] {
        let created = submit(&platform, port, &off_ramp(&new_id(), &us, amount, None)).await;
        assert_eq!(created.status, 201, "{created:?}");
        ids.push(created.body["id"].as_str().unwrap().to_string());
    }
    platform.kill_with_transactions_out(&mut run).await;
    let env = [("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")];
    let (one, two) = (dead_port(), dead_port());
    let _first = platform.run_with(one, &env);
    let _second = platform.run_with(two, &env);
    api_up(one).await;
    for id in &ids {
        assert_eq!(ended(&platform, one, id).await["status"], "COMPLETED");
        let five = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"];
        assert_eq!(announced(&platform, one, id).await, five, "conversion {id}");
    }
    assert_eq!(platform.balance().await, U256::from(240 * USDC), "each collected once");
    assert_eq!(usdc_of(&platform, settlement).await, U256::from(60 * USDC));
}
