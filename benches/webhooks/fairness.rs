//! Fairness: an organization whose receiver is slow (answers after 10 s) or
//! failing (answers 500 at once) has `BENCH_BACKLOG` deliveries queued
//! before anyone else's. Meanwhile another organization's deposits are
//! written one every 20 ms for 10 s, each timed from its write to its
//! event's arrival at its receiver. The delivery worker runs with the
//! defaults (128 in flight, 32 of one organization).
//!
//! Sharing: 10,000 deliveries queued for 8 organizations at once, each
//! with its own webhook on one receiver, delivered with the defaults: the
//! throughput when organizations take turns.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, http::StatusCode, routing::post};
use custody_indexer::{
    chain::Chain,
    events::{
        delivery::{self, DeliveryConfig},
        signing::Secret,
        url::Policy,
    },
};
use sqlx::{AnyConnection, Connection, Executor};
use tokio_util::sync::CancellationToken;

use crate::common::{
    self,
    db::{Backend, TestDb},
};

#[derive(Debug, Clone, Copy)]
pub enum Stuck {
    /// Answers 204 after 10 s (the timeout is 15 s).
    Slow,
    /// Answers 500 at once: every attempt is retried on the schedule.
    Failing,
}

/// A receiver that answers as `stuck` does, counting the requests.
async fn stuck_receiver(stuck: Stuck) -> (String, Arc<AtomicU64>) {
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    let answer = move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::Relaxed);
            match stuck {
                Stuck::Slow => {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    StatusCode::NO_CONTENT
                }
                Stuck::Failing => StatusCode::INTERNAL_SERVER_ERROR,
            }
        }
    };
    let app = Router::new().route("/hook", post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, count)
}

/// Events `first..first + count` of `organization`, each with a delivery
/// due now to `webhook`, written in two statements; the store's event
/// sequence moves past them.
async fn backlog(url: &str, organization: &str, webhook: &str, first: u64, count: u64) {
    let mut conn = AnyConnection::connect(url).await.unwrap();
    let now = custody_indexer::store::now_micros();
    let numbers =
        "WITH RECURSIVE n(i) AS (SELECT CAST($1 AS BIGINT) UNION ALL SELECT i + 1 FROM n WHERE i < $2)";
    let events = format!(
        "{numbers} INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at)
         SELECT i, 'backlog-' || i, $3, 'deposit_v2', 'backlog-' || i,
             '{{\"id\":\"backlog-' || i || '\",\"type\":\"deposit_v2\",\"data\":{{}}}}', $4 FROM n"
    );
    let last = (first + count - 1) as i64;
    let query = sqlx::query(&events).bind(first as i64).bind(last).bind(organization).bind(now);
    conn.execute(query).await.unwrap();
    let deliveries = format!(
        "{numbers} INSERT INTO deliveries (id, event_seq, webhook_id, resource_id, state, attempts,
             next_attempt_at, created_at, updated_at)
         SELECT 'backlog-' || i, i, $3, 'backlog-' || i, 'PENDING', 0, $4, $4, $4 FROM n"
    );
    let query = sqlx::query(&deliveries).bind(first as i64).bind(last).bind(webhook).bind(now);
    conn.execute(query).await.unwrap();
    let moved = sqlx::query("UPDATE store_meta SET value = $1 WHERE key = 'event_seq'").bind(last);
    conn.execute(moved).await.unwrap();
}

/// `organizations` organizations, `each` deliveries queued for each: how
/// fast the defaults deliver them all when the organizations take turns.
pub async fn shared(backend: Backend, organizations: u64, each: u64) {
    let db = TestDb::new(backend).await;
    let (url, arrivals) = crate::receiver().await;
    let secret = Secret::generate();
    for k in 0..organizations {
        let organization = format!("org-{k}");
        custody_indexer::operators::tenants::create_bare_organization(&db.store, &organization, None)
            .await
            .unwrap();
        let webhook = custody_indexer::webhooks::register(
            &db.store,
            &organization,
            (&url, "shared"),
            secret.expose(),
            &custody_indexer::audit::Actor::System,
        )
        .await
        .unwrap();
        backlog(&db.url, &organization, &webhook.id, 1 + k * each, each).await;
    }
    let total = organizations * each;
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let worker = tokio::spawn(delivery::run(db.store.clone(), config(), shutdown.clone()));
    while (arrivals.lock().unwrap().len() as u64) < total {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    shutdown.cancel();
    worker.await.unwrap();
    println!(
        "{backend:?}: {total} deliveries of {organizations} organizations taking turns, delivered with the defaults in \
         {elapsed:.2} s: {:.0} events/s",
        total as f64 / elapsed
    );
}

/// The defaults, polling often.
fn config() -> DeliveryConfig {
    DeliveryConfig { poll: Duration::from_millis(50), policy: Policy::PRIVATE, ..DeliveryConfig::default() }
}

pub async fn run(backend: Backend, backlog_size: u64, stuck: Stuck) {
    let db = TestDb::new(backend).await;
    let address = "0x1111111111111111111111111111111111111111";
    common::add_account_on(&db.store, Chain::BaseSepolia, "acct", address).await;
    let (url, arrivals) = crate::receiver().await;
    let secret = Secret::generate();
    custody_indexer::webhooks::register(
        &db.store,
        "default",
        (&url, "steady"),
        secret.expose(),
        &custody_indexer::audit::Actor::System,
    )
    .await
    .unwrap();
    custody_indexer::operators::tenants::create_bare_organization(&db.store, "stuck", None).await.unwrap();
    let (stuck_url, attempts) = stuck_receiver(stuck).await;
    let webhook = custody_indexer::webhooks::register(
        &db.store,
        "stuck",
        (&stuck_url, "stuck"),
        secret.expose(),
        &custody_indexer::audit::Actor::System,
    )
    .await
    .unwrap();
    backlog(&db.url, "stuck", &webhook.id, 1, backlog_size).await;

    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(delivery::run(db.store.clone(), config(), shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut written = HashMap::new();
    let started = Instant::now();
    let mut n = 10_000_000u64;
    while started.elapsed() < Duration::from_secs(10) {
        crate::write_events(&db.store, "acct", address, n, 1).await;
        written.insert(format!("0x{n:064x}"), Instant::now());
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while arrivals.lock().unwrap().len() < written.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut delays: Vec<Duration> = arrivals
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(tx, at)| written.get(tx).map(|w| at.saturating_duration_since(*w)))
        .collect();
    shutdown.cancel();
    worker.abort();
    delays.sort();
    if delays.is_empty() {
        println!(
            "{backend:?}: beside {backlog_size} queued deliveries to a {stuck:?} receiver, none of another organization's deposits arrived"
        );
        return;
    }
    let pick = |q: f64| delays[((delays.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{backend:?}: beside {backlog_size} queued deliveries to a {stuck:?} receiver ({} attempts made), another \
         organization's {} of {} deposits arrived: written → at its receiver p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        attempts.load(Ordering::Relaxed),
        delays.len(),
        written.len(),
        pick(0.5),
        pick(0.99),
        pick(1.0)
    );
}
