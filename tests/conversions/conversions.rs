//! Virtual accounts and on-ramp conversions through real HTTP on SQLite
//! and PostgreSQL: validation naming each field, the identity's gates,
//! idempotent replays and `409`s, tenancy `404`s, pages and the status
//! filter, the sandbox bank's answers, `INACTIVE` while the identity is
//! suspended; a simulated wire's conversion read and its
//! `conversion_notification_update` events; the sandbox-only simulation.

use crate::common;

use std::time::Duration;

use common::{
    db::BACKENDS,
    eventually,
    issuance::{ADDRESS, CHAIN, account, app, identity, keys, refused},
};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::identity::change::Change;
use custody_indexer::{
    chain::Chain, environment::Environment, identity::Event, store::Settlement, transfers::TransferStatus,
};
use serde_json::{Value, json};

const PATH: &str = "/v2/identities/ada/virtual-accounts";

fn request(id: &str, account: &str, country: &str) -> Value {
    json!({ "request_id": id, "destination": { "account_id": account, "currency": "USDC", "chain": CHAIN.as_str() },
            "source": { "banking_country": country } })
}

/// Waits until the virtual account `id` of `ada` shows `status`.
async fn shows(app: &common::api::App, key: &str, id: &str, status: &str) -> Value {
    eventually(Duration::from_secs(15), &format!("virtual account {id} {status}"), || async {
        let page = app.get(&format!("{PATH}?limit=100"), key).await.body;
        page["virtual_accounts"].as_array()?.iter().find(|v| v["id"] == id && v["status"] == status).cloned()
    })
    .await
}

fn unsent(_: Chain) -> Settlement {
    Settlement {
        status: TransferStatus::Failed,
        transaction_hash: None,
        failure: None,
        fees: Vec::new(),
        native_symbol: "ETH".into(),
        native_decimals: 18,
        usd_micros_per_coin: 0,
    }
}

async fn change(app: &common::api::App, identity: &str, event: Event) {
    let change = Change {
        organization: "acme",
        identity_id: identity,
        event,
        actor: "operator:alice",
        reason: Some("review"),
        decider: None,
    };
    lifecycle::change(app.store(), &change, &unsent).await.unwrap();
}

#[tokio::test]
async fn virtual_accounts_are_opened_by_the_bank_once_per_request_and_scoped() {
    for backend in BACKENDS {
        let app = app(backend, Environment::Sandbox, None).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        identity(&app, "acme", "ada", true, true).await;
        identity(&app, "acme", "bob", true, true).await;
        identity(&app, "acme", "no-fiat", true, false).await;
        identity(&app, "acme", "onboarding", false, true).await;
        account(&app, "acme", "ada", "ada-1", &[ADDRESS]).await;
        account(&app, "acme", "bob", "bob-1", &["0x00000000000000000000000000000000000000B1"]).await;

        let created = app.post(PATH, &acme, &request("va-1", "ada-1", "US")).await;
        assert_eq!(created.status, 201, "{created:?}");
        assert_eq!(
            keys(&created.body),
            [
                "created_at",
                "deposit_instructions",
                "destination",
                "failure_reason",
                "id",
                "identity_id",
                "source",
                "status",
                "updated_at"
            ]
        );
        assert_eq!(created.body["status"], "VIRTUAL_ACCOUNT_STATUS_PENDING");
        assert_eq!(created.body["deposit_instructions"], Value::Null, "nothing to wire to yet");
        assert_eq!(
            created.body["destination"],
            json!({ "account_id": "ada-1", "currency": "USDC", "chain": CHAIN.as_str() })
        );
        let id = created.body["id"].as_str().unwrap().to_string();
        let again = app.post(PATH, &acme, &request("va-1", "ada-1", "US")).await;
        assert_eq!(
            (again.status, &again.body["id"]),
            (201, &created.body["id"]),
            "a replay answers the same"
        );
        refused(&app.post(PATH, &acme, &request("va-1", "ada-1", "CA")).await, 409, "CONFLICT", &id);

        // The sandbox bank opens it with numbers of its own.
        let opened = shows(&app, &acme, &id, "VIRTUAL_ACCOUNT_STATUS_ACTIVE").await;
        let instructions = &opened["deposit_instructions"];
        assert_eq!(
            keys(instructions),
            [
                "amount",
                "bank_account_number",
                "bank_address",
                "bank_beneficiary_address",
                "bank_beneficiary_name",
                "bank_name",
                "bank_routing_number",
                "currency",
                "deposit_message",
                "payment_method"
            ]
        );
        assert_eq!(instructions["bank_routing_number"], "123456780");
        assert_eq!(
            (&instructions["currency"], &instructions["payment_method"]),
            (&json!("USDC"), &json!("BLOCKCHAIN"))
        );
        let second = app.post(PATH, &acme, &request("va-2", "ada-1", "US")).await.body;
        let second =
            shows(&app, &acme, second["id"].as_str().unwrap(), "VIRTUAL_ACCOUNT_STATUS_ACTIVE").await;
        let numbers = |v: &Value| {
            let d = &v["deposit_instructions"];
            (d["bank_account_number"].clone(), d["deposit_message"].clone())
        };
        let (a, b) = (numbers(&opened), numbers(&second));
        assert!(a.0 != b.0 && a.1 != b.1, "each has its own number and message: {a:?} {b:?}");

        // Another banking country: the bank refuses it, saying why.
        let refused_va = app.post(PATH, &acme, &request("va-mx", "ada-1", "MX")).await.body;
        let failed =
            shows(&app, &acme, refused_va["id"].as_str().unwrap(), "VIRTUAL_ACCOUNT_STATUS_FAILED").await;
        assert!(failed["failure_reason"].as_str().unwrap().contains("MX"), "{failed}");
        assert_eq!(failed["deposit_instructions"], Value::Null);

        // Every failure names its field.
        for (body, mentions) in [
            (request("v", "ada-1", "usa"), "source.banking_country"),
            (request("v", "bob-1", "US"), "destination.account_id: identity ada has no account bob-1"),
            (request("v", "nobody", "US"), "destination.account_id"),
            (
                json!({ "request_id": "v", "destination": { "account_id": "ada-1", "currency": "TUSD", "chain": CHAIN.as_str() },
                     "source": { "banking_country": "US" } }),
                "destination.currency: TUSD is not a stablecoin issued",
            ),
            (
                json!({ "request_id": "v", "destination": { "account_id": "ada-1", "currency": "USDC", "chain": "MOON" },
                     "source": { "banking_country": "US" } }),
                "destination.chain",
            ),
            (
                json!({ "request_id": "", "destination": { "account_id": "ada-1", "currency": "USDC", "chain": CHAIN.as_str() },
                     "source": { "banking_country": "US" } }),
                "request_id",
            ),
            (
                json!({ "request_id": "v", "destination": { "account_id": "ada-1", "currency": "USDC", "chain": CHAIN.as_str() },
                     "source": { "banking_country": "US" }, "fee": "1" }),
                "fee",
            ),
        ] {
            refused(&app.post(PATH, &acme, &body).await, 400, "INVALID_REQUEST", mentions);
        }
        // The identity's gates; another organization's identity is not found.
        for (who, code) in [("onboarding", "ACCOUNT_NOT_ACTIVE"), ("no-fiat", "FIAT_NOT_ENABLED")] {
            let path = format!("/v2/identities/{who}/virtual-accounts");
            refused(&app.post(&path, &acme, &request(who, "ada-1", "US")).await, 400, code, who);
        }
        refused(
            &app.post(PATH, &globex, &request("g", "ada-1", "US")).await,
            404,
            "NOT_FOUND",
            "identity ada",
        );
        refused(&app.get(PATH, &globex).await, 404, "NOT_FOUND", "identity ada");

        // Pages, and the status filter.
        let first = app.get(&format!("{PATH}?limit=2"), &acme).await.body;
        assert_eq!(first["virtual_accounts"].as_array().unwrap().len(), 2, "{first}");
        let cursor = first["cursor"].as_str().unwrap();
        let rest = app.get(&format!("{PATH}?limit=2&cursor={cursor}"), &acme).await.body;
        assert_eq!(rest["virtual_accounts"].as_array().unwrap().len(), 1, "{rest}");
        assert!(rest.get("cursor").is_none());
        let failed_only = app.get(&format!("{PATH}?status=VIRTUAL_ACCOUNT_STATUS_FAILED"), &acme).await.body;
        assert_eq!(failed_only["virtual_accounts"].as_array().unwrap().len(), 1, "{failed_only}");
        let all = app.get(&format!("{PATH}?status=VIRTUAL_ACCOUNT_STATUS_UNSPECIFIED"), &acme).await.body;
        assert_eq!(all["virtual_accounts"].as_array().unwrap().len(), 3, "{all}");
        for query in ["limit=0", "limit=101", "status=ACTIVE", "colour=red"] {
            assert_eq!(app.get(&format!("{PATH}?{query}"), &acme).await.status, 400, "{query}");
        }

        // INACTIVE while the identity is suspended, ACTIVE again once reinstated.
        change(&app, "ada", Event::Suspended).await;
        let inactive = app.get(&format!("{PATH}?status=VIRTUAL_ACCOUNT_STATUS_INACTIVE"), &acme).await.body;
        assert_eq!(inactive["virtual_accounts"].as_array().unwrap().len(), 2, "{inactive}");
        assert!(inactive["virtual_accounts"][0]["deposit_instructions"].is_object());
        change(&app, "ada", Event::Reinstated).await;
        shows(&app, &acme, &id, "VIRTUAL_ACCOUNT_STATUS_ACTIVE").await;
    }
}

/// The conversion read's fields, every one always present.
const CONVERSION_FIELDS: [&str; 16] = [
    "account_id",
    "completed_at",
    "created_at",
    "destination",
    "exchange_rate",
    "failure_reason",
    "id",
    "identity_id",
    "payment_instructions_id",
    "quote_id",
    "refund_details",
    "request_id",
    "source",
    "status",
    "type",
    "updated_at",
];

/// The organization's `conversion_notification_update` events of `id`.
async fn updates(app: &common::api::App, key: &str, id: &str) -> Vec<Value> {
    let page = app.get("/v2/events?limit=100", key).await.body;
    common::api::events_about(&page, "conversion_notification_update", id)
}

#[tokio::test]
async fn a_wire_to_a_virtual_account_starts_an_on_ramp_announced_at_each_status() {
    for backend in BACKENDS {
        let app = app(backend, Environment::Sandbox, None).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        identity(&app, "acme", "ada", true, true).await;
        account(&app, "acme", "ada", "ada-1", &[ADDRESS]).await;
        let created = app.post(PATH, &acme, &request("va-1", "ada-1", "US")).await.body;
        let va = created["id"].as_str().unwrap().to_string();
        let wire = |amount: &str| json!({ "virtual_account_id": va, "amount": amount, "currency": "USD" });
        let simulate = "/v2/simulation/virtual-account-deposit";
        refused(&app.post(simulate, &acme, &wire("250.00")).await, 409, "CONFLICT", "PENDING");
        shows(&app, &acme, &va, "VIRTUAL_ACCOUNT_STATUS_ACTIVE").await;

        let answer = app.post(simulate, &acme, &wire("250.00")).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(keys(&answer.body), ["conversion_id"]);
        let id = answer.body["conversion_id"].as_str().unwrap().to_string();
        let path = format!("/v2/conversions/{id}");
        // The bank settles at once; no chain answers here, so the mint
        // waits to be sent and the conversion stays PROCESSING.
        let read = eventually(Duration::from_secs(15), "PROCESSING", || async {
            let read = app.get(&path, &acme).await.body;
            (read["status"] == "PROCESSING").then_some(read)
        })
        .await;
        assert_eq!(keys(&read), CONVERSION_FIELDS);
        assert_eq!(
            (&read["type"], &read["account_id"], &read["identity_id"]),
            (&json!("ON_RAMP"), &json!("ada-1"), &json!("ada"))
        );
        assert_eq!(read["payment_instructions_id"], va.as_str());
        assert_eq!(read["source"], json!({ "currency": "USD", "amount": "250.00", "chain": null }));
        assert_eq!(
            read["destination"],
            json!({ "currency": "USDC", "amount": null }),
            "null until settlement"
        );
        for empty in
            ["request_id", "quote_id", "exchange_rate", "completed_at", "failure_reason", "refund_details"]
        {
            assert_eq!(read[empty], Value::Null, "{empty}");
        }

        // One event per status, in order, ids stable per (conversion, status),
        // the last one's data exactly what the read answers.
        let events = updates(&app, &acme, &id).await;
        let seen: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e["id"].as_str().unwrap(), e["data"]["status"].as_str().unwrap()))
            .collect();
        let (initiated, processing) = (format!("{id}-initiated"), format!("{id}-processing"));
        assert_eq!(seen, [(initiated.as_str(), "INITIATED"), (processing.as_str(), "PROCESSING")]);
        assert_eq!(events[1]["data"], read);

        // Tenancy, no list, validation.
        refused(&app.get(&path, &globex).await, 404, "NOT_FOUND", &id);
        refused(&app.post(simulate, &globex, &wire("1.00")).await, 404, "NOT_FOUND", &va);
        let list = app.get("/v2/conversions", &acme).await;
        assert_eq!((list.status, &list.body["code"]), (405, &json!("METHOD_NOT_ALLOWED")), "{list:?}");
        refused(&app.post(simulate, &acme, &wire("1.234")).await, 400, "INVALID_REQUEST", "amount");
        let euros = json!({ "virtual_account_id": va, "amount": "1.00", "currency": "EUR" });
        refused(&app.post(simulate, &acme, &euros).await, 400, "INVALID_REQUEST", "currency");
        let unknown = json!({ "virtual_account_id": "nope", "amount": "1.00", "currency": "USD" });
        refused(&app.post(simulate, &acme, &unknown).await, 404, "NOT_FOUND", "virtual account nope");

        // A wire to a suspended identity's virtual account: the bank has the
        // dollars, the conversion fails with the reason, nothing is minted.
        change(&app, "ada", Event::Suspended).await;
        let answer = app.post(simulate, &acme, &wire("10.00")).await;
        let failed_id = answer.body["conversion_id"].as_str().unwrap().to_string();
        let failed = eventually(Duration::from_secs(15), "FAILED", || async {
            let read = app.get(&format!("/v2/conversions/{failed_id}"), &acme).await.body;
            (read["status"] == "FAILED").then_some(read)
        })
        .await;
        assert!(failed["failure_reason"].as_str().unwrap().starts_with("ACCOUNT_NOT_ACTIVE"), "{failed}");
        assert_eq!((&failed["completed_at"], &failed["destination"]["amount"]), (&Value::Null, &Value::Null));
        let statuses: Vec<Value> =
            updates(&app, &acme, &failed_id).await.iter().map(|e| e["data"]["status"].clone()).collect();
        assert_eq!(statuses, ["INITIATED", "FAILED"]);
    }
}

#[tokio::test]
async fn production_serves_no_virtual_account_simulation() {
    let app = app(
        common::db::Backend::Sqlite,
        Environment::Production,
        Some(common::issuance::us_bank("000123456789")),
    )
    .await;
    let acme = app.key("acme").await;
    let wire = json!({ "virtual_account_id": "x", "amount": "1.00", "currency": "USD" });
    assert_eq!(app.post("/v2/simulation/virtual-account-deposit", &acme, &wire).await.status, 404);
    let document = app.get("/openapi.json", &acme).await.body;
    assert!(document["paths"].get("/v2/simulation/virtual-account-deposit").is_none());
    assert!(document["paths"]["/v2/conversions/{conversion_id}"]["get"].is_object());
    assert_eq!(
        document["paths"]["/v2/identities/{identity_id}/virtual-accounts"]["post"]["x-extension"],
        json!(true)
    );
}

/// A bank account of `ada` over `rail` (`us`, `mx` or `swift`): its id.
async fn bank_account(app: &common::api::App, key: &str, rail: &str) -> String {
    let mut details = common::issuance::us_bank("000123456789");
    let map = details.as_object_mut().unwrap();
    match rail {
        "mx" => {
            map.remove("routing_number");
            map.remove("account_number");
            map.insert("clabe".into(), json!("032180000118359719"));
        }
        "swift" => {
            map.remove("routing_number");
            map.insert("swift_or_bic_number".into(), json!("DEUTDEFF"));
        }
        _ => {}
    }
    let body = json!({ "request_id": rail, "identity_id": "ada", "bank_account_details": details });
    let created = app.post("/v2/issuance/bank-accounts", key, &body).await;
    assert_eq!(created.status, 201, "{created:?}");
    created.body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn quotes_price_a_bank_accounts_corridor_less_spread_and_fee_and_are_persisted() {
    use custody_indexer::conversions::{Settings, quote::Table};
    for backend in BACKENDS {
        let settings = Settings {
            off_ramp_fee_bps: 100,
            spread_bps: 50,
            rates: Some(Table::parse("MXN=17.25,EUR=0.92").unwrap()),
            quote_ttl: Duration::from_secs(5),
            ..Settings::default()
        };
        let app = common::api::spawn_configured(backend, common::issuance::chains(), |state| {
            state.with_compliance(Environment::Sandbox, Default::default()).with_conversions(settings)
        })
        .await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        identity(&app, "acme", "ada", true, true).await;
        let (us, mx, swift) = (
            bank_account(&app, &acme, "us").await,
            bank_account(&app, &acme, "mx").await,
            bank_account(&app, &acme, "swift").await,
        );
        let quote = |bank: &str, currency: &str, amount: &str| {
            format!(
                "/v2/conversions/quotes?source_currency=USDC&source_amount={amount}&destination_currency={currency}&payment_instructions_id={bank}"
            )
        };

        // 100 USDC to a CLABE: 1.00 kept, 99.00 at 17.25 less 0.5% = 17.16375.
        let created = app.get(&quote(&mx, "MXN", "100.00"), &acme).await;
        assert_eq!(created.status, 201, "{created:?}");
        assert_eq!(
            keys(&created.body),
            [
                "created_at",
                "destination",
                "exchange_rate",
                "expires_at",
                "fee",
                "id",
                "payment_instructions_id",
                "source"
            ]
        );
        let body = &created.body;
        assert_eq!(body["source"], json!({ "currency": "USDC", "amount": "100.00" }));
        assert_eq!(body["destination"], json!({ "currency": "MXN", "amount": "1699.21" }));
        assert_eq!(
            (&body["exchange_rate"], &body["fee"]),
            (&json!("17.16375"), &json!({ "currency": "USDC", "amount": "1.00" }))
        );
        assert_eq!(body["payment_instructions_id"], mx.as_str());
        let created_at = chrono::DateTime::parse_from_rfc3339(body["created_at"].as_str().unwrap()).unwrap();
        let expires_at = chrono::DateTime::parse_from_rfc3339(body["expires_at"].as_str().unwrap()).unwrap();
        assert_eq!(expires_at - created_at, chrono::Duration::seconds(5), "the configured lifetime");
        let stored = app.store().quote("acme", body["id"].as_str().unwrap()).await.unwrap();
        assert_eq!(serde_json::to_value(&stored).unwrap(), *body, "persisted as answered");

        // SWIFT takes any priced currency; a CLABE only pesos; a US account none.
        assert_eq!(app.get(&quote(&swift, "EUR", "10.00"), &acme).await.status, 201);
        for (path, mentions) in [
            (quote(&mx, "EUR", "10.00"), "destination_currency: bank account"),
            (quote(&swift, "JPY", "10.00"), "destination_currency"),
            (quote(&us, "MXN", "10.00"), "a US account, paid by a US wire that takes no quote"),
            (quote(&mx, "MXN", "1.234"), "source_amount"),
            (quote(&mx, "MXN", "0.01"), "source_amount: the amount is too small"),
            (quote(&mx, "MXN", "10.00").replace("USDC", "DAI"), "source_currency: DAI"),
            (quote(&mx, "MXN", "10.00").replace("&destination_currency=MXN", ""), "destination_currency"),
            (quote(&mx, "MXN", "10.00") + "&fee=1", "fee"),
        ] {
            refused(&app.get(&path, &acme).await, 400, "INVALID_REQUEST", mentions);
        }
        refused(&app.get(&quote(&mx, "MXN", "10.00"), &globex).await, 404, "NOT_FOUND", &mx);
        // An identity that may no longer convert gets no quote.
        common::set_fiat(app.store(), "acme", "ada", false, "review").await.unwrap();
        refused(&app.get(&quote(&mx, "MXN", "10.00"), &acme).await, 400, "FIAT_NOT_ENABLED", "ada");
    }
}

#[tokio::test]
async fn production_quotes_nothing_without_rates_and_the_sandbox_prices_its_fixed_table() {
    let production = app(
        common::db::Backend::Sqlite,
        Environment::Production,
        Some(common::issuance::us_bank("000123456789")),
    )
    .await;
    let acme = production.key("acme").await;
    identity(&production, "acme", "ada", true, true).await;
    let mx = bank_account(&production, &acme, "mx").await;
    let path = format!(
        "/v2/conversions/quotes?source_currency=USDC&source_amount=10.00&destination_currency=MXN&payment_instructions_id={mx}"
    );
    refused(&production.get(&path, &acme).await, 503, "CONVERSIONS_UNAVAILABLE", "--conversion-rates");

    let sandbox = app(common::db::Backend::Sqlite, Environment::Sandbox, None).await;
    let acme = sandbox.key("acme").await;
    identity(&sandbox, "acme", "ada", true, true).await;
    let mx = bank_account(&sandbox, &acme, "mx").await;
    let path = path.replace(&path[path.rfind('=').unwrap() + 1..], &mx);
    let quoted = sandbox.get(&path, &acme).await;
    assert_eq!((quoted.status, &quoted.body["exchange_rate"]), (201, &json!("17.25")), "{quoted:?}");
    assert_eq!(quoted.body["destination"]["amount"], "172.50");
}
