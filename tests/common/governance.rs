//! Operators of a `production` store made as production makes them: the
//! bootstrap's admin, a second admin added during genesis, both enrolled
//! (which ends genesis for good), then each further operator proposed by
//! the first admin, approved by the second, and enrolled by its owner, its
//! first key read from its enrolment's page. Enrol links are minted with
//! the library, as an admin's invitation mints them for the owner's mail
//! (under the tests' pepper when the service holds it).

use alloy::transports::http::reqwest::{self, Method, header};
use std::sync::OnceLock;

use custody_indexer::{
    api_key::pepper,
    audit::{Actor, Detail},
    people,
    store::{
        Store,
        keyring::{self, Pepper},
    },
};
use serde_json::{Value, json};

use super::api::send_json;

/// The password every harness operator enrols with.
pub const PASSWORD: &str = "correct horse battery staple";

/// The admins of a production store past genesis, and their keys.
#[derive(Debug, Clone)]
pub struct Admins {
    pub first: (String, String),
    pub second: (String, String),
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Enrols the console sign-in of `operator` through the service at `base`
/// with a link minted for it; answers the key its enrolment showed, if any.
pub async fn enrol(base: &str, store: &Store, operator: &str) -> Option<String> {
    let path = minted_link(store, operator).await;
    enrol_at(&format!("{base}{path}")).await
}

/// A fresh enrol link of `operator`, as an admin's invitation mints it:
/// keyed, and its entry authenticated, under the tests' pepper when the
/// store's keys are (a `run` of [`super::cli::Env`] serves it).
pub async fn minted_link(store: &Store, operator: &str) -> String {
    let by = Actor::local(Some("invitation".into()));
    let mint = people::operator_link(store, operator, &by);
    match served_pepper(store).await {
        Some(pepper) => keyring::within(pepper, mint).await,
        None => mint.await,
    }
    .unwrap()
}

/// The tests' pepper, when `store`'s log records its keys keyed under it.
pub async fn served_pepper(store: &Store) -> Option<&'static Pepper> {
    static PEPPER: OnceLock<Pepper> = OnceLock::new();
    let pepper = PEPPER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pepper"), super::cli::TEST_KEY_PEPPER).unwrap();
        Pepper::from_file(&dir.path().join("pepper")).unwrap()
    });
    let entries = store.audit_entries(0, None, 100_000).await.unwrap();
    let keyed = entries.iter().any(|entry| {
        entry.action == pepper::PEPPERED
            && entry.detail.as_deref().and_then(Detail::parse).and_then(|d| d.pepper_id) == Some(pepper.id())
    });
    keyed.then_some(pepper)
}

/// Enrols through `link`; answers the key its enrolment showed, if any.
pub async fn enrol_at(link: &str) -> Option<String> {
    let page = client().get(link).send().await.unwrap().text().await.unwrap();
    let (_, rest) = page
        .split_once("name=\"totp_secret\" value=\"")
        .unwrap_or_else(|| panic!("no enrol form at {link}: {page}"));
    let secret = rest.split('"').next().unwrap();
    // Production requires a second factor: the code of the step before
    // (within the allowed skew), so that the steps after stay free.
    let code = super::totp::a_step_back(secret).await;
    let form = [("password", PASSWORD), ("again", PASSWORD), ("totp_secret", secret), ("code", &code)];
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
    let answer = client()
        .post(link)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "enrolling through {link}");
    let page = answer.text().await.unwrap();
    page.split_once("<code id=\"operator-key\">").map(|(_, rest)| rest.split('<').next().unwrap().to_string())
}

/// Past genesis: `first` (the bootstrap's admin, id and key) enrols, adds
/// a second admin alone, who enrols.
pub async fn past_genesis(base: &str, store: &Store, first: (String, String)) -> Admins {
    assert_eq!(enrol(base, store, &first.0).await, None, "the bootstrap's admin has its key already");
    let body = json!({ "name": "Second Admin", "email": "second.admin@example.com", "roles": ["admin"] });
    let created = call(base, Method::POST, "/operator/v1/operators", &first.1, &body).await;
    assert_eq!(created.0, 201, "an admin added during genesis: {}", created.1);
    let second = created.1["operator"]["id"].as_str().unwrap().to_string();
    let key = enrol(base, store, &second).await.expect("the second admin's first key");
    Admins { first, second: (second, key) }
}

/// An operator named `name` with `roles` (comma-separated), proposed by
/// the first admin, approved by the second and enrolled: its id and key.
pub async fn operator(
    base: &str,
    store: &Store,
    admins: &Admins,
    name: &str,
    roles: &str,
) -> (String, String) {
    let email = format!("{}@example.com", name.to_lowercase().replace(' ', "."));
    let roles: Vec<&str> = roles.split(',').collect();
    let body = json!({ "name": name, "email": email, "roles": roles });
    let proposed = call(base, Method::POST, "/operator/v1/operators", &admins.first.1, &body).await;
    assert_eq!(proposed.0, 202, "{name}: {}", proposed.1);
    let change = proposed.1["change"]["id"].as_str().unwrap();
    let path = format!("/operator/v1/changes/{change}/approve");
    let approved = call(base, Method::POST, &path, &admins.second.1, &json!({})).await;
    assert_eq!(approved.0, 200, "{name}: {}", approved.1);
    let id = approved.1["created"]["operator"]["id"].as_str().unwrap().to_string();
    let key = enrol(base, store, &id).await.expect("an operator's first key");
    (id, key)
}

async fn call(base: &str, method: Method, path: &str, key: &str, body: &Value) -> (u16, Value) {
    let answer = send_json(method, &format!("{base}{path}"), Some(key), Some(body)).await;
    (answer.status, answer.body)
}
