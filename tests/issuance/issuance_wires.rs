//! Wires for mint instructions: `sandbox`'s simulated wire through real HTTP
//! on both stores (the sandbox bank's outcomes by the cents, the identity's
//! entitlement when the wire settles, `mint_update` events one per status
//! with stable ids, validation, tenancy), its absence from `production`,
//! and operators recording and approving wires and returning the dollars
//! of failed mints.

use crate::common;

use std::time::Duration;

use common::{
    api::{App, send},
    db::{BACKENDS, Backend},
    eventually,
    issuance::{ADDRESS, CHAIN, account, app, app_on, chains_with, identity, refused},
};
use custody_indexer::environment::Environment;
use serde_json::{Value, json};
use sqlx::Connection;

const SIMULATION: &str = "/v2/simulation/fiat-deposit";

/// A mint instruction of `identity`'s account `account` through the API: its memo.
async fn instruction(app: &App, key: &str, identity: &str, account: &str) -> String {
    let body = json!({ "request_id": format!("{identity}-{account}"), "identity_id": identity,
                       "stablecoin_symbol": "USDC", "chain": CHAIN.as_str(), "mint_destination_address_id": account });
    let created = app.post("/v2/issuance/mint-instructions", key, &body).await;
    assert_eq!(created.status, 201, "{created:?}");
    created.body["memo_id"].as_str().unwrap().to_string()
}

fn wire(memo: &str, amount: &str) -> Value {
    json!({ "amount": amount, "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" })
}

/// Simulates a wire; the mint id.
async fn simulate(app: &App, key: &str, memo: &str, amount: &str) -> String {
    let answer = app.post(SIMULATION, key, &wire(memo, amount)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body.as_object().unwrap().keys().collect::<Vec<_>>(), ["mint_id"]);
    answer.body["mint_id"].as_str().unwrap().to_string()
}

async fn mint(app: &App, key: &str, id: &str) -> Value {
    let answer = app.get(&format!("/v2/issuance/mints/{id}"), key).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// Waits until the mint is `status`; the mint.
async fn reaches(app: &App, key: &str, id: &str, status: &str) -> Value {
    eventually(Duration::from_secs(20), &format!("mint {id} {status}"), || async {
        let mint = mint(app, key, id).await;
        (mint["status"] == status).then_some(mint)
    })
    .await
}

/// The organization's `mint_update` events of mint `id`, oldest first.
async fn updates(app: &App, key: &str, id: &str) -> Vec<Value> {
    let events = app.get("/v2/events?limit=100", key).await.body["events"].as_array().unwrap().clone();
    events.into_iter().filter(|e| e["type"] == "mint_update" && e["data"]["id"] == id).collect()
}

#[tokio::test]
async fn a_simulated_wire_starts_a_mint_and_the_sandbox_bank_decides_by_its_cents() {
    for backend in BACKENDS {
        let app = app(backend, Environment::Sandbox, None).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        identity(&app, "acme", "ada", true, true).await;
        identity(&app, "globex", "gus", true, true).await;
        account(&app, "acme", "ada", "ada-1", &[ADDRESS]).await;
        account(&app, "globex", "gus", "gus-1", &["0x00000000000000000000000000000000000000C1"]).await;
        let memo = instruction(&app, &acme, "ada", "ada-1").await;
        let theirs = instruction(&app, &globex, "gus", "gus-1").await;

        let id = simulate(&app, &acme, &memo, "250.00").await;
        let read = mint(&app, &acme, &id).await;
        let mut fields: Vec<&String> = read.as_object().unwrap().keys().collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "amount",
                "chain",
                "created_at",
                "deposit_id",
                "destination_address",
                "failure_reason",
                "fiat_currency_symbol",
                "id",
                "identity_id",
                "memo_id",
                "mint_instruction_id",
                "stablecoin_symbol",
                "status",
                "transaction_hash",
                "updated_at"
            ]
        );
        assert_eq!(read["status"], "MINTING", "settled at once, no approval in sandbox: {read}");
        assert_eq!((&read["amount"], &read["fiat_currency_symbol"]), (&json!("250.00"), &json!("USD")));
        assert_eq!((&read["stablecoin_symbol"], &read["chain"]), (&json!("USDC"), &json!(CHAIN.as_str())));
        assert_eq!((&read["destination_address"], &read["memo_id"]), (&json!(ADDRESS), &json!(memo)));
        assert_eq!((&read["transaction_hash"], &read["failure_reason"]), (&Value::Null, &Value::Null));
        // One event per status, its id the same for the same (mint, status).
        let events = updates(&app, &acme, &id).await;
        let seen: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e["id"].as_str().unwrap(), e["data"]["status"].as_str().unwrap()))
            .collect();
        let (received, minting) = (format!("{id}-received"), format!("{id}-minting"));
        assert_eq!(seen, [(received.as_str(), "RECEIVED"), (minting.as_str(), "MINTING")]);
        assert_eq!(events[1]["data"], read, "the event's data is the read at that status");

        // The sandbox bank's outcomes by the cents.
        let rejected = mint(&app, &acme, &simulate(&app, &acme, &memo, "10.66").await).await;
        assert_eq!(rejected["status"], "FAILED");
        assert!(rejected["failure_reason"].as_str().unwrap().starts_with("WIRE_REJECTED"), "{rejected}");
        let delayed = simulate(&app, &acme, &memo, "10.13").await;
        assert_eq!(mint(&app, &acme, &delayed).await["status"], "RECEIVED");
        let returned = simulate(&app, &acme, &memo, "10.99").await;
        reaches(&app, &acme, &delayed, "MINTING").await;
        let returned = reaches(&app, &acme, &returned, "FAILED").await;
        assert!(returned["failure_reason"].as_str().unwrap().starts_with("WIRE_RETURNED"), "{returned}");

        // The identity's entitlement when the wire settles decides.
        common::set_fiat(app.store(), "acme", "ada", false, "review").await.unwrap();
        let refused_mint = mint(&app, &acme, &simulate(&app, &acme, &memo, "5.00").await).await;
        assert_eq!(refused_mint["status"], "FAILED");
        assert!(refused_mint["failure_reason"].as_str().unwrap().starts_with("FIAT_NOT_ENABLED"));
        let owed: Vec<String> =
            app.store().fiat_returns(true).await.unwrap().into_iter().map(|r| r.mint.id).collect();
        assert_eq!(owed, [refused_mint["id"].as_str().unwrap()], "credited and not minted: owed back");

        // Validation names the field; another organization's memo is not found.
        for (body, mentions) in [
            (wire(&memo, "1.234"), "amount: \"1.234\" is not a positive amount"),
            (wire(&memo, "0"), "amount:"),
            (
                wire(&memo, "1").with("currency", "ISSUANCE_SUPPORTED_FIAT_CURRENCY_UNSPECIFIED"),
                "currency: ISSUANCE_SUPPORTED_FIAT_CURRENCY_UNSPECIFIED",
            ),
            (wire(&memo, "1").with("currency", "EUR"), "currency: \"EUR\""),
            (
                wire(&memo, "1").with("payment_rail", "ISSUANCE_SUPPORTED_FIAT_PAYMENT_METHOD_UNSPECIFIED"),
                "payment_rail:",
            ),
            (wire(&memo, "1").with("memo", "x"), "unknown field `memo`"),
            // A type error names its field, as every other refusal does.
            (
                json!({ "amount": 5, "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" }),
                "amount: invalid type: integer `5`, expected a string",
            ),
            (
                json!({ "amount": "1", "memo_id": true, "currency": "USD", "payment_rail": "WIRE" }),
                "memo_id: invalid type: boolean `true`",
            ),
        ] {
            refused(&app.post(SIMULATION, &acme, &body).await, 400, "INVALID_REQUEST", mentions);
        }
        let mut missing = wire(&memo, "1");
        missing.as_object_mut().unwrap().remove("currency");
        refused(&app.post(SIMULATION, &acme, &missing).await, 400, "INVALID_REQUEST", "currency");
        refused(&app.post(SIMULATION, &acme, &wire(&theirs, "1")).await, 404, "NOT_FOUND", &theirs);
        refused(
            &app.post(SIMULATION, &acme, &wire("CI0000000000", "1")).await,
            404,
            "NOT_FOUND",
            "CI0000000000",
        );
        refused(&app.get(&format!("/v2/issuance/mints/{id}"), &globex).await, 404, "NOT_FOUND", &id);
    }
}

/// A sandbox whose USDC has a daily mint cap of 300 dollars, and the memo of
/// an instruction of `ada-1`: the app, acme's key and the memo.
async fn capped(backend: Backend) -> (App, String, String) {
    let app = app_on(backend, chains_with("daily_mint_cap = \"300\"\n"), Environment::Sandbox, None).await;
    let acme = app.key("acme").await;
    identity(&app, "acme", "ada", true, true).await;
    account(&app, "acme", "ada", "ada-1", &[ADDRESS]).await;
    let memo = instruction(&app, &acme, "ada", "ada-1").await;
    (app, acme, memo)
}

#[tokio::test]
async fn above_the_daily_mint_cap_every_mint_waits_for_approval() {
    for backend in BACKENDS {
        let (app, acme, memo) = capped(backend).await;
        let mut statuses = Vec::new();
        for amount in ["250.00", "40.00", "20.00", "5.00"] {
            let id = simulate(&app, &acme, &memo, amount).await;
            statuses.push((amount, mint(&app, &acme, &id).await["status"].as_str().unwrap().to_string(), id));
        }
        let seen: Vec<(&str, &str)> = statuses.iter().map(|(a, s, _)| (*a, s.as_str())).collect();
        assert_eq!(
            seen,
            [
                ("250.00", "MINTING"),
                ("40.00", "MINTING"),
                ("20.00", "AWAITING_APPROVAL"),
                ("5.00", "AWAITING_APPROVAL")
            ],
            "310 and then 315 dollars pass the 300 of the day; what waits counts too"
        );
        let waiting = &statuses[2].2;
        let bo = custody_indexer::audit::Actor::local(Some("bo".into()));
        let approved =
            custody_indexer::issuance::wires::decide(app.store(), waiting, &bo, true, None).await.unwrap();
        assert_eq!(approved.status.as_str(), "MINTING");
        assert_eq!(mint(&app, &acme, waiting).await["status"], "MINTING");
    }
}

#[tokio::test]
async fn a_wire_counts_against_the_cap_of_the_day_the_bank_settles_it() {
    for backend in BACKENDS {
        let (app, acme, memo) = capped(backend).await;
        // A wire that arrived yesterday (before midnight) and that the
        // sandbox bank settles today (cents .13: 5 s later).
        let late = simulate(&app, &acme, &memo, "280.13").await;
        let mut conn = sqlx::AnyConnection::connect(&app.db.url).await.unwrap();
        sqlx::query("UPDATE mints SET created_at = created_at - 86400000000 WHERE id = $1")
            .bind(&late)
            .execute(&mut conn)
            .await
            .unwrap();
        reaches(&app, &acme, &late, "MINTING").await;
        let next = simulate(&app, &acme, &memo, "20.00").await;
        assert_eq!(
            mint(&app, &acme, &next).await["status"],
            "AWAITING_APPROVAL",
            "{backend:?}: the 280.13 settled today count today: 300.13 pass the 300 of the day"
        );
    }
}

#[tokio::test]
async fn production_has_no_simulation() {
    for environment in [Environment::Production, Environment::Sandbox] {
        let app = app(Backend::Sqlite, environment, None).await;
        let key = app.key("acme").await;
        let answer = app.post(SIMULATION, &key, &wire("CI0000000000", "1")).await;
        let document =
            send(alloy::transports::http::reqwest::Method::GET, &format!("{}/openapi.json", app.base), None)
                .await
                .body;
        let listed = document["paths"].get(SIMULATION).is_some();
        match environment {
            Environment::Production => {
                assert_eq!((answer.status, &answer.body["code"]), (404, &json!("NOT_FOUND")), "{answer:?}");
                assert!(!listed, "absent from production's /openapi.json");
            }
            Environment::Sandbox => {
                assert_eq!(answer.status, 404, "an unknown memo: {answer:?}");
                assert!(answer.body["message"].as_str().unwrap().contains("memo_id"), "{answer:?}");
                assert!(listed);
            }
        }
    }
}

#[tokio::test]
async fn operators_record_wires_once_a_second_operator_approves_and_failed_mints_owe_their_dollars() {
    let (env, memo) = common::issuance::instructed().await;
    let record = |reference: &str, amount: &str| {
        env.output(&[
            "issuance",
            "wires",
            "record",
            "--memo-id",
            &memo,
            "--amount",
            amount,
            "--reference",
            reference,
            "--by",
            "ann",
            "--reason",
            "arrived at the bank",
        ])
    };
    let last_line = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().last().unwrap().to_string()
    };
    let stderr = |out: std::process::Output| {
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };

    let first = record("FED-1", "250.00");
    assert!(String::from_utf8_lossy(&first.stdout).contains("mint AWAITING_APPROVAL"), "{first:?}");
    let id = last_line(&first);
    assert_eq!(last_line(&record("FED-1", "250.00")), id, "the same wire again: the same mint");
    assert!(stderr(record("FED-1", "25.00")).contains("was recorded for memo_id"));
    for same in ["ann", " Ann "] {
        let refused = stderr(env.output(&["issuance", "wires", "approve", "FED-1", "--by", same]));
        assert!(refused.contains("another operator"), "{same:?} is the recorder: {refused}");
    }
    assert!(env.ok(&["issuance", "wires", "approve", "FED-1", "--by", "bo"]).contains("MINTING"));
    assert!(
        stderr(env.output(&["issuance", "wires", "approve", "FED-1", "--by", "cy"]))
            .contains("is MINTING, not AWAITING_APPROVAL")
    );
    let listed = env.ok(&["issuance", "mints", "list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.len(), 1, "one wire, one mint: {listed:?}");
    assert_eq!((&listed[0]["id"], &listed[0]["amount"]), (&json!(id), &json!("250.00")));

    let second = last_line(&record("FED-2", "40.00"));
    assert!(env.ok(&["issuance", "wires", "refuse", "FED-2", "--by", "bo"]).contains("FAILED"));
    let owed = env.ok(&["issuance", "returns", "list"]);
    assert!(
        owed.contains(&second) && owed.contains("40.00 USD PENDING") && owed.contains("APPROVAL_REFUSED"),
        "{owed}"
    );
    let complete = |mint: &str, reference: &str| {
        let args = [
            "issuance",
            "returns",
            "complete",
            mint,
            "--reference",
            reference,
            "--by",
            "cy",
            "--reason",
            "sent",
        ];
        env.output(&args)
    };
    assert!(String::from_utf8_lossy(&complete(&second, "RET-1").stdout).contains("40.00 USD returned"));
    assert_eq!(env.ok(&["issuance", "returns", "list"]).trim(), "", "nothing owed any more");
    assert!(env.ok(&["issuance", "returns", "list", "--all"]).contains("COMPLETED RET-1"));
    assert!(complete(&second, "RET-1").status.success(), "the same return again");
    let again = stderr(complete(&second, "RET-2"));
    assert!(again.contains("returned already (reference RET-1)"), "{again}");
    assert!(stderr(complete(&id, "RET-3")).contains("not found"));
    // One return wire does not close a second mint's debt.
    let third = last_line(&record("FED-6", "15.00"));
    assert!(env.ok(&["issuance", "wires", "refuse", "FED-6", "--by", "bo"]).contains("FAILED"));
    assert!(
        stderr(complete(&third, "RET-1"))
            .contains(&format!("return wire RET-1 returned mint {second} already"))
    );
    // The same wire typed again in another case or spacing starts nothing new.
    assert_eq!(last_line(&record(" fed-6 ", "15.00")), third);
    // A mint named by its id is that mint, even when another wire's
    // reference is that id.
    let named = last_line(&record("FED-7", "5.00"));
    let shadow = last_line(&record(&named, "6.00"));
    assert!(env.ok(&["issuance", "wires", "refuse", &named, "--by", "bo"]).contains(&named));
    let status = |id: &str| {
        let shown = env.ok(&["issuance", "mints", "show", id, "--json"]);
        serde_json::from_str::<Value>(&shown).unwrap()["status"].clone()
    };
    assert_eq!((status(&named), status(&shadow)), (json!("FAILED"), json!("AWAITING_APPROVAL")));

    assert!(stderr(record("FED-3", "0")).contains("--amount"));
    // A memo as a bank passes it on (lower case, spaced) still names the instruction.
    let mangled = format!("{} {}", memo[..6].to_lowercase(), &memo[6..]);
    let args =
        ["issuance", "wires", "record", "--memo-id", &mangled, "--amount", "1", "--reference", "FED-5"];
    let out = env.output(&[&args[..], &["--by", "ann", "--reason", "x"]].concat());
    let shown = env.ok(&["issuance", "mints", "show", &last_line(&out), "--json"]);
    assert_eq!(serde_json::from_str::<Value>(&shown).unwrap()["memo_id"], json!(memo));
    let unknown = env.output(&[
        "issuance",
        "wires",
        "record",
        "--memo-id",
        "CI0000000000",
        "--amount",
        "1",
        "--reference",
        "FED-4",
        "--by",
        "ann",
        "--reason",
        "x",
    ]);
    assert!(stderr(unknown).contains("mint instruction with memo_id CI0000000000 not found"));
}

/// Request bodies changed one field at a time.
trait With {
    fn with(self, field: &str, value: &str) -> Value;
}

impl With for Value {
    fn with(mut self, field: &str, value: &str) -> Value {
        self[field] = json!(value);
        self
    }
}
