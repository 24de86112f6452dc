//! The outbox's retention: the purge removes the events older than the
//! retention, oldest first, but never one a sink has not taken nor one a
//! webhook still owes (or any after it); and `custody-indexer events …`
//! shows the sinks and purges on an operator's word.

use crate::common;

use common::{
    cli::Env,
    db::{BACKENDS, TestDb},
};
use custody_indexer::{
    events::outbox::{advance_sink, purge_events, release_sink, remove_sink, take_sink},
    operators::tenants::create_bare_organization,
    store::now_micros,
};
use sqlx::{AnyConnection, Connection};

const DAY: i64 = 86_400_000_000;

/// Events 1..=n of `acme`, event `seq` committed `age(seq)` microseconds ago.
async fn events(url: &str, n: i64, age: impl Fn(i64) -> i64) {
    let mut conn = AnyConnection::connect(url).await.unwrap();
    for seq in 1..=n {
        sqlx::query(
            "INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at)
             VALUES ($1, $2, 'acme', 'deposit_v2', $3, '{}', $4)",
        )
        .bind(seq)
        .bind(format!("event-{seq}"))
        .bind(format!("resource-{seq}"))
        .bind(now_micros() - age(seq))
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

async fn delivery(url: &str, seq: i64, webhook: &str, state: &str) {
    let mut conn = AnyConnection::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO deliveries (id, event_seq, webhook_id, resource_id, state, attempts, next_attempt_at,
            created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 1, 0, 0, 0)",
    )
    .bind(format!("delivery-{seq}"))
    .bind(seq)
    .bind(webhook)
    .bind(format!("resource-{seq}"))
    .bind(state)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, duration_ms)
         VALUES ($1, 1, 0, 200, 5)",
    )
    .bind(format!("delivery-{seq}"))
    .execute(&mut conn)
    .await
    .unwrap();
}

async fn remaining(url: &str) -> (Vec<i64>, i64) {
    let mut conn = AnyConnection::connect(url).await.unwrap();
    let seqs: Vec<i64> =
        sqlx::query_scalar("SELECT seq FROM events ORDER BY seq").fetch_all(&mut conn).await.unwrap();
    let deliveries: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM deliveries").fetch_one(&mut conn).await.unwrap();
    (seqs, deliveries)
}

#[tokio::test]
async fn the_purge_keeps_what_a_sink_or_a_webhook_has_not_taken() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        create_bare_organization(store, "acme", None).await.unwrap();
        let webhook =
            common::webhook(store, "acme", ("https://receiver.example/hook", ""), "whsec_x").await.id;
        // Events 1..=10 are 40 days old, 11 and 12 a day old.
        events(&db.url, 12, |seq| if seq <= 10 { 40 * DAY } else { DAY }).await;
        for seq in 1..=5 {
            delivery(&db.url, seq, &webhook, "DELIVERED").await;
        }
        delivery(&db.url, 6, &webhook, "PENDING").await;
        delivery(&db.url, 7, &webhook, "FAILED").await;
        // A sink that has taken events up to 8.
        let lease = 60_000_000;
        assert_eq!(take_sink(store, "nats", "instance-a", lease).await.unwrap(), Some(0));
        assert!(advance_sink(store, "nats", "instance-a", 8, lease).await.unwrap());
        assert!(
            !advance_sink(store, "nats", "instance-b", 9, lease).await.unwrap(),
            "only the holder moves it"
        );
        assert_eq!(take_sink(store, "nats", "instance-b", lease).await.unwrap(), None, "held");

        let cutoff = now_micros() - 30 * DAY;
        assert_eq!(purge_events(store, cutoff).await.unwrap(), 5, "{backend:?}: up to the owed delivery");
        let (seqs, deliveries) = remaining(&db.url).await;
        assert_eq!(seqs, (6..=12).collect::<Vec<_>>());
        assert_eq!(deliveries, 2, "the purged events' deliveries went with them");

        // The webhook took event 6 (delivered): the sink's cursor bounds it now.
        let mut conn = AnyConnection::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE deliveries SET state = 'DELIVERED' WHERE event_seq = 6")
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(purge_events(store, cutoff).await.unwrap(), 3);
        assert_eq!(remaining(&db.url).await.0, (9..=12).collect::<Vec<_>>());

        // Without the sink, only the retention bounds it: 11 and 12 stay.
        let refused = remove_sink(store, "nats").await.unwrap_err().to_string();
        assert!(refused.contains("running on instance-a"), "{refused}");
        release_sink(store, "nats", "instance-a").await.unwrap();
        assert!(remove_sink(store, "nats").await.unwrap());
        assert!(!remove_sink(store, "nats").await.unwrap());
        assert_eq!(purge_events(store, cutoff).await.unwrap(), 2);
        assert_eq!(remaining(&db.url).await, (vec![11, 12], 0));
        assert_eq!(purge_events(store, cutoff).await.unwrap(), 0);
    }
}

#[test]
fn operators_list_sinks_and_purge_from_the_command_line() {
    let env = Env::with_chain_file("");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = env.store().await;
        events(&env.database_url, 3, |_| 40 * DAY).await;
        take_sink(&store, "nats", "instance-a", 60_000_000).await.unwrap();
        advance_sink(&store, "nats", "instance-a", 1, 60_000_000).await.unwrap();
    });
    let listed = env.ok(&["events", "sinks"]);
    assert!(listed.contains("nats  last event 1  2 behind  held by instance-a"), "{listed}");
    let json: serde_json::Value = serde_json::from_str(&env.ok(&["events", "sinks", "--json"])).unwrap();
    assert_eq!(json[0]["behind"], 2);
    assert_eq!(env.ok(&["events", "purge", "--older-than", "30d"]).trim(), "removed 1 event");
    let refused = env.output(&["events", "remove-sink", "kafka"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no sink named \"kafka\""));
    let held = env.output(&["events", "remove-sink", "nats"]);
    assert!(!held.status.success(), "a running sink is not removed");
    assert!(String::from_utf8_lossy(&held.stderr).contains("is running on instance-a"));
    runtime.block_on(async { release_sink(&env.store().await, "nats", "instance-a").await.unwrap() });
    assert_eq!(env.ok(&["events", "remove-sink", "nats"]).trim(), "removed sink nats");
    assert_eq!(env.ok(&["events", "purge", "--older-than", "30d"]).trim(), "removed 2 events");
    assert_eq!(env.ok(&["events", "sinks"]).trim(), "no sinks");
    let bad = env.output(&["events", "purge", "--older-than", "a month"]);
    assert!(!bad.status.success());
}
