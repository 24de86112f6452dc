//! Issuance's bank accounts and mint instructions through real HTTP on
//! SQLite and PostgreSQL: validation naming each field, the identity's
//! gates (`ACCOUNT_NOT_ACTIVE` before `FIAT_NOT_ENABLED`), idempotent
//! replays and `409`s, tenancy, pages, the receiving bank per environment,
//! the extension marks of `/openapi.json`; and the operators' fiat
//! entitlement commands.

use crate::common;

use common::{
    chain_toml,
    cli::Env,
    db::{BACKENDS, Backend},
    issuance::{ADDRESS, CHAIN, account, app, identity, keys, refused, us_bank},
};
use custody_indexer::environment::Environment;
use serde_json::{Value, json};
use sqlx::{AnyPool, Row};

#[tokio::test]
async fn bank_accounts_are_checked_as_a_bank_would_made_once_per_request_and_scoped() {
    for backend in BACKENDS {
        let app = app(backend, Environment::Sandbox, None).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        identity(&app, "acme", "ada", true, true).await;
        identity(&app, "acme", "onboarding", false, true).await;
        identity(&app, "acme", "no-fiat", true, false).await;
        identity(&app, "acme", "neither", false, false).await;
        identity(&app, "globex", "gus", true, true).await;
        let path = "/v2/issuance/bank-accounts";
        let body = json!({ "request_id": "b-1", "identity_id": "ada", "bank_account_details": us_bank("000123456789") });

        let created = app.post(path, &acme, &body).await;
        assert_eq!(created.status, 201, "{created:?}");
        assert_eq!(keys(&created.body), ["bank_account_details", "id", "identity_id"]);
        assert_eq!(created.body["bank_account_details"], body["bank_account_details"]);
        let id = created.body["id"].as_str().unwrap().to_string();
        let again = app.post(path, &acme, &body).await;
        assert_eq!((again.status, &again.body), (201, &created.body), "a replay answers the same account");
        let mut other = body.clone();
        other["bank_account_details"]["account_number"] = json!("000999999999");
        refused(&app.post(path, &acme, &other).await, 409, "CONFLICT", &id);

        let read = app.get(&format!("/v2/issuance/bank-account/{id}"), &acme).await;
        assert_eq!((read.status, &read.body), (200, &created.body));
        refused(&app.get(&format!("/v2/issuance/bank-account/{id}"), &globex).await, 404, "NOT_FOUND", &id);

        // Every failure names its field.
        let mut bad = body.clone();
        bad["request_id"] = json!("b-bad");
        bad["bank_account_details"]["routing_number"] = json!("021000022");
        bad["bank_account_details"]["address"].as_object_mut().unwrap().remove("region_code");
        let answer = app.post(path, &acme, &bad).await;
        refused(
            &answer,
            400,
            "INVALID_REQUEST",
            "bank_account_details.routing_number: \"021000022\" fails the ABA",
        );
        refused(&answer, 400, "INVALID_REQUEST", "bank_account_details.address.region_code: required");
        let mut extra = body.clone();
        extra["iban"] = json!("x");
        refused(&app.post(path, &acme, &extra).await, 400, "INVALID_REQUEST", "iban");

        // The identity's gates: not ACTIVE first, then the entitlement.
        for (who, code) in [
            ("onboarding", "ACCOUNT_NOT_ACTIVE"),
            ("neither", "ACCOUNT_NOT_ACTIVE"),
            ("no-fiat", "FIAT_NOT_ENABLED"),
        ] {
            let body = json!({ "request_id": who, "identity_id": who, "bank_account_details": us_bank("000123456789") });
            refused(&app.post(path, &acme, &body).await, 400, code, who);
        }
        let foreign = json!({ "request_id": "f", "identity_id": "gus", "bank_account_details": us_bank("000123456789") });
        refused(&app.post(path, &acme, &foreign).await, 404, "NOT_FOUND", "identity gus");

        // Pages of two, by identity, scoped to the organization.
        for n in 2..=3 {
            let body = json!({ "request_id": format!("b-{n}"), "identity_id": "ada",
                               "bank_account_details": us_bank(&format!("00012345678{n}")) });
            assert_eq!(app.post(path, &acme, &body).await.status, 201);
        }
        let first = app.get("/v2/issuance/bank-accounts?identity_id=ada&limit=2", &acme).await;
        assert_eq!(first.body["bank_accounts"].as_array().unwrap().len(), 2, "{first:?}");
        let cursor = first.body["cursor"].as_str().unwrap();
        let second = app
            .get(&format!("/v2/issuance/bank-accounts?identity_id=ada&limit=2&cursor={cursor}"), &acme)
            .await;
        assert_eq!(second.body["bank_accounts"].as_array().unwrap().len(), 1, "{second:?}");
        assert!(second.body.get("cursor").is_none());
        let theirs = app.get("/v2/issuance/bank-accounts", &globex).await;
        assert_eq!(theirs.body, json!({ "bank_accounts": [] }));
        for limit in ["0", "101", "x"] {
            refused(
                &app.get(&format!("/v2/issuance/bank-accounts?limit={limit}"), &acme).await,
                400,
                "INVALID_REQUEST",
                "limit",
            );
        }

        // A replay is answered whatever the identity became since.
        common::set_fiat(app.store(), "acme", "ada", false, "review").await.unwrap();
        assert_eq!(app.post(path, &acme, &body).await.body, created.body);
        let new = json!({ "request_id": "b-4", "identity_id": "ada", "bank_account_details": us_bank("000123456784") });
        refused(&app.post(path, &acme, &new).await, 400, "FIAT_NOT_ENABLED", "ada");

        // Personal data: sealed at rest.
        let pool = AnyPool::connect(&app.db.url).await.unwrap();
        let stored: String = sqlx::query("SELECT details FROM bank_accounts WHERE id = $1")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap()
            .get(0);
        assert!(stored.starts_with("pii1.") && !stored.contains("000123456789"), "{stored}");
        pool.close().await;
    }
}

#[tokio::test]
async fn mint_instructions_name_the_receiving_bank_a_unique_memo_and_one_address() {
    for backend in BACKENDS {
        let app = app(backend, Environment::Sandbox, None).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);
        identity(&app, "acme", "ada", true, true).await;
        identity(&app, "acme", "bob", true, true).await;
        identity(&app, "acme", "no-fiat", true, false).await;
        identity(&app, "globex", "gus", true, true).await;
        account(&app, "acme", "ada", "ada-1", &[ADDRESS]).await;
        account(
            &app,
            "acme",
            "ada",
            "ada-2",
            &["0x00000000000000000000000000000000000000A2", "0x00000000000000000000000000000000000000A3"],
        )
        .await;
        account(&app, "acme", "bob", "bob-1", &["0x00000000000000000000000000000000000000B1"]).await;
        let path = "/v2/issuance/mint-instructions";
        let request = |request_id: &str, account: &str| {
            json!({ "request_id": request_id, "identity_id": "ada", "stablecoin_symbol": "USDC",
                    "chain": CHAIN.as_str(), "mint_destination_address_id": account })
        };

        let created = app.post(path, &acme, &request("m-1", "ada-1")).await;
        assert_eq!(created.status, 201, "{created:?}");
        let instruction = &created.body;
        assert_eq!(
            keys(instruction),
            [
                "bank_account_details",
                "chain",
                "fiat_currency_symbol",
                "id",
                "identity_id",
                "label",
                "memo_id",
                "mint_destination_address_id",
                "payment_rail",
                "request_id",
                "stablecoin_symbol"
            ]
        );
        assert_eq!(instruction["payment_rail"], "WIRE");
        assert_eq!(instruction["fiat_currency_symbol"], "USD");
        assert_eq!(instruction["label"], Value::Null);
        assert_eq!(instruction["bank_account_details"], custody_indexer::bank::sandbox::receiving_account());
        let memo = instruction["memo_id"].as_str().unwrap();
        assert!(memo.starts_with("CI") && memo.len() == 12, "{memo}");
        let again = app.post(path, &acme, &request("m-1", "ada-1")).await;
        assert_eq!((again.status, &again.body), (201, instruction));
        let mut labelled = request("m-1", "ada-1");
        labelled["label"] = json!("payroll");
        refused(&app.post(path, &acme, &labelled).await, 409, "CONFLICT", "m-1");
        let second = app.post(path, &acme, &labelled.clone().tap_request("m-2")).await;
        assert_eq!(second.status, 201, "{second:?}");
        assert_eq!(second.body["label"], "payroll");
        assert_ne!(second.body["memo_id"], instruction["memo_id"], "each instruction its own memo");

        for (body, mentions) in [
            (request("m-3", "ada-1").with("chain", json!("NOT_A_CHAIN")), "chain:"),
            (
                request("m-3", "ada-1").with("chain", json!("SOLANA_DEVNET")),
                "chain: SOLANA_DEVNET is not served",
            ),
            (
                request("m-3", "ada-1").with("stablecoin_symbol", json!("TUSD")),
                "stablecoin_symbol: TUSD is not a stablecoin issued on ETHEREUM_TESTNET (issued there: USDC)",
            ),
            (request("m-3", "ada-2"), "account ada-2 has 2 addresses on ETHEREUM_TESTNET"),
            (request("m-3", "bob-1"), "identity ada has no account bob-1"),
            (request("m-3", "nobody"), "identity ada has no account nobody"),
            (request("m-3", "ada-1").with("memo_id", json!("CI0")), "memo_id"),
        ] {
            refused(&app.post(path, &acme, &body).await, 400, "INVALID_REQUEST", mentions);
        }
        let no_fiat = request("m-4", "ada-1").with("identity_id", json!("no-fiat"));
        refused(&app.post(path, &acme, &no_fiat).await, 400, "FIAT_NOT_ENABLED", "no-fiat");
        refused(&app.post(path, &globex, &request("m-5", "ada-1")).await, 404, "NOT_FOUND", "identity ada");

        let page = app.get("/v2/issuance/mint-instructions?identity_id=ada&limit=1", &acme).await;
        assert_eq!(page.body["mint_instructions"].as_array().unwrap().len(), 1, "{page:?}");
        let cursor = page.body["cursor"].as_str().unwrap();
        let rest = app
            .get(&format!("/v2/issuance/mint-instructions?identity_id=ada&limit=1&cursor={cursor}"), &acme)
            .await;
        assert_eq!(rest.body["mint_instructions"].as_array().unwrap().len(), 1);
        assert!(rest.body.get("cursor").is_none(), "{rest:?}");
        let ids: Vec<&Value> = [&page, &rest].iter().map(|p| &p.body["mint_instructions"][0]["id"]).collect();
        assert!(ids.contains(&&instruction["id"]) && ids.contains(&&second.body["id"]));
        assert_eq!(app.get(path, &globex).await.body, json!({ "mint_instructions": [] }));
    }
}

#[tokio::test]
async fn production_shows_the_configured_receiving_bank_and_without_one_takes_no_wires() {
    let mut bank = us_bank("000555555555");
    bank["bank_name"] = json!("Operator's Bank");
    for (configured, expected) in [(None, None), (Some(bank.clone()), Some(bank))] {
        let app = app(Backend::Sqlite, Environment::Production, configured).await;
        let acme = app.key("acme").await;
        identity(&app, "acme", "ada", true, true).await;
        account(&app, "acme", "ada", "ada-1", &[ADDRESS]).await;
        let body = json!({ "request_id": "m-1", "identity_id": "ada", "stablecoin_symbol": "USDC",
                           "chain": CHAIN.as_str(), "mint_destination_address_id": "ada-1" });
        let answer = app.post("/v2/issuance/mint-instructions", &acme, &body).await;
        match expected {
            None => refused(&answer, 503, "ISSUANCE_UNAVAILABLE", "receiving bank"),
            Some(bank) => {
                assert_eq!(answer.status, 201, "{answer:?}");
                assert_eq!(answer.body["bank_account_details"], bank);
            }
        }
    }
}

#[tokio::test]
async fn the_openapi_document_marks_the_extensions() {
    let app = app(Backend::Sqlite, Environment::Sandbox, None).await;
    let document = common::api::send(
        alloy::transports::http::reqwest::Method::GET,
        &format!("{}/openapi.json", app.base),
        None,
    )
    .await
    .body;
    let operation = |path: &str, method: &str| document["paths"][path][method].clone();
    for (path, method) in [
        ("/v2/issuance/bank-accounts", "post"),
        ("/v2/issuance/bank-accounts", "get"),
        ("/v2/issuance/mint-instructions", "post"),
    ] {
        assert_eq!(operation(path, method)["x-extension"], true, "{method} {path}");
    }
    for (path, method) in
        [("/v2/issuance/bank-account/{id}", "get"), ("/v2/issuance/mint-instructions", "get")]
    {
        let found = operation(path, method);
        assert!(
            found.is_object() && found.get("x-extension").is_none(),
            "{method} {path}: the reference's own"
        );
    }
}

#[test]
fn operators_grant_and_withdraw_the_fiat_entitlement_in_the_audit_trail() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".to_string()], None, ""));
    env.identity("default", "ada");
    let enable = ["identities", "fiat", "enable", "ada", "--by", "ann", "--reason", "wire checks done"];
    assert_eq!(env.ok(&enable).trim(), "identity ada: fiat operations enabled");
    assert!(env.ok(&enable).contains("already enabled; nothing recorded"));
    let shown: Value = serde_json::from_str(&env.ok(&["identities", "show", "ada", "--json"])).unwrap();
    assert_eq!(shown["identity"]["fiat_operations_enabled"], true, "{shown}");
    let disable = ["identities", "fiat", "disable", "ada", "--by", "bo", "--reason", "bank's request"];
    assert_eq!(env.ok(&disable).trim(), "identity ada: fiat operations disabled");
    let shown: Value = serde_json::from_str(&env.ok(&["identities", "show", "ada", "--json"])).unwrap();
    assert_eq!(shown["identity"]["fiat_operations_enabled"], false);
    let actions = shown["actions"].as_array().unwrap();
    let fiat: Vec<(&str, &str, &str)> = actions
        .iter()
        .filter(|a| a["event"].as_str().unwrap().starts_with("FIAT_"))
        .map(|a| (a["event"].as_str().unwrap(), a["actor"].as_str().unwrap(), a["reason"].as_str().unwrap()))
        .collect();
    // On the store directly, the operating-system user with the --by given.
    let local = |by: &str| format!("local:{} ({by})", std::env::var("USER").unwrap_or("unknown".into()));
    assert_eq!(
        fiat,
        [
            ("FIAT_ENABLED", local("ann").as_str(), "wire checks done"),
            ("FIAT_DISABLED", local("bo").as_str(), "bank's request")
        ]
    );
    let unknown = env.output(&["identities", "fiat", "enable", "nobody", "--by", "ann", "--reason", "x"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("identity nobody not found"));
}

/// Request bodies changed one field at a time.
trait With {
    fn with(self, field: &str, value: Value) -> Value;
    fn tap_request(self, request_id: &str) -> Value;
}

impl With for Value {
    fn with(mut self, field: &str, value: Value) -> Value {
        self[field] = value;
        self
    }

    fn tap_request(self, request_id: &str) -> Value {
        self.with("request_id", json!(request_id))
    }
}

#[test]
fn a_daily_mint_cap_is_dollars_on_an_issued_asset() {
    let file = |lines: &str| {
        let toml = chain_toml(&["http://127.0.0.1:1".to_string()], None, "")
            + &format!(
                "\n[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{}\"\ndecimals = 6\n{lines}",
                common::issuance::USDC
            );
        custody_indexer::config::ChainConfig::from_toml(&toml, std::path::Path::new("c.toml"), &|_| None)
            .map_err(|e| e.to_string())
    };
    assert!(file("issued = true\ndaily_mint_cap = \"1000000\"\n").is_ok());
    let unissued = file("daily_mint_cap = \"1000000\"\n").unwrap_err();
    assert!(unissued.contains("daily_mint_cap needs issued = true"), "{unissued}");
    let bad = file("issued = true\ndaily_mint_cap = \"1e6\"\n").unwrap_err();
    assert!(bad.contains("daily_mint_cap: \"1e6\" is not a positive amount"), "{bad}");
}
