//! Per-organization limits through real HTTP on SQLite and PostgreSQL: the
//! creation past a limit is `409 ORGANIZATION_LIMIT_REACHED` while another
//! organization is unaffected, a replay at the limit still answers what it
//! created, racing creations for the last slot take exactly the limit; and
//! the operator CLI refuses a 51st API key.

use crate::common;

use std::sync::Arc;

use alloy::transports::http::reqwest::Method;
use common::{
    api::{Answer, App, spawn_configured},
    chain_toml,
    cli::Env,
    db::{BACKENDS, Backend},
    dead_port,
};
use custody_indexer::{
    api::DEFAULT_GAS_CREDIT_USD_MICROS,
    config::Chains,
    keys::{MnemonicSigner, Signer},
    store::{MAX_API_KEYS, OrganizationLimits},
};
use serde_json::{Value, json};

const PHRASE: &str = "test test test test test test test test test test test junk";

async fn app(backend: Backend, limit: u32) -> App {
    let signer: Arc<dyn Signer> = Arc::new(MnemonicSigner::from_phrase(PHRASE).unwrap());
    let limits = OrganizationLimits { accounts: limit, identities: limit, webhooks: limit };
    spawn_configured(backend, Chains::load(None).unwrap(), |state| {
        state.with_transfers(Some(signer), DEFAULT_GAS_CREDIT_USD_MICROS).with_limits(limits)
    })
    .await
}

fn identity_body(request_id: &str) -> Value {
    json!({ "request_id": request_id, "type": "INDIVIDUAL", "label": request_id })
}

fn account_body(request_id: &str, identity: &str) -> Value {
    json!({ "request_id": request_id, "identity_id": identity, "type": "SEGREGATED" })
}

fn webhook_body(label: &str) -> Value {
    json!({ "url": "https://8.8.8.8/hooks", "label": label })
}

fn created(answer: &Answer) -> String {
    assert_eq!(answer.status, 201, "{answer:?}");
    answer.body["id"].as_str().unwrap().to_string()
}

/// A refusal naming the limit and the setting that raises it.
fn assert_limit(answer: &Answer, what: &str, setting: &str) {
    assert_eq!(answer.status, 409, "{answer:?}");
    assert_eq!(answer.body["code"], "ORGANIZATION_LIMIT_REACHED", "{answer:?}");
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.contains(what) && message.contains("limit of 2") && message.contains(setting),
        "{message}"
    );
}

#[tokio::test]
async fn the_creation_past_a_limit_is_refused_and_other_organizations_are_unaffected() {
    for backend in BACKENDS {
        let app = app(backend, 2).await;
        let (acme, globex) = (app.key("acme").await, app.key("globex").await);

        let first = created(&app.post("/v2/identities", &acme, &identity_body("i-1")).await);
        let second = app.post("/v2/identities", &acme, &identity_body("i-2")).await;
        created(&second);
        let third = app.post("/v2/identities", &acme, &identity_body("i-3")).await;
        assert_limit(&third, "identities", "--org-max-identities");
        let replay = app.post("/v2/identities", &acme, &identity_body("i-2")).await;
        assert_eq!((replay.status, &replay.body), (201, &second.body), "{backend:?}");
        created(&app.post("/v2/identities", &globex, &identity_body("i-3")).await);

        created(&app.post("/v2/accounts", &acme, &account_body("a-1", &first)).await);
        let second = app.post("/v2/accounts", &acme, &account_body("a-2", &first)).await;
        created(&second);
        let third = app.post("/v2/accounts", &acme, &account_body("a-3", &first)).await;
        assert_limit(&third, "accounts", "--org-max-accounts");
        let replay = app.post("/v2/accounts", &acme, &account_body("a-2", &first)).await;
        assert_eq!((replay.status, &replay.body), (201, &second.body), "{backend:?}");
        let other = created(&app.post("/v2/identities", &globex, &identity_body("g-1")).await);
        created(&app.post("/v2/accounts", &globex, &account_body("a-3", &other)).await);

        let hook = created(&app.post("/v2/webhooks", &acme, &webhook_body("one")).await);
        created(&app.post("/v2/webhooks", &acme, &webhook_body("two")).await);
        assert_limit(
            &app.post("/v2/webhooks", &acme, &webhook_body("three")).await,
            "webhooks",
            "--org-max-webhooks",
        );
        created(&app.post("/v2/webhooks", &globex, &webhook_body("three")).await);
        // A deleted webhook frees its slot.
        let deleted = app.request(Method::DELETE, &format!("/v2/webhooks/{hook}"), Some(&acme)).await;
        assert_eq!(deleted.status, 200, "{deleted:?}");
        created(&app.post("/v2/webhooks", &acme, &webhook_body("three")).await);
    }
}

/// Sends `count` creations at once; how many were created.
async fn race(app: &App, key: &str, path: &str, bodies: Vec<Value>) -> usize {
    let requests = bodies.iter().map(|body| app.post(path, key, body));
    let answers = futures::future::join_all(requests).await;
    for answer in answers.iter().filter(|a| a.status != 201) {
        assert_eq!(answer.body["code"], "ORGANIZATION_LIMIT_REACHED", "{answer:?}");
    }
    answers.iter().filter(|a| a.status == 201).count()
}

#[tokio::test]
async fn racing_creations_for_the_last_slot_take_exactly_the_limit() {
    for backend in BACKENDS {
        let app = app(backend, 2).await;
        let key = app.key("acme").await;
        let owner = created(&app.post("/v2/identities", &key, &identity_body("owner")).await);
        let bodies = (0..8).map(|i| identity_body(&format!("racer-{i}"))).collect();
        assert_eq!(race(&app, &key, "/v2/identities", bodies).await, 1, "{backend:?}");
        let listed = app.get("/v2/identities", &key).await;
        assert_eq!(listed.body["identities"].as_array().unwrap().len(), 2, "{backend:?}");

        created(&app.post("/v2/accounts", &key, &account_body("first", &owner)).await);
        let bodies = (0..8).map(|i| account_body(&format!("racer-{i}"), &owner)).collect();
        assert_eq!(race(&app, &key, "/v2/accounts", bodies).await, 1, "{backend:?}");
        let listed = app.get("/v2/accounts", &key).await;
        assert_eq!(listed.body["accounts"].as_array().unwrap().len(), 2, "{backend:?}");

        created(&app.post("/v2/webhooks", &key, &webhook_body("first")).await);
        let bodies = (0..8).map(|i| webhook_body(&format!("racer-{i}"))).collect();
        assert_eq!(race(&app, &key, "/v2/webhooks", bodies).await, 1, "{backend:?}");
        let listed = app.get("/v2/webhooks", &key).await;
        assert_eq!(listed.body["webhooks"].as_array().unwrap().len(), 2, "{backend:?}");
    }
}

#[test]
fn the_cli_refuses_a_51st_api_key() {
    let env = Env::with_chain_file(&chain_toml(&[format!("http://127.0.0.1:{}", dead_port())], None, ""));
    env.ok(&["organizations", "create", "--id", "acme"]);
    for n in 0..MAX_API_KEYS {
        env.ok(&["api-keys", "create", "--organization", "acme", "--name", &format!("key-{n}")]);
    }
    let refused = env.output(&["api-keys", "create", "--organization", "acme", "--name", "one too many"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("organization acme holds 50 active API keys, its limit of 50"), "{stderr}");
    let listed = env.ok(&["api-keys", "list", "--organization", "acme", "--json"]);
    assert_eq!(serde_json::from_str::<Vec<Value>>(&listed).unwrap().len(), 50);

    // A revoked key frees its slot.
    let id = serde_json::from_str::<Vec<Value>>(&listed).unwrap()[0]["id"].as_str().unwrap().to_string();
    env.ok(&["api-keys", "revoke", &id]);
    env.ok(&["api-keys", "create", "--organization", "acme", "--name", "replacement"]);
}

/// 100 accounts created at once by four organizations on PostgreSQL. Before
/// the fix (checked against f395c56) two organizations could read the same
/// highest key index before either took the serialising lock, and one got
/// `409` naming the other tenant's address.
#[tokio::test]
async fn a_hundred_accounts_created_at_once_by_four_organizations_all_succeed() {
    let app = Arc::new(app(Backend::Postgres, 100).await);
    let mut keys = Vec::new();
    for organization in ["acme", "globex", "initech", "umbrella"] {
        let key = app.key(organization).await;
        created(&app.post("/v2/identities", &key, &identity_body("owner")).await);
        keys.push(key);
    }
    let mut identities = Vec::new();
    for key in &keys {
        let listed = app.get("/v2/identities", key).await;
        identities.push(listed.body["identities"][0]["id"].as_str().unwrap().to_string());
    }
    let creations = (0..100).map(|i| {
        let (app, key, identity) = (app.clone(), keys[i % 4].clone(), identities[i % 4].clone());
        tokio::spawn(async move {
            app.post("/v2/accounts", &key, &account_body(&format!("a-{i}"), &identity)).await
        })
    });
    let mut addresses = std::collections::HashSet::new();
    for answer in futures::future::join_all(creations).await {
        let answer = answer.unwrap();
        assert_eq!(answer.status, 201, "{answer:?}");
        for address in answer.body["addresses"].as_array().unwrap() {
            addresses.insert(address["address"].as_str().unwrap().to_string());
        }
    }
    assert!(addresses.len() >= 100, "each account has addresses of its own: {}", addresses.len());
}
