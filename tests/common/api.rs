//! The HTTP API on a random port over a fresh store (`spawn_app`), and a
//! client that returns each answer's status, headers and JSON body.

use std::sync::Arc;

use alloy::transports::http::reqwest;
use custody_indexer::{
    api::{self, ApiState, RateLimit},
    api_key,
    chain::Chain,
    config::Chains,
    keys::Signer,
    store::Store,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::db::{Backend, TestDb};

pub struct App {
    pub base: String,
    pub db: TestDb,
    shutdown: CancellationToken,
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl App {
    pub fn store(&self) -> &Store {
        &self.db.store
    }

    /// Stops the service and its workers (the store stays).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Creates `organization` (if new) and a key of it; returns the token.
    pub async fn key(&self, organization: &str) -> String {
        if !self.store().organizations().await.unwrap().iter().any(|o| o.id == organization) {
            custody_indexer::operators::tenants::create_bare_organization(self.store(), organization, None)
                .await
                .unwrap();
        }
        let secret = api_key::generate();
        custody_indexer::api_key::manage::create_with(
            self.store(),
            organization,
            "test",
            (&secret.id, &secret.hash),
            &custody_indexer::audit::Actor::System,
        )
        .await
        .unwrap();
        secret.token
    }

    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.request(reqwest::Method::GET, path, Some(token)).await
    }

    pub async fn request(&self, method: reqwest::Method, path: &str, token: Option<&str>) -> Answer {
        send(method, &format!("{}{path}", self.base), token).await
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Answer {
        send_json(reqwest::Method::POST, &format!("{}{path}", self.base), Some(token), Some(body)).await
    }
}

/// Whether something answers `GET url` (a server still starting refuses connections).
pub async fn answers(url: &str) -> bool {
    reqwest::Client::new().get(url).send().await.is_ok_and(|r| r.status().is_success())
}

pub async fn send(method: reqwest::Method, url: &str, token: Option<&str>) -> Answer {
    send_json(method, url, token, None).await
}

/// Sends `body` as JSON when given.
pub async fn send_json(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Answer {
    send_raw(method, url, token, body.map(Value::to_string), &[]).await
}

/// Sends `body` as it is (labelled JSON) when given, with `headers` besides
/// the bearer token.
pub async fn send_raw(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<String>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer { status, headers, body }
}

impl Drop for App {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Another API server (an instance of its own, with its own connections)
/// over an app's store; stopped when dropped.
pub struct Server {
    pub base: String,
    shutdown: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl App {
    pub async fn another_server(&self, chains: Chains) -> Server {
        self.another_configured(chains, |state| state).await
    }

    /// As [`App::another_server`], its state as `configure` makes it.
    pub async fn another_configured(
        &self,
        chains: Chains,
        configure: impl FnOnce(ApiState) -> ApiState,
    ) -> Server {
        let store = super::db::unlocked(&Store::connect(&self.db.url).await.unwrap()).await;
        let listener = custody_indexer::server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = configure(ApiState::new(store, chains, Vec::<Chain>::new(), RateLimit::default()));
        let shutdown = CancellationToken::new();
        tokio::spawn(custody_indexer::service::workers::serve_api(listener, state, shutdown.clone()));
        Server { base, shutdown }
    }
}

/// Serves the API over a fresh store of `backend` on a random port.
pub async fn spawn_app(backend: Backend, chains: Chains, rate_limit: RateLimit) -> App {
    spawn_app_with_signer(backend, chains, rate_limit, None).await
}

/// As [`spawn_app`], with the state `configure` makes of the default one.
pub async fn spawn_configured(
    backend: Backend,
    chains: Chains,
    configure: impl FnOnce(ApiState) -> ApiState,
) -> App {
    let db = TestDb::new(backend).await;
    let listener = custody_indexer::server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = configure(ApiState::new(db.store.clone(), chains, Vec::<Chain>::new(), RateLimit::default()));
    let shutdown = CancellationToken::new();
    tokio::spawn(custody_indexer::service::workers::serve_api(listener, state, shutdown.clone()));
    App { base, db, shutdown }
}

/// As [`spawn_app`], taking transfers signed by `signer` when given.
pub async fn spawn_app_with_signer(
    backend: Backend,
    chains: Chains,
    rate_limit: RateLimit,
    signer: Option<Arc<dyn Signer>>,
) -> App {
    let db = TestDb::new(backend).await;
    let listener = custody_indexer::server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = ApiState::new(db.store.clone(), chains, Vec::<Chain>::new(), rate_limit)
        .with_transfers(signer, api::DEFAULT_GAS_CREDIT_USD_MICROS);
    let shutdown = CancellationToken::new();
    tokio::spawn(custody_indexer::service::workers::serve_api(listener, state, shutdown.clone()));
    App { base, db, shutdown }
}

/// KYC data of an ordinary individual named Ada `last_name`.
pub fn kyc(last_name: &str) -> Value {
    serde_json::json!({ "kyc": {
        "first_name": "Ada", "last_name": last_name, "date_of_birth": "1990-12-10",
        "nationality": "GB", "country_of_birth": "GB", "occupation": "EMPLOYED",
        "source_of_funds": "SALARY", "account_purpose": "SAVINGS",
        "addresses": [{ "line1": "1 Main St", "city": "London", "region_code": "LND",
                        "postal_code": "N1 1AA", "country_code": "GB" }]
    }})
}

/// The events of type `kind` about the resource `id` (their `data.id`) in a
/// page of `GET /v2/events`, in order.
pub fn events_about(page: &Value, kind: &str, id: &str) -> Vec<Value> {
    page["events"]
        .as_array()
        .expect("a page of events")
        .iter()
        .filter(|e| e["type"] == kind && e["data"]["id"] == id)
        .cloned()
        .collect()
}

/// An operator made on `admin`'s authority as an admin makes one alone in
/// `sandbox`: setup for tests of what operators decide (production's
/// grants are tested on their own).
pub async fn seed_operator(
    store: &Store,
    admin: &custody_indexer::operators::Operator,
    new: custody_indexer::operators::NewOperator,
) -> custody_indexer::operators::Created {
    use custody_indexer::{
        environment::Environment,
        operators::{Outcome, grants},
    };
    match grants::create(store, (Environment::Sandbox, None), admin, new).await.unwrap() {
        Outcome::Applied(created) => created,
        Outcome::Proposed(change) | Outcome::Suspended(change) => {
            panic!("sandbox applies at once, yet proposed {change:?}")
        }
    }
}
