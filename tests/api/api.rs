//! The HTTP API through real HTTP on a random port, on SQLite and PostgreSQL:
//! authentication, tenancy, every endpoint's answers and errors, pagination
//! while deposits arrive, the exact Deposit field set, rate limits and the
//! OpenAPI document.

use crate::common;

use std::{collections::BTreeSet, num::NonZeroU32};

use alloy::{primitives::U256, transports::http::reqwest::Method};
use common::{
    api::{App, spawn_app},
    db::{BACKENDS, Backend},
};
use custody_indexer::deposits::commit;
use custody_indexer::keys::accounts;
use custody_indexer::transfers::hold;
use custody_indexer::transfers::limit_policies::create_limit_policy;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    api::RateLimit,
    chain::Chain,
    config::Chains,
    deposits::resource::{Detected, Position},
    store::{Created, CursorMove, MAX_API_KEYS, NewAccount, NewTransfer, ScanCommit, StoreError},
    transfers::Route,
};
use serde_json::{Value, json};

const EVM: Chain = Chain::BaseSepolia;
const BOB: &str = "0x2222222222222222222222222222222222222222";

fn evm_address(n: u64) -> String {
    format!("0x{n:040x}")
}

async fn app(backend: Backend) -> App {
    spawn_app(backend, Chains::load(None).unwrap(), RateLimit::default()).await
}

async fn add_account(app: &App, organization: &str, id: &str, identity: &str, address: &str) {
    common::identity(app.store(), organization, identity).await;
    accounts::add_account(
        app.store(),
        NewAccount {
            watch_from: Default::default(),
            id: id.into(),
            organization: organization.into(),
            identity_id: identity.into(),
            kind: AccountType::Segregated,
            request_id: None,
            addresses: vec![AccountAddress {
                chains: vec![EVM, Chain::EthereumTestnet],
                address: address.into(),
            }],
        },
    )
    .await
    .unwrap();
}

/// A deposit of `raw` USDC base units to `account` in block `block`, created
/// at `1_700_000_000 + time` seconds.
fn deposit(account: &str, address: &str, tx: u64, block: u64, time: u64, raw: u64) -> Detected {
    Detected {
        chain: EVM,
        tx_hash: format!("0x{tx:064x}"),
        position: Position::Native,
        block_number: block,
        block_hash: format!("0x{block:064x}"),
        block_time_ms: (1_700_000_000 + time) * 1000,
        account_id: account.into(),
        account_address: address.into(),
        source_address: BOB.into(),
        source_account_id: None,
        currency_symbol: "USDC".into(),
        amount: Amount::from_raw(U256::from(raw), 6),
    }
}

async fn record(app: &App, deposits: Vec<Detected>) {
    let to = deposits.iter().map(|d| d.block_number).max().unwrap_or_default();
    commit::commit_scan(
        app.store(),
        &ScanCommit {
            chain: EVM,
            from: 0,
            to,
            head: to,
            blocks: Vec::new(),
            deposits,
            confirmed_through: None,
            cursor: CursorMove::Backfill,
            keep_blocks: 10,
        },
    )
    .await
    .unwrap();
}

fn ids(body: &Value, list: &str) -> Vec<String> {
    body[list].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()
}

fn assert_error(answer: &common::api::Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{:?}", answer.body);
    let keys: BTreeSet<&str> = answer.body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["code", "message"]), "{:?}", answer.body);
    assert_eq!(answer.body["code"], code, "{:?}", answer.body);
    assert!(!answer.body["message"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn requests_without_a_valid_key_are_refused() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let key = app.key("acme").await;
        let ok = app.get("/v2/assets", &key).await;
        assert_eq!(ok.status, 200, "{backend:?}");

        assert_error(&app.request(Method::GET, "/v2/assets", None).await, 401, "UNAUTHORIZED");
        let (id, _) = key.trim_start_matches("cik_").split_once('_').unwrap();
        let forged = format!("cik_{id}_{}", "A".repeat(43));
        let unknown = custody_indexer::api_key::generate().token;
        for bad in ["", "garbage", &key[..key.len() - 1], &forged, &unknown] {
            assert_error(&app.get("/v2/assets", bad).await, 401, "UNAUTHORIZED");
        }

        custody_indexer::api_key::manage::revoke(app.store(), id, &custody_indexer::audit::Actor::System)
            .await
            .unwrap();
        assert_error(&app.get("/v2/assets", &key).await, 401, "UNAUTHORIZED");

        // 50 active keys at most; revoking one frees a place.
        for _ in 1..MAX_API_KEYS {
            app.key("acme").await;
        }
        let fiftieth = app.key("acme").await;
        let refused = custody_indexer::api_key::manage::create_with(
            app.store(),
            "acme",
            "one too many",
            ("x", "y"),
            &custody_indexer::audit::Actor::System,
        )
        .await;
        assert!(
            matches!(&refused, Err(StoreError::LimitReached(m)) if m.contains("50 active API keys, its limit of 50")),
            "{refused:?}"
        );
        assert_eq!(app.get("/v2/assets", &fiftieth).await.status, 200);
    }
}

#[tokio::test]
async fn another_organizations_data_is_not_found_on_every_endpoint() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let acme = app.key("acme").await;
        let globex = app.key("globex").await;
        add_account(&app, "acme", "acme-1", "identity-a", &evm_address(1)).await;
        add_account(&app, "globex", "globex-1", "identity-g", &evm_address(2)).await;
        record(&app, vec![deposit("acme-1", &evm_address(1), 1, 10, 10, 5_000_000)]).await;
        let acme_deposit =
            ids(&app.get("/v2/crypto/deposits?account_id=acme-1", &acme).await.body, "deposits");
        assert_eq!(acme_deposit.len(), 1, "{backend:?}");

        assert_eq!(ids(&app.get("/v2/accounts", &globex).await.body, "accounts"), ["globex-1"]);
        assert_eq!(ids(&app.get("/v2/accounts", &acme).await.body, "accounts"), ["acme-1"]);
        let foreign = [
            "/v2/accounts/acme-1".to_string(),
            "/v2/accounts/acme-1/balances".to_string(),
            format!("/v2/crypto/deposits/{}", acme_deposit[0]),
        ];
        for path in &foreign {
            assert_error(&app.get(path, &globex).await, 404, "NOT_FOUND");
        }
        // Another organization's account lists no deposits, exactly as an
        // unknown one does: nothing tells whether it exists elsewhere.
        for account in ["acme-1", "no-such-account"] {
            let listed = app.get(&format!("/v2/crypto/deposits?account_id={account}"), &globex).await;
            assert_eq!(listed.status, 200, "{backend:?} {account}: {:?}", listed.body);
            assert_eq!(listed.body, json!({ "deposits": [] }), "{backend:?} {account}");
        }
        assert_eq!(app.get(&format!("/v2/crypto/deposits/{}", acme_deposit[0]), &acme).await.status, 200);
        assert_eq!(app.get("/v2/accounts/acme-1", &acme).await.status, 200);
        let identities = app.get("/v2/accounts?identity_ids=identity-a,identity-g", &globex).await;
        assert_eq!(ids(&identities.body, "accounts"), ["globex-1"]);

        // Webhooks and events.
        let hook = app.post("/v2/webhooks", &acme, &json!({ "url": "https://93.184.215.14/hook" })).await;
        assert_eq!(hook.status, 201, "{:?}", hook.body);
        let hook = hook.body["id"].as_str().unwrap().to_string();
        assert_eq!(ids(&app.get("/v2/webhooks", &acme).await.body, "webhooks"), std::slice::from_ref(&hook));
        assert!(ids(&app.get("/v2/webhooks", &globex).await.body, "webhooks").is_empty());
        assert_error(
            &app.post(&format!("/v2/webhooks/{hook}/rotate-signing-key"), &globex, &json!({})).await,
            404,
            "NOT_FOUND",
        );
        assert_error(
            &app.request(Method::DELETE, &format!("/v2/webhooks/{hook}"), Some(&globex)).await,
            404,
            "NOT_FOUND",
        );
        let events = app.get("/v2/events", &acme).await;
        let acme_events = ids(&events.body, "events");
        assert_eq!(acme_events.len(), 1, "{backend:?}: the deposit's PENDING event");
        assert!(ids(&app.get("/v2/events", &globex).await.body, "events").is_empty());
        assert_error(
            &app.get(&format!("/v2/events?after={}", acme_events[0]), &globex).await,
            404,
            "NOT_FOUND",
        );
        let deleted = app.request(Method::DELETE, &format!("/v2/webhooks/{hook}"), Some(&acme)).await;
        assert_eq!((deleted.status, deleted.body.clone()), (200, json!({})));
        assert!(ids(&app.get("/v2/webhooks", &acme).await.body, "webhooks").is_empty());
    }
}

#[tokio::test]
async fn webhooks_need_a_public_https_url_and_show_their_secret_once() {
    let app = app(Backend::Sqlite).await;
    let key = app.key("acme").await;
    for (body, mentions) in [
        (json!({ "url": "https://127.0.0.1/hook" }), "url: "),
        (json!({ "url": "https://10.1.2.3/hook" }), "may not reach"),
        (json!({ "url": "http://93.184.215.14/hook" }), "https"),
        (json!({ "url": "not a url" }), "valid URL"),
        (json!({ "url": "https://169.254.169.254/latest/meta-data/" }), "may not reach"),
        (json!({ "url": "https://localhost/hook" }), "may not reach"),
        (json!({ "url": "http://93.184.215.14/hook" }), "url: "),
        (json!({ "url": "not a url" }), "url: "),
        (json!({ "url": "https://93.184.215.14/hook", "signingSecret": "x" }), "signingSecret"),
        (json!({ "URL": "https://93.184.215.14/hook" }), "URL"),
        (json!({ "label": "no url" }), "url"),
    ] {
        let answer = app.post("/v2/webhooks", &key, &body).await;
        assert_error(&answer, 400, "INVALID_REQUEST");
        assert!(answer.body["message"].as_str().unwrap().contains(mentions), "{body}: {:?}", answer.body);
    }
    // A name resolving inside is refused without telling what it resolved to.
    let inside = app.post("/v2/webhooks", &key, &json!({ "url": "https://localhost/hook" })).await;
    let message = inside.body["message"].as_str().unwrap();
    assert!(!message.contains("127.0.0.1") && !message.contains("::1"), "{message}");
    let created = app
        .post("/v2/webhooks", &key, &json!({ "url": "https://93.184.215.14/hook", "label": "ledger" }))
        .await;
    assert_eq!(created.status, 201);
    let secret = created.body["signing_secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    let fields: BTreeSet<&str> = created.body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        fields,
        BTreeSet::from([
            "created_at",
            "id",
            "label",
            "signing_key_created_at",
            "signing_key_id",
            "signing_secret",
            "status",
            "url"
        ])
    );
    let listed = app.get("/v2/webhooks", &key).await;
    assert_eq!(listed.body["webhooks"][0]["status"], "ACTIVE");
    assert!(!listed.body.to_string().contains(secret), "a listing never shows the secret");
    let id = created.body["id"].as_str().unwrap();
    let rotated = app.post(&format!("/v2/webhooks/{id}/rotate-signing-key"), &key, &json!({})).await;
    assert_eq!(rotated.status, 200);
    assert_ne!(rotated.body["signing_secret"], secret);
    assert_ne!(rotated.body["signing_key_id"], created.body["signing_key_id"]);
    assert!(rotated.body["previous_key_expires_at"].is_string());
    let revoked = app.post(&format!("/v2/webhooks/{id}/revoke-previous-keys"), &key, &json!({})).await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    let deleted = app.request(Method::DELETE, &format!("/v2/webhooks/{id}"), Some(&key)).await;
    assert_eq!(deleted.status, 200, "{deleted:?}");

    // Every change is in the audit log, by the key that made it.
    let by = format!("api-key:{}", custody_indexer::api_key::key_id(&key).unwrap());
    let mut logged: Vec<(String, String, String)> = app
        .store()
        .audit_latest("acme", 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.target_id == id)
        .map(|e| (e.action, e.actor, e.target_kind))
        .collect();
    logged.reverse();
    let expected: Vec<(String, String, String)> =
        ["webhook.registered", "webhook.key_rotated", "webhook.previous_keys_revoked", "webhook.deleted"]
            .iter()
            .map(|action| (action.to_string(), by.clone(), "webhook".to_string()))
            .collect();
    assert_eq!(logged, expected);
}

#[tokio::test]
async fn deposit_pages_neither_repeat_nor_skip_while_deposits_arrive() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let key = app.key("acme").await;
        let address = evm_address(7);
        add_account(&app, "acme", "acct", "identity", &address).await;
        // 30 deposits, three per timestamp so that ties need the id to order.
        let initial: Vec<Detected> =
            (0..30).map(|i| deposit("acct", &address, i, 100 + i, i / 3, 1_000 + i)).collect();
        record(&app, initial).await;

        let mut seen: Vec<Value> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v2/crypto/deposits?account_id=acct&limit=7&cursor={c}"),
                None => "/v2/crypto/deposits?account_id=acct&limit=7".to_string(),
            };
            let page = app.get(&path, &key).await;
            assert_eq!(page.status, 200, "{:?}", page.body);
            seen.extend(page.body["deposits"].as_array().unwrap().iter().cloned());
            pages += 1;
            if pages == 1 {
                // Newer deposits arrive between pages.
                let newer = (30..35).map(|i| deposit("acct", &address, i, 100 + i, 100 + i, 1)).collect();
                record(&app, newer).await;
            }
            match page.body.get("cursor") {
                Some(c) => cursor = Some(c.as_str().unwrap().to_string()),
                None => break,
            }
        }
        assert_eq!(pages, 5, "{backend:?}: 30 deposits in pages of 7");
        let seen_ids: Vec<&str> = seen.iter().map(|d| d["id"].as_str().unwrap()).collect();
        let unique: BTreeSet<&str> = seen_ids.iter().copied().collect();
        assert_eq!(unique.len(), 30, "{backend:?}: no repeats, no gaps");
        let keys: Vec<(String, String)> = seen
            .iter()
            .map(|d| (d["created_at"].as_str().unwrap().to_string(), d["id"].as_str().unwrap().to_string()))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] > w[1]), "{backend:?}: newest first, ties by id: {keys:?}");
        assert!(seen.iter().all(|d| d["amount"].as_str().unwrap().starts_with("0.001")), "only the first 30");

        // A fresh first page starts with the newest deposit.
        let first = app.get("/v2/crypto/deposits?account_id=acct&limit=1", &key).await;
        assert_eq!(first.body["deposits"][0]["amount"], "0.000001");
        assert_eq!(first.body["deposits"][0]["created_at"], "2023-11-14T22:15:34Z");
        // The last page of everything has no cursor.
        let all = app.get("/v2/crypto/deposits?account_id=acct&limit=25", &key).await;
        assert!(all.body.get("cursor").is_some());
    }
}

#[tokio::test]
async fn deposit_filters_select_by_chain_symbol_and_time() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let key = app.key("acme").await;
        let address = evm_address(8);
        add_account(&app, "acme", "acct", "identity", &address).await;
        let mut eth = deposit("acct", &address, 1, 11, 60, 5);
        eth.currency_symbol = "ETH".into();
        eth.amount = Amount::from_raw(U256::from(10u64).pow(U256::from(18)), 18);
        record(&app, vec![deposit("acct", &address, 2, 12, 0, 1_500_000), eth]).await;

        let list = |query: &'static str| {
            let app = &app;
            let key = &key;
            async move {
                let answer = app.get(&format!("/v2/crypto/deposits?account_id=acct{query}"), key).await;
                assert_eq!(answer.status, 200, "{query}: {:?}", answer.body);
                answer.body["deposits"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| {
                        format!(
                            "{} {}",
                            d["amount"].as_str().unwrap(),
                            d["currency_symbol"].as_str().unwrap()
                        )
                    })
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(list("").await, ["1 ETH", "1.5 USDC"], "{backend:?}");
        assert_eq!(list("&currency_symbol=USDC").await, ["1.5 USDC"]);
        assert_eq!(list("&destination_chain=BASE_SEPOLIA").await.len(), 2);
        assert!(list("&destination_chain=SOLANA_DEVNET").await.is_empty());
        // The schema's zero value filters nothing, whatever its case.
        assert_eq!(list("&destination_chain=CHAIN_UNSPECIFIED").await, ["1 ETH", "1.5 USDC"]);
        assert_eq!(list("&destination_chain=chain_unspecified").await.len(), 2);
        assert_eq!(list("&start_time=2023-11-14T22:13:30Z").await, ["1 ETH"]);
        assert_eq!(list("&end_time=2023-11-14T22:14:20Z").await, ["1.5 USDC"]);
        assert_eq!(
            list("&start_time=2023-11-14T23:13:20%2B01:00&end_time=2023-11-14T22:14:21Z").await.len(),
            2
        );
    }
}

#[tokio::test]
async fn a_deposit_has_exactly_the_resource_fields() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let key = app.key("acme").await;
        add_account(&app, "acme", "acct", "identity", &evm_address(9)).await;
        add_account(&app, "acme", "other", "identity", BOB).await;
        let mut internal = deposit("acct", &evm_address(9), 3, 13, 5, 42);
        internal.source_account_id = Some("other".into());
        record(&app, vec![deposit("acct", &evm_address(9), 2, 12, 4, 2_500_000), internal]).await;

        let list = app.get("/v2/crypto/deposits?account_id=acct", &key).await;
        let deposits = list.body["deposits"].as_array().unwrap();
        let required = [
            "account_address",
            "account_id",
            "amount",
            "confirmed_at",
            "created_at",
            "currency_symbol",
            "dedup_key",
            "destination_chain",
            "id",
            "source_address",
            "source_type",
            "status",
            "transaction_hash",
        ];
        let fields = |d: &Value| d.as_object().unwrap().keys().cloned().collect::<BTreeSet<String>>();
        let plain =
            app.get(&format!("/v2/crypto/deposits/{}", deposits[1]["id"].as_str().unwrap()), &key).await;
        assert_eq!(plain.status, 200);
        assert_eq!(fields(&plain.body), required.iter().map(|s| s.to_string()).collect(), "{backend:?}");
        assert_eq!(plain.body, deposits[1]);
        assert_eq!(plain.body["amount"], "2.5");
        assert_eq!(plain.body["status"], "PENDING");
        assert_eq!(plain.body["source_type"], "ON_CHAIN");
        assert_eq!(plain.body["destination_chain"], "BASE_SEPOLIA");
        assert_eq!(plain.body["created_at"], "2023-11-14T22:13:24Z");
        assert_eq!(plain.body["confirmed_at"], Value::Null, "present, null until confirmed");
        assert_eq!(plain.body["transaction_hash"], format!("0x{:064x}", 2));

        let with_source = &deposits[0];
        assert_eq!(fields(with_source).len(), required.len() + 1);
        assert_eq!(with_source["source_account_id"], "other");
        assert_eq!(with_source["source_type"], "ACCOUNT");
        assert_eq!(with_source["amount"], "0.000042");
    }
}

#[tokio::test]
async fn malformed_requests_get_400_unknown_paths_404_and_other_methods_405() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let key = app.key("acme").await;
        add_account(&app, "acme", "acct", "identity", &evm_address(3)).await;
        let bad = [
            "/v2/crypto/deposits",
            "/v2/crypto/deposits?account_id=",
            "/v2/crypto/deposits?account_id=acct&destination_chain=DOGECOIN",
            "/v2/crypto/deposits?account_id=acct&start_time=yesterday",
            "/v2/crypto/deposits?account_id=acct&end_time=2026-13-01T00:00:00Z",
            "/v2/crypto/deposits?account_id=acct&start_time=2026-02-01T00:00:00Z&end_time=2026-01-01T00:00:00Z",
            "/v2/crypto/deposits?account_id=acct&limit=0",
            "/v2/crypto/deposits?account_id=acct&limit=26",
            "/v2/crypto/deposits?account_id=acct&limit=ten",
            "/v2/crypto/deposits?account_id=acct&cursor=not-a-cursor",
            "/v2/crypto/deposits?account_id=acct&accountId=acct",
            "/v2/crypto/deposits?account_id=acct&account_id=other",
            "/v2/accounts?limit=0",
            "/v2/accounts?limit=101",
            "/v2/accounts?cursor=%%%",
            "/v2/accounts?identityIds=a",
            "/v2/accounts/acct/balances?chain=NOPE",
            "/v2/assets?chain=NOPE",
        ];
        for path in bad {
            let answer = app.get(path, &key).await;
            assert_error(&answer, 400, "INVALID_REQUEST");
        }
        let too_many: Vec<String> = (0..26).map(|i| format!("id-{i}")).collect();
        assert_error(
            &app.get(&format!("/v2/accounts?identity_ids={}", too_many.join(",")), &key).await,
            400,
            "INVALID_REQUEST",
        );
        assert_eq!(
            app.get(&format!("/v2/accounts?identity_ids={}", too_many[..25].join(",")), &key).await.status,
            200
        );

        for path in [
            "/v2/nothing",
            "/v2/crypto/deposits/nope",
            "/v2/accounts/nope",
            "/v2/accounts/nope/balances",
            "/v3/assets",
            "/",
        ] {
            assert_error(&app.get(path, &key).await, 404, "NOT_FOUND");
        }
        for (method, path) in [
            (Method::POST, "/v2/crypto/deposits"),
            (Method::DELETE, "/v2/crypto/deposits/x"),
            (Method::PUT, "/v2/accounts"),
            (Method::PATCH, "/v2/accounts/acct"),
            (Method::POST, "/v2/assets"),
            (Method::POST, "/healthz"),
        ] {
            assert_error(&app.request(method.clone(), path, Some(&key)).await, 405, "METHOD_NOT_ALLOWED");
        }
    }
}

#[tokio::test]
async fn accounts_page_by_id_and_filter_by_identity() {
    for backend in BACKENDS {
        let app = app(backend).await;
        let key = app.key("acme").await;
        for i in 0..5u64 {
            add_account(
                &app,
                "acme",
                &format!("acct-{i}"),
                &format!("identity-{}", i % 2),
                &evm_address(100 + i),
            )
            .await;
        }
        let first = app.get("/v2/accounts?limit=2", &key).await;
        assert_eq!(ids(&first.body, "accounts"), ["acct-0", "acct-1"], "{backend:?}");
        let account = &first.body["accounts"][0];
        assert_eq!(account["type"], "SEGREGATED");
        assert_eq!(account["status"], "ACTIVE");
        assert_eq!(account["identity_id"], "identity-0");
        assert_eq!(
            account["addresses"],
            serde_json::json!([{ "chains": ["BASE_SEPOLIA", "ETHEREUM_TESTNET"], "address": evm_address(100) }])
        );
        let cursor = first.body["cursor"].as_str().unwrap();
        let second = app.get(&format!("/v2/accounts?limit=2&cursor={cursor}"), &key).await;
        assert_eq!(ids(&second.body, "accounts"), ["acct-2", "acct-3"]);
        let cursor = second.body["cursor"].as_str().unwrap();
        let last = app.get(&format!("/v2/accounts?limit=2&cursor={cursor}"), &key).await;
        assert_eq!(ids(&last.body, "accounts"), ["acct-4"]);
        assert!(last.body.get("cursor").is_none());

        let odd = app.get("/v2/accounts?identity_ids=identity-1", &key).await;
        assert_eq!(ids(&odd.body, "accounts"), ["acct-1", "acct-3"]);
        let both =
            app.get("/v2/accounts?identity_ids=identity-1&identity_ids=identity-0&limit=100", &key).await;
        assert_eq!(ids(&both.body, "accounts").len(), 5);
        assert_eq!(app.get("/v2/accounts/acct-3", &key).await.body["id"], "acct-3");
    }
}

#[tokio::test]
async fn assets_are_those_of_the_chain_files() {
    let app = app(Backend::Sqlite).await;
    let key = app.key("acme").await;
    let all = app.get("/v2/assets", &key).await;
    let assets = all.body["assets"].as_array().unwrap();
    let chains = Chains::load(None).unwrap();
    let expected: usize = chains.iter().map(|c| 1 + c.assets.len()).sum();
    assert_eq!(assets.len(), expected);
    let unspecified = app.get("/v2/assets?chain=CHAIN_UNSPECIFIED", &key).await;
    assert_eq!(unspecified.body, all.body, "CHAIN_UNSPECIFIED filters nothing");
    let solana = app.get("/v2/assets?chain=SOLANA_MAINNET", &key).await;
    let usdc = solana.body["assets"].as_array().unwrap().iter().find(|a| a["symbol"] == "USDC").unwrap();
    assert_eq!(
        *usdc,
        serde_json::json!({ "chain": "SOLANA_MAINNET", "symbol": "USDC", "decimals": "6", "type": "SPL_TOKEN",
            "contract_address": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v" })
    );
}

#[tokio::test]
async fn each_key_is_rate_limited_on_its_own() {
    let one = NonZeroU32::new(1).unwrap();
    let app = spawn_app(
        Backend::Sqlite,
        Chains::load(None).unwrap(),
        RateLimit { per_second: one, burst: NonZeroU32::new(2).unwrap() },
    )
    .await;
    let busy = app.key("acme").await;
    let quiet = app.key("acme").await;
    assert_eq!(app.get("/v2/assets", &busy).await.status, 200);
    assert_eq!(app.get("/v2/assets", &busy).await.status, 200);
    let limited = app.get("/v2/assets", &busy).await;
    assert_error(&limited, 429, "RATE_LIMITED");
    let retry_after: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(app.get("/v2/assets", &quiet).await.status, 200, "another key is not starved");
    tokio::time::sleep(std::time::Duration::from_secs(retry_after)).await;
    assert_eq!(app.get("/v2/assets", &busy).await.status, 200);
}

#[tokio::test]
async fn the_openapi_document_matches_the_routes_and_resources() {
    // No chain files: balances answer without asking any node.
    let app = spawn_app(Backend::Sqlite, Chains::default(), RateLimit::default()).await;
    let key = app.key("acme").await;
    add_account(&app, "acme", "acct", "identity", &evm_address(5)).await;
    record(&app, vec![deposit("acct", &evm_address(5), 1, 10, 1, 7)]).await;
    let deposit_id =
        ids(&app.get("/v2/crypto/deposits?account_id=acct", &key).await.body, "deposits")[0].clone();

    let doc = common::api::send(Method::GET, &format!("{}/openapi.json", app.base), None).await;
    assert_eq!(doc.status, 200);
    assert!(doc.body["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc.body["paths"].as_object().unwrap();
    let documented: BTreeSet<&str> = paths.keys().map(String::as_str).collect();
    assert_eq!(
        documented,
        BTreeSet::from([
            "/healthz",
            "/metrics",
            "/operator/v1/audit",
            "/operator/v1/audit/acknowledgements",
            "/operator/v1/audit/restore-acknowledgements",
            "/operator/v1/transfers/recoveries",
            "/operator/v1/disputes",
            "/operator/v1/reconciliation",
            "/operator/v1/reconciliation/repairs",
            "/operator/v1/reconciliation/repairs/{id}/approve",
            "/operator/v1/reconciliation/repairs/{id}/refuse",
            "/operator/v1/conversions/{conversion_id}/payout",
            "/operator/v1/conversions/wires",
            "/operator/v1/bank/imports",
            "/operator/v1/conversions/wires/import",
            "/operator/v1/conversions/{conversion_id}/payout/confirm",
            "/operator/v1/conversions/{conversion_id}/refund/retry",
            "/operator/v1/issuance/returns/{mint_id}/complete",
            "/operator/v1/issuance/wires",
            "/operator/v1/issuance/wires/import",
            "/operator/v1/issuance/wires/{reference}/approve",
            "/operator/v1/issuance/wires/{reference}/refuse",
            "/operator/v1/operator-keys/{key_id}/revoke",
            "/operator/v1/operators",
            "/operator/v1/operators/{operator_id}/disable",
            "/operator/v1/operators/{operator_id}/enable",
            "/operator/v1/operators/{operator_id}/invitation",
            "/operator/v1/changes",
            "/operator/v1/changes/{change_id}/approve",
            "/operator/v1/changes/{change_id}/refuse",
            "/operator/v1/operators/{operator_id}/keys",
            "/operator/v1/operators/{operator_id}/roles",
            "/operator/v1/organizations/{organization_id}/identities",
            "/operator/v1/organizations/{organization_id}/identities/{identity_id}/decisions",
            "/operator/v1/organizations/{organization_id}/users",
            "/operator/v1/organizations/{organization_id}/contact",
            "/operator/v1/virtual-accounts/{virtual_account_id}/open",
            "/operator/v1/virtual-accounts/{virtual_account_id}/open/confirm",
            "/operator/v1/me/keys",
            "/operator/v1/virtual-accounts/{virtual_account_id}/refuse",
            "/readyz",
            "/v2/accounts",
            "/v2/accounts/{account_id}",
            "/v2/accounts/{account_id}/balances",
            "/v2/assets",
            "/v2/conversions",
            "/v2/conversions/quotes",
            "/v2/conversions/{conversion_id}",
            "/v2/crypto/deposits",
            "/v2/crypto/deposits/{deposit_id}",
            "/v2/crypto/transfers",
            "/v2/crypto/transfers/{transfer_id}",
            "/v2/events",
            "/v2/gas/usage",
            "/v2/identities",
            "/v2/identities/{identity_id}",
            "/v2/identities/{identity_id}/compliance",
            "/v2/identities/{identity_id}/id_verification",
            "/v2/identities/{identity_id}/id_verification/{check_id}",
            "/v2/identities/{identity_id}/virtual-accounts",
            "/v2/issuance/bank-account/{id}",
            "/v2/issuance/bank-accounts",
            "/v2/issuance/mint-instructions",
            "/v2/issuance/mints/{id}",
            "/v2/transaction-limits/policies/{policy_id}",
            "/v2/webhooks",
            "/v2/webhooks/{webhook_id}",
            "/v2/webhooks/{webhook_id}/revoke-previous-keys",
            "/v2/webhooks/{webhook_id}/rotate-signing-key",
        ])
    );
    // Every documented operation is served (neither 404 nor 405).
    let hook = |label: &'static str| {
        let store = app.store().clone();
        async move {
            common::webhook(&store, "acme", ("https://93.184.215.14/hook", label), "whsec_AAAA").await.id
        }
    };
    let (deleted, rotated) = (hook("deleted").await, hook("rotated").await);
    let policy = create_limit_policy(app.store(), "acme", Some("acct"), None, "ETH", Some("1"), None)
        .await
        .unwrap()
        .id;
    let transfer = NewTransfer {
        organization: "acme".into(),
        request_id: uuid::Uuid::new_v4().to_string(),
        account_id: "acct".into(),
        chain: Chain::EthereumMainnet,
        source_address: evm_address(5),
        destination_address: evm_address(6),
        currency_symbol: "ETH".into(),
        amount: Amount::parse("0.5", 18).unwrap(),
        route: Route::Omnibus,
        key_index: None,
    };
    let Created::New(transfer) =
        hold::create(app.store(), &transfer, U256::from(10u64).pow(U256::from(18))).await.unwrap()
    else {
        panic!("a new transfer")
    };
    for (path, operations) in paths {
        let kept = path.ends_with("rotate-signing-key") || path.ends_with("revoke-previous-keys");
        let webhook = if kept { &rotated } else { &deleted };
        let concrete = path
            .replace("{account_id}", "acct")
            .replace("{deposit_id}", &deposit_id)
            .replace("{webhook_id}", webhook)
            .replace("{transfer_id}", &transfer.id)
            .replace("{policy_id}", &policy)
            .replace("{identity_id}", "identity")
            .replace("{check_id}", "no-check")
            .replace("{conversion_id}", "no-such-id")
            .replace("{id}", "no-such-id");
        let concrete =
            if concrete == "/v2/crypto/deposits" { format!("{concrete}?account_id=acct") } else { concrete };
        for method in operations.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let answer = app.request(method.clone(), &concrete, Some(&key)).await;
            if concrete.ends_with("no-check") || concrete.ends_with("no-such-id") {
                // Served: the resource, not the route, is missing.
                let message = answer.body["message"].as_str().unwrap();
                assert!(
                    message.contains("no-check") || message.contains("no-such-id"),
                    "{concrete}: {message}"
                );
                continue;
            }
            assert!(![404, 405].contains(&answer.status), "{method} {concrete}: {:?}", answer.body);
        }
    }
    // The Deposit schema is the resource: the properties a deposit carries, all but
    // source_account_id required, and nothing else allowed.
    let schema = &doc.body["components"]["schemas"]["Deposit"];
    let properties: BTreeSet<&str> =
        schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    let served = app.get(&format!("/v2/crypto/deposits/{deposit_id}"), &key).await.body;
    let mut fields: BTreeSet<&str> = served.as_object().unwrap().keys().map(String::as_str).collect();
    fields.insert("source_account_id");
    assert_eq!(properties, fields);
    let required: BTreeSet<&str> =
        schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    fields.remove("source_account_id");
    assert_eq!(required, fields);
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["properties"]["confirmed_at"]["type"],
        serde_json::json!(["string", "null"]),
        "null until confirmed"
    );
    assert_eq!(doc.body["components"]["securitySchemes"]["api_key"]["scheme"], "bearer");
    let schemas = &doc.body["components"]["schemas"];
    let chains: Vec<&str> =
        schemas["Chain"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(chains.len(), Chain::ALL.len() + 1);
    assert_eq!(chains[0], "CHAIN_UNSPECIFIED", "the reference's zero value");
    let method = schemas["DepositInstructionsPaymentMethod"]["enum"].clone();
    assert_eq!(method, serde_json::json!(["BLOCKCHAIN"]));

    // Exactly the operations the reference does not name are extensions.
    let reference = [
        "get /v2/accounts",
        "get /v2/accounts/{account_id}",
        "get /v2/accounts/{account_id}/balances",
        "get /v2/assets",
        "get /v2/conversions/quotes",
        "post /v2/conversions",
        "get /v2/conversions/{conversion_id}",
        "get /v2/crypto/deposits",
        "get /v2/crypto/deposits/{deposit_id}",
        "post /v2/crypto/transfers",
        "get /v2/crypto/transfers",
        "get /v2/crypto/transfers/{transfer_id}",
        "get /v2/identities/{identity_id}",
        "post /v2/identities/{identity_id}/compliance",
        "get /v2/identities/{identity_id}/id_verification/{check_id}",
        "get /v2/identities/{identity_id}/virtual-accounts",
        "get /v2/issuance/bank-account/{id}",
        "get /v2/issuance/mint-instructions",
        "post /v2/simulation/fiat-deposit",
        "get /v2/transaction-limits/policies/{policy_id}",
        "get /v2/webhooks",
        "delete /v2/webhooks/{webhook_id}",
    ];
    let mut named = BTreeSet::new();
    for (path, operations) in paths {
        for (method, operation) in operations.as_object().unwrap() {
            let name = format!("{method} {path}");
            let extension = operation.get("x-extension") == Some(&Value::Bool(true));
            assert_eq!(extension, !reference.contains(&name.as_str()), "{name}");
            if !extension {
                named.insert(name);
            }
        }
    }
    let missing: Vec<&str> = reference.iter().copied().filter(|r| !named.contains(*r)).collect();
    assert_eq!(missing, ["post /v2/simulation/fiat-deposit"], "served but the sandbox's simulation");

    // The error schema lists every code: each example any answer shows is one.
    let codes: BTreeSet<&str> =
        schemas["ErrorCode"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(schemas["ErrorBody"]["properties"]["code"]["$ref"], "#/components/schemas/ErrorCode");
    let mut shown = BTreeSet::new();
    for operations in paths.values() {
        for operation in operations.as_object().unwrap().values() {
            for answer in operation["responses"].as_object().unwrap().values() {
                let examples = answer["content"]["application/json"]["examples"].as_object();
                for example in examples.into_iter().flat_map(|e| e.values()) {
                    if let Some(code) = example["value"]["code"].as_str() {
                        shown.insert(code.to_string());
                    }
                }
            }
        }
    }
    assert!(shown.len() >= 5, "{shown:?}");
    for code in &shown {
        assert!(codes.contains(code.as_str()), "{code} is shown but not in ErrorCode: {codes:?}");
    }
}
