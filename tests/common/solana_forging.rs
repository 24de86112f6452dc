//! A Solana provider that lies about blocks: a JSON-RPC proxy in front of
//! a node that, while told to, answers every `getBlock` with another
//! `blockhash` (the block's transactions as the node served them), or
//! answers nothing at all (HTTP 503). Everything else is the node's.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering::SeqCst},
    },
};

use alloy::transports::http::reqwest;
use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::post};
use serde_json::Value;

/// The blockhash the liar answers: 32 bytes no real block hashes to.
pub const FORGED_BLOCKHASH: &str = "8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR";

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    lying: AtomicBool,
    silent: AtomicBool,
}

pub struct LyingSolanaRpc {
    pub url: String,
    proxy: Arc<Proxy>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LyingSolanaRpc {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(upstream: String) -> LyingSolanaRpc {
    let proxy = Arc::new(Proxy {
        upstream,
        client: reqwest::Client::new(),
        lying: AtomicBool::new(false),
        silent: AtomicBool::new(false),
    });
    let app = Router::new().route("/", post(handle)).with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    LyingSolanaRpc { url: format!("http://{addr}"), proxy, task }
}

impl LyingSolanaRpc {
    /// Whether `getBlock` answers [`FORGED_BLOCKHASH`] from now on.
    pub fn lie(&self, lying: bool) {
        self.proxy.lying.store(lying, SeqCst);
    }

    /// Whether every request is answered 503 from now on.
    pub fn silence(&self, silent: bool) {
        self.proxy.silent.store(silent, SeqCst);
    }
}

async fn handle(State(proxy): State<Arc<Proxy>>, Json(request): Json<Value>) -> axum::response::Response {
    if proxy.silent.load(SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let answer = proxy.client.post(&proxy.upstream).json(&request).send().await;
    let Ok(answer) = answer else { return StatusCode::BAD_GATEWAY.into_response() };
    let Ok(mut answer) = answer.json::<Value>().await else { return StatusCode::BAD_GATEWAY.into_response() };
    if proxy.lying.load(SeqCst) && request["method"] == "getBlock" && answer["result"].is_object() {
        answer["result"]["blockhash"] = Value::String(FORGED_BLOCKHASH.into());
    }
    Json(answer).into_response()
}
