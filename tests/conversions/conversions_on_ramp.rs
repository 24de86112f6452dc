//! On-ramps on a real chain: `run` on anvil with the platform's USDC
//! deployed, a virtual account opened for an `ACTIVE`, fiat-enabled
//! identity, a wire to it minted by the chain's sender and confirmed by our
//! watcher: exactly five `conversion_notification_update` events in order,
//! the stablecoin at the account's address, the books balanced. In
//! `production`, on PostgreSQL: a virtual account opened by an operator, a
//! wire recorded by one and approved by another, less the on-ramp fee.

use crate::common;

use std::time::Duration;

use alloy::primitives::U256;
use common::{
    CHAIN,
    db::Backend,
    dead_port, eventually,
    platform::{Platform, api_up, reconcile},
};
use serde_json::{Value, json};

/// Opens a virtual account of `ada` for `ada-1` through the API: its id.
async fn virtual_account(platform: &Platform, port: u16) -> String {
    api_up(port).await;
    let body = json!({ "request_id": "va-1",
        "destination": { "account_id": "ada-1", "currency": "USDC", "chain": CHAIN.as_str() },
        "source": { "banking_country": "US" } });
    let created = platform.post(port, "/v2/identities/ada/virtual-accounts", &body).await;
    assert_eq!(created["status"], "VIRTUAL_ACCOUNT_STATUS_PENDING", "{created}");
    created["id"].as_str().unwrap().to_string()
}

/// Waits until the virtual account `va` of `ada` is `ACTIVE`.
async fn active(platform: &Platform, port: u16, va: &str) {
    eventually(Duration::from_secs(15), "the virtual account ACTIVE", || async {
        let page = platform.get(port, "/v2/identities/ada/virtual-accounts").await;
        let found = page["virtual_accounts"].as_array()?.iter().find(|v| v["id"] == va)?.clone();
        (found["status"] == "VIRTUAL_ACCOUNT_STATUS_ACTIVE").then_some(())
    })
    .await;
}

/// A simulated wire of `amount` to `va`: its conversion's id.
async fn wire(platform: &Platform, port: u16, va: &str, amount: &str) -> String {
    let wire = json!({ "virtual_account_id": va, "amount": amount, "currency": "USD" });
    let answer = platform.post(port, "/v2/simulation/virtual-account-deposit", &wire).await;
    answer["conversion_id"].as_str().unwrap().to_string()
}

/// Mines a block each poll until conversion `id` is `COMPLETED`.
async fn completed(platform: &Platform, port: u16, id: &str) -> Value {
    eventually(Duration::from_secs(90), &format!("conversion {id} COMPLETED"), || async {
        platform.anvil.mine(1).await;
        let conversion = platform.get(port, &format!("/v2/conversions/{id}")).await;
        assert_ne!(conversion["status"], "FAILED", "{conversion}");
        (conversion["status"] == "COMPLETED").then_some(conversion)
    })
    .await
}

/// The `conversion_notification_update` events of conversion `id`.
async fn updates(platform: &Platform, port: u16, id: &str) -> Vec<Value> {
    let page = platform.get(port, "/v2/events?limit=100").await;
    common::api::events_about(&page, "conversion_notification_update", id)
}

#[tokio::test]
async fn a_wire_to_a_virtual_account_is_delivered_on_chain_in_five_announced_steps() {
    let platform = Platform::new(Backend::Sqlite).await;
    let port = dead_port();
    let _run = platform.run(port);
    let va = virtual_account(&platform, port).await;
    active(&platform, port, &va).await;
    let id = wire(&platform, port, &va, "250.00").await;
    let conversion = completed(&platform, port, &id).await;

    // Delivered: exactly the wire (no fee in sandbox), at the account's address.
    assert_eq!(platform.balance().await, U256::from(250_000_000u64));
    assert_eq!(conversion["destination"], json!({ "currency": "USDC", "amount": "250.00" }));
    assert_eq!(conversion["exchange_rate"], "1");
    assert!(conversion["completed_at"].is_string(), "{conversion}");
    assert_eq!((&conversion["failure_reason"], &conversion["refund_details"]), (&Value::Null, &Value::Null));

    // Five events, one per status, in order, each id stable per status; the
    // last one's data is exactly what the read answers.
    let events = updates(&platform, port, &id).await;
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| (e["id"].as_str().unwrap().to_string(), e["data"]["status"].as_str().unwrap().to_string()))
        .collect();
    let expected: Vec<(String, String)> =
        ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"]
            .iter()
            .map(|s| (format!("{id}-{}", s.to_lowercase()), s.to_string()))
            .collect();
    assert_eq!(seen, expected);
    assert_eq!(events[4]["data"], conversion);
    for event in &events[..4] {
        assert_eq!(
            (&event["data"]["completed_at"], &event["data"]["destination"]["amount"]),
            (&Value::Null, &Value::Null)
        );
    }

    // One deposit, CONFIRMED; the books balance.
    let deposits = platform.get(port, "/v2/crypto/deposits?account_id=ada-1").await;
    let deposits = deposits["deposits"].as_array().unwrap();
    assert_eq!(deposits.len(), 1, "{deposits:?}");
    assert_eq!((&deposits[0]["amount"], &deposits[0]["status"]), (&json!("250"), &json!("CONFIRMED")));
    let books = reconcile(&platform.env, 0);
    assert_eq!(books[0]["fiat_received"], "250.00", "{books}");
}

#[tokio::test]
async fn in_production_an_operator_opens_the_virtual_account_and_two_operators_deliver_a_wire_less_its_fee() {
    let platform = Platform::new(Backend::Postgres).await;
    let port = dead_port();
    let _run = platform.run_production(port, &[("CUSTODY_INDEXER_ON_RAMP_FEE_BPS", "150")]);
    let va = virtual_account(&platform, port).await;
    let operator = |args: &[&str]| platform.operator(args);
    // In production the operators are principals of the service.
    let [ann, bo] =
        <[String; 2]>::try_from(platform.operators(port, &[("Ann", "treasury"), ("Bo", "treasury")]).await)
            .unwrap();
    let as_ann = |args: &[&str]| {
        let out = platform.as_operator(port, &ann, args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let open = ["conversions", "virtual-accounts", "open", &va, "--account-number", "700000000001"];
    let direct = platform.env.command(&open).output().unwrap();
    assert!(!direct.status.success(), "a production store refuses an answer on it directly");
    // Recorded by one operator, the number waits for another's confirmation.
    let recorded = as_ann(&[&open[..], &["--reason", "the bank opened it"]].concat());
    assert!(recorded.contains("VIRTUAL_ACCOUNT_STATUS_PENDING"), "{recorded}");
    let confirm = ["conversions", "virtual-accounts", "confirm", &va, "--account-number", "700000000001"];
    let other = ["conversions", "virtual-accounts", "confirm", &va, "--account-number", "700000000002"];
    let mismatch = platform.as_operator(port, &bo, &other);
    assert!(
        !mismatch.status.success() && String::from_utf8_lossy(&mismatch.stderr).contains("409"),
        "another number than the one recorded: {mismatch:?}"
    );
    let own = platform.as_operator(port, &ann, &confirm);
    assert!(
        !own.status.success() && String::from_utf8_lossy(&own.stderr).contains("403"),
        "the recorder does not confirm: {own:?}"
    );
    // As the issue names it: the number recorded, confirmed.
    let as_bo = platform.as_operator(port, &bo, &["conversions", "virtual-accounts", "confirm", &va]);
    assert!(String::from_utf8_lossy(&as_bo.stdout).contains("VIRTUAL_ACCOUNT_STATUS_ACTIVE"), "{as_bo:?}");
    let page = platform.get(port, "/v2/identities/ada/virtual-accounts").await;
    let instructions = &page["virtual_accounts"][0]["deposit_instructions"];
    assert_eq!(
        (&instructions["bank_account_number"], &instructions["bank_routing_number"]),
        (&json!("700000000001"), &json!("021000021"))
    );

    let record = [
        "conversions",
        "wires",
        "record",
        "--virtual-account-id",
        &va,
        "--amount",
        "100.00",
        "--reference",
        "FED-VA-1",
        "--reason",
        "arrived",
    ];
    let recorded = as_ann(&record);
    let id = recorded.lines().last().unwrap().to_string();
    assert_eq!(as_ann(&record).lines().last(), Some(id.as_str()), "the same wire again: the same conversion");
    // Recorded by one operator, the mint waits for another's approval.
    eventually(Duration::from_secs(15), "PROCESSING", || async {
        (platform.get(port, &format!("/v2/conversions/{id}")).await["status"] == "PROCESSING").then_some(())
    })
    .await;
    let own = platform.as_operator(port, &ann, &["issuance", "wires", "approve", "FED-VA-1"]);
    assert!(!own.status.success(), "the recorder does not approve: {own:?}");
    let approved = platform.as_operator(port, &bo, &["issuance", "wires", "approve", "FED-VA-1"]);
    assert!(String::from_utf8_lossy(&approved.stdout).contains("MINTING"), "{approved:?}");
    let conversion = completed(&platform, port, &id).await;
    assert_eq!(conversion["source"]["amount"], "100.00");
    assert_eq!(conversion["destination"]["amount"], "98.50", "less 1.5%");
    assert_eq!(platform.balance().await, U256::from(98_500_000u64));
    let statuses: Vec<Value> =
        updates(&platform, port, &id).await.iter().map(|e| e["data"]["status"].clone()).collect();
    assert_eq!(statuses, ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"]);
    let shown = operator(&["conversions", "show", &id, "--json"]);
    assert_eq!(serde_json::from_str::<Value>(&shown).unwrap()["status"], "COMPLETED");
    // The books: the wire received, 98.50 minted and 1.50 kept.
    let books = reconcile(&platform.env, 0);
    assert_eq!(
        (&books[0]["fiat_received"], &books[0]["fees"]),
        (&json!("100.00"), &json!("1.50")),
        "{books}"
    );

    // The bank's camt.054 file, imported once: a credit quoting the
    // virtual account's deposit message starts a conversion, one quoting a
    // mint instruction's memo a mint, each once however often the file is
    // imported, by whichever name. Credited to the virtual account's own
    // number, as a bank reports a wire to it.
    let message = instructions["deposit_message"].as_str().unwrap();
    let memo = platform.instruction(port).await;
    let memo = memo.as_str().unwrap();
    let file = platform.env.dir.path().join("camt054.xml");
    let remittance = format!("ACME PAYROLL {}", message.to_lowercase());
    let credits = [
        ("FED-VA-2", "40.00", remittance.as_str()),
        ("FED-VA-3", "5.00", "no reference"),
        ("FED-MI-1", "30.00", memo),
    ];
    std::fs::write(&file, common::camt054::notification_to("700000000001", &credits)).unwrap();
    // The file is the body of the operator API's import.
    let import = ["bank", "import", file.to_str().unwrap(), "--reason", "statement"];
    let imported = as_ann(&import);
    let lines: Vec<&str> = imported.lines().collect();
    assert_eq!(lines.len(), 4, "{imported}");
    let prefix = format!("wire FED-VA-2: 40.00 USD to virtual account {va}: conversion ");
    assert!(lines[0].starts_with(&prefix), "{imported}");
    assert_eq!(
        lines[1],
        "unmatched FED-VA-3: 5.00 USD \"no reference\": no memo_id or deposit message in its remittance information"
    );
    // A memo credited to a virtual account's own number: a mint's wire goes
    // to the receiving account, so it waits for an operator.
    assert!(
        lines[2].starts_with("unmatched FED-MI-1: 30.00 USD")
            && lines[2]
                .contains(&format!("credited to virtual account {va}'s number but quoting memo_id {memo}")),
        "{imported}"
    );
    assert_eq!(lines[3], "1 applied, 0 applied before, 2 unmatched");
    // The bank's file for the receiving account: the memo's wire mints, the
    // on-ramp's credit is the one applied before.
    std::fs::write(&file, common::camt054::notification(&credits)).unwrap();
    let imported = as_ann(&import);
    let lines: Vec<&str> = imported.lines().collect();
    assert!(lines[0].starts_with(&format!("wire FED-MI-1: 30.00 USD for memo {memo}: mint ")), "{imported}");
    assert!(lines[0].ends_with(" AWAITING_APPROVAL"), "{imported}");
    assert!(lines[1].starts_with(&prefix) && lines[1].ends_with("(applied before)"), "{imported}");
    assert_eq!(lines[3], "1 applied, 1 applied before, 1 unmatched");
    let second = lines[1][prefix.len()..].split(' ').next().unwrap();
    for name in [&import[..], &["conversions", "wires", "import", file.to_str().unwrap(), "--reason", "r"]] {
        let again = as_ann(name);
        assert!(
            again.starts_with(&format!("{prefix}{second} "))
                && again.ends_with("0 applied, 2 applied before, 1 unmatched\n"),
            "the same file again, the same conversion: {again}"
        );
    }
    let conversion = platform.get(port, &format!("/v2/conversions/{second}")).await;
    assert_eq!((&conversion["source"]["amount"], &conversion["type"]), (&json!("40.00"), &json!("ON_RAMP")));
    let mints = operator(&["issuance", "mints", "list", "--json"]);
    let wired = serde_json::from_str::<Value>(&mints).unwrap();
    let of_memo: Vec<&Value> = wired.as_array().unwrap().iter().filter(|m| m["memo_id"] == memo).collect();
    assert_eq!(of_memo.len(), 1, "one mint for the memo's credit: {mints}");

    // The route answers each credit in its list; a file to an account the
    // platform takes no wires at applies nothing.
    let elsewhere = common::camt054::notification_to("999999", &[("FED-VA-9", "40.00", remittance.as_str())]);
    let body = json!({ "camt054": elsewhere, "reason": "statement" });
    let answer = common::api::send_json(
        alloy::transports::http::reqwest::Method::POST,
        &format!("http://127.0.0.1:{port}/operator/v1/bank/imports"),
        Some(ann.as_str()),
        Some(&body),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        (
            answer.body["applied"].as_array().unwrap().len(),
            answer.body["already_applied"].as_array().unwrap().len()
        ),
        (0, 0),
        "{answer:?}"
    );
    let reason = answer.body["unmatched"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("credited to account 999999, which is neither"), "{reason}");
    let body = json!({ "camt054": std::fs::read_to_string(&file).unwrap(), "reason": "statement" });
    let answer = common::api::send_json(
        alloy::transports::http::reqwest::Method::POST,
        &format!("http://127.0.0.1:{port}/operator/v1/issuance/wires/import"),
        Some(ann.as_str()),
        Some(&body),
    )
    .await;
    let applied = &answer.body["already_applied"];
    assert_eq!(applied[0]["wing"], "ON_RAMP", "{answer:?}");
    assert_eq!(applied[0]["conversion_id"], second, "{answer:?}");
    assert_eq!(applied[1]["wing"], "ISSUANCE", "{answer:?}");
    assert_eq!(
        (&applied[1]["memo_id"], &applied[1]["amount"]),
        (&json!(memo), &json!("30.00")),
        "{answer:?}"
    );
}

#[tokio::test]
async fn on_ramps_whose_instance_is_killed_mid_way_are_delivered_once_by_two_racing_instances() {
    let platform = Platform::new(Backend::Postgres).await;
    let (first, second, third) = (dead_port(), dead_port(), dead_port());
    let mut killed = platform.run(first);
    let va = virtual_account(&platform, first).await;
    active(&platform, first, &va).await;
    // No block is mined while the only instance sends the mints: it is
    // killed with its transactions out and not included.
    platform.pause_mining().await;
    let mut ids = Vec::new();
    for amount in ["1000.25", "20.00", "3.50"] {
        ids.push(wire(&platform, first, &va, amount).await);
    }
    platform.kill_with_transactions_out(&mut killed).await;

    // Two instances take over at once; each conversion is delivered once,
    // announced once per status.
    let _racing = [platform.run(second), platform.run(third)];
    api_up(second).await;
    for id in &ids {
        completed(&platform, second, id).await;
        let statuses: Vec<Value> =
            updates(&platform, second, id).await.iter().map(|e| e["data"]["status"].clone()).collect();
        assert_eq!(
            statuses,
            ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"]
        );
    }
    assert_eq!(platform.balance().await, U256::from(1_023_750_000u64), "delivered once each");
    assert_eq!(platform.supply().await, U256::from(1_023_750_000u64));
    let books = reconcile(&platform.env, 0);
    assert_eq!(books[0]["minted"], "1023.75", "{books}");
}
