//! On PostgreSQL a delivery worker claims an event the moment any process
//! commits it, whatever its kind, without waiting for its poll, even when
//! the writer's clock runs ahead of the database's; and a retry waits its
//! backoff by the database's clock.

use crate::common;

use std::time::Duration;

use common::{
    db::{Backend, TestDb},
    eventually,
    receiver::Receiver,
};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::identity::change::Change;
use custody_indexer::{
    events::{
        delivery::{self, DeliveryConfig},
        signing::Secret,
        url::Policy,
    },
    identity::Event,
    store::Store,
};
use sqlx::{Connection, Executor, PgConnection};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn an_event_committed_by_another_process_is_delivered_without_waiting_for_the_poll() {
    let db = TestDb::new(Backend::Postgres).await;
    suspension_is_delivered_at_once(&db.url, &db.store).await;
}

#[tokio::test]
async fn a_writer_whose_clock_runs_ahead_of_the_database_still_wakes_the_worker() {
    let db = TestDb::new(Backend::Postgres).await;
    let writer = with_clock_an_hour_behind(&db).await;
    suspension_is_delivered_at_once(&db.url, &writer).await;
}

#[tokio::test]
async fn a_retry_waits_its_backoff_by_the_database_clock_not_the_workers() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = with_clock_an_hour_behind(&db).await;
    let receiver = Receiver::start().await;
    common::webhook(&store, "default", (&receiver.url, "ledger"), Secret::generate().expose()).await;
    receiver.fail_next(1, 500);
    let config = DeliveryConfig {
        schedule: vec![Duration::from_secs(1)],
        policy: Policy::PRIVATE,
        ..DeliveryConfig::default()
    };
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(delivery::run(store.clone(), config, shutdown.clone()));
    suspend_an_identity(&store).await;
    // A worker whose clock is an hour ahead would have put the retry an hour away.
    eventually(Duration::from_secs(15), "the event delivered at its retry, a second later", || async {
        (receiver.received().len() == 2 && receiver.delivered().len() == 1).then_some(())
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap();
}

/// A store of `db`, whose connections from now on read a database clock an
/// hour behind the instances' own: `clock_timestamp()` resolves to a
/// function of the test's first.
async fn with_clock_an_hour_behind(db: &TestDb) -> Store {
    let mut admin = PgConnection::connect(&db.url).await.unwrap();
    let database: String =
        sqlx::query_scalar("SELECT current_database()").fetch_one(&mut admin).await.unwrap();
    let statements = [
        "CREATE SCHEMA slow_clock".to_string(),
        "CREATE FUNCTION slow_clock.clock_timestamp() RETURNS timestamptz LANGUAGE sql \
         AS $$ SELECT pg_catalog.clock_timestamp() - interval '1 hour' $$"
            .to_string(),
        format!("ALTER DATABASE {database} SET search_path = public, slow_clock, pg_catalog"),
    ];
    for statement in statements {
        admin.execute(statement.as_str()).await.unwrap();
    }
    admin.close().await.unwrap();
    let mut probe = PgConnection::connect(&db.url).await.unwrap();
    let behind: f64 =
        sqlx::query_scalar("SELECT CAST(EXTRACT(EPOCH FROM now() - clock_timestamp()) AS float8)")
            .fetch_one(&mut probe)
            .await
            .unwrap();
    assert!(behind > 3_500.0, "the database's clock is an hour behind: {behind} s");
    common::db::unlocked(&Store::open(&db.url).await.unwrap()).await
}

/// A worker of its own process, polling once a minute, gets the event of an
/// identity that `writer` suspends within seconds.
async fn suspension_is_delivered_at_once(url: &str, writer: &Store) {
    let receiver = Receiver::start().await;
    let secret = Secret::generate();
    common::webhook(writer, "default", (&receiver.url, "ledger"), secret.expose()).await;
    let worker_store = common::db::unlocked(&Store::open(url).await.unwrap()).await;
    let config = DeliveryConfig {
        poll: Duration::from_secs(60),
        policy: Policy::PRIVATE,
        ..DeliveryConfig::default()
    };
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(delivery::run(worker_store, config, shutdown.clone()));
    // Its first claim finds nothing: the next is a minute away.
    idle_and_listening(url).await;
    // Another process suspends an identity: an event that is not a deposit's.
    suspend_an_identity(writer).await;
    let suspended = || receiver.received().iter().any(|r| r.json()["type"] == "identity_status_update");
    eventually(Duration::from_secs(10), "the identity's event delivered before the poll", || async {
        suspended().then_some(())
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap();
}

/// Waits until the worker on `url`'s database listens for the outbox and
/// has finished a claim that found nothing (its connections' last
/// statements, as PostgreSQL shows them): from then on its next claim is a
/// poll away, and only a wake finds an event committed now.
async fn idle_and_listening(url: &str) {
    let probe = sqlx::PgPool::connect(url).await.unwrap();
    let sql = "SELECT COALESCE(state, ''), query FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid()";
    eventually(Duration::from_secs(30), "the worker listening, its first claim done", || async {
        let rows: Vec<(String, String)> = sqlx::query_as(sql).fetch_all(&probe).await.unwrap();
        let listening = rows.iter().any(|(_, query)| query.trim_start().starts_with("LISTEN"));
        let claimed = rows.iter().any(|(state, query)| {
            state == "idle" && query.contains("FROM deliveries WHERE state = 'PENDING'")
        });
        (listening && claimed).then_some(())
    })
    .await;
    probe.close().await;
}

/// Creates an identity and suspends it: one `identity_status_update` event.
async fn suspend_an_identity(store: &Store) {
    common::identity(store, "default", "identity-1").await;
    let suspend = Change {
        organization: "default",
        identity_id: "identity-1",
        event: Event::Suspended,
        actor: "operator:test",
        reason: None,
        decider: None,
    };
    lifecycle::change(store, &suspend, &|_| unreachable!("no transfers")).await.unwrap();
}
