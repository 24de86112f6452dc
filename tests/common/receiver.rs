//! A real webhook receiver on 127.0.0.1: records every request with its
//! headers and body, and answers with the statuses it is told to (200 when
//! nothing is queued).

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use custody_indexer::events::signing::{Secret, verify};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: Bytes,
    /// The status this request was answered with.
    pub answered: u16,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// Whether the request carries a valid signature by `secret`.
    pub fn signed_by(&self, secret: &str) -> bool {
        let secret = Secret::parse(secret).unwrap();
        verify(
            &secret,
            &self.id,
            &self.timestamp,
            &self.signature,
            &self.body,
            chrono::Utc::now().timestamp(),
        )
        .is_ok()
    }
}

#[derive(Default)]
struct Inner {
    received: Vec<Received>,
    /// Statuses to answer next, then `fallback`.
    queued: VecDeque<u16>,
    fallback: u16,
    /// How long each request waits before it is answered.
    delay: Duration,
    /// Requests that arrived, answered or not yet.
    arrived: usize,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner { fallback: 200, ..Inner::default() }));
        let app = Router::new().route("/hook", post(receive)).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, inner }
    }

    /// Answers the next `count` requests with `status`.
    pub fn fail_next(&self, count: usize, status: u16) {
        self.inner.lock().unwrap().queued.extend(std::iter::repeat_n(status, count));
    }

    /// Waits `delay` before answering each request, like a slow receiver.
    pub fn delay(&self, delay: Duration) {
        self.inner.lock().unwrap().delay = delay;
    }

    /// Answers every request with `status` from now on.
    pub fn answer(&self, status: u16) {
        self.inner.lock().unwrap().fallback = status;
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    /// How many requests arrived, answered or still waiting.
    pub fn arrived(&self) -> usize {
        self.inner.lock().unwrap().arrived
    }

    /// Waits until every request that reached the receiver has been
    /// answered and none has come for `quiet`. After a sender is killed,
    /// what it sent before dying is then answered as the receiver answers
    /// now, not as it is told to answer later.
    pub async fn settle(&self, quiet: Duration) {
        let counts = || {
            let inner = self.inner.lock().unwrap();
            (inner.arrived, inner.received.len())
        };
        loop {
            let before = counts();
            tokio::time::sleep(quiet).await;
            let after = counts();
            if before == after && after.0 == after.1 {
                return;
            }
        }
    }

    /// The requests answered with 2xx.
    pub fn delivered(&self) -> Vec<Received> {
        self.received().into_iter().filter(|r| (200..300).contains(&r.answered)).collect()
    }
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::http::StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let delay = {
        let mut inner = inner.lock().unwrap();
        inner.arrived += 1;
        inner.delay
    };
    tokio::time::sleep(delay).await;
    let mut inner = inner.lock().unwrap();
    let status = inner.queued.pop_front().unwrap_or(inner.fallback);
    inner.received.push(Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body,
        answered: status,
    });
    axum::http::StatusCode::from_u16(status).unwrap()
}
