//! The NATS JetStream sink against real nats-servers of the tests' own:
//! every event of the outbox arrives once, each resource's events in
//! order, through a server killed in the middle of a burst, a sink
//! instance killed between publishing and moving its cursor, a `run`
//! started while NATS was down, and a stream that does not take the
//! events until it is corrected.

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    process::Stdio,
    time::Duration,
};

use alloy::primitives::U256;
use common::{
    Anvil, CHAIN, chain_toml,
    cli::{Env, Process, terminate},
    db::{BACKENDS, Backend, TestDb},
    eventually,
    nats::NatsServer,
    nats_proxy::LossyProxy,
};
use custody_indexer::{
    deposits::resource::DepositStatus,
    events::{
        nats::{self, NatsConfig},
        subject::{STREAM, subject},
    },
    store::{OutboxEvent, Store},
};
use sqlx::{AnyConnection, Connection};
use tokio_util::sync::CancellationToken;

/// Events `first..first + count`, each of one of `resources` resources in
/// turn, alternating between two organizations (one whose id is not a
/// subject token) and two event types, committed as the outbox holds them.
async fn append(url: &str, first: i64, count: i64, resources: i64) -> Vec<OutboxEvent> {
    let mut conn = AnyConnection::connect(url).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let mut events = Vec::new();
    for seq in first..first + count {
        let organization = if seq % 2 == 0 { "acme" } else { "acme.eu" };
        let kind = if seq % 3 == 0 { "crypto_transfer_updated" } else { "deposit_v2" };
        let (id, resource) = (format!("event-{seq}"), format!("resource-{}", seq % resources));
        let payload = serde_json::json!({ "id": id, "type": kind, "data": { "id": resource, "n": seq } });
        let event = OutboxEvent {
            seq,
            id,
            organization: organization.into(),
            kind: kind.into(),
            resource_id: resource,
            payload: payload.to_string(),
        };
        sqlx::query(
            "INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(seq)
        .bind(&event.id)
        .bind(&event.organization)
        .bind(&event.kind)
        .bind(&event.resource_id)
        .bind(&event.payload)
        .bind(custody_indexer::store::now_micros())
        .execute(&mut *tx)
        .await
        .unwrap();
        events.push(event);
    }
    tx.commit().await.unwrap();
    events
}

fn config(url: &str) -> NatsConfig {
    NatsConfig {
        batch: 200,
        poll: Duration::from_millis(20),
        lease: Duration::from_secs(2),
        ack_timeout: Duration::from_secs(2),
        ..NatsConfig::new(url.parse().unwrap())
    }
}

fn sink(store: &Store, url: &str, owner: &str, shutdown: &CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(nats::run(store.clone(), config(url), owner.into(), shutdown.clone()))
}

async fn stream_holds(server: &NatsServer, count: u64, what: &str) {
    eventually(Duration::from_secs(90), what, || async { (server.count().await >= count).then_some(()) })
        .await;
}

/// What a consumer checks: the stream holds every event exactly once, under
/// its subject, with its envelope as body and its id as `Nats-Msg-Id`, and
/// each resource's events in commit order.
async fn assert_arrived(server: &NatsServer, events: &[OutboxEvent]) {
    let messages = server.messages().await;
    let expected: HashMap<&str, &OutboxEvent> = events.iter().map(|e| (e.id.as_str(), e)).collect();
    let ids: BTreeSet<&str> = messages.iter().map(|(_, id, _)| id.as_str()).collect();
    assert_eq!(messages.len(), events.len(), "one message per event, no duplicate");
    assert_eq!(ids.len(), events.len(), "every event once");
    let mut last_of: BTreeMap<&str, i64> = BTreeMap::new();
    for (subject_of, id, body) in &messages {
        let event = expected.get(id.as_str()).unwrap_or_else(|| panic!("unknown message {id}"));
        assert_eq!(subject_of, &subject(&event.organization, &event.kind));
        assert_eq!(body, &event.payload, "the body is the webhook's envelope");
        let last = last_of.insert(&event.resource_id, event.seq);
        assert!(last < Some(event.seq), "{} arrived after a later event of {}", id, event.resource_id);
    }
    assert!(messages.iter().any(|(s, _, _)| s == "custody.events.acme%2Eeu.deposit_v2"));
}

#[tokio::test]
async fn a_burst_arrives_once_and_in_order_through_a_server_killed_mid_burst() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let mut server = NatsServer::start().await;
        let shutdown = CancellationToken::new();
        let task = sink(&db.store, &server.url(), "instance-a", &shutdown);
        // 5,000 events committed 50 at a time, every 10 ms, over 40 resources.
        let url = db.url.clone();
        let burst = tokio::spawn(async move {
            let mut events = Vec::new();
            for chunk in 0..100 {
                events.extend(append(&url, 1 + chunk * 50, 50, 40).await);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            events
        });
        stream_holds(&server, 1_000, "the first events published").await;
        server.kill();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.restart().await;
        let events = burst.await.unwrap();
        stream_holds(&server, 5_000, "every event published").await;
        shutdown.cancel();
        task.await.unwrap();
        assert_arrived(&server, &events).await;
        let sinks = db.store.sinks().await.unwrap();
        assert_eq!((sinks[0].name.as_str(), sinks[0].last_seq, sinks[0].behind), ("nats", 5_000, 0));
        assert_eq!(sinks[0].lease_owner, None, "{backend:?}: released at shutdown");
    }
}

#[tokio::test]
async fn a_sink_killed_before_moving_its_cursor_is_taken_over_without_loss_or_disorder() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = NatsServer::start().await;
    let events = append(&db.url, 1, 4_000, 25).await;
    let shutdown = CancellationToken::new();
    let first = sink(&db.store, &server.url(), "instance-a", &shutdown);
    let second = sink(&db.store, &server.url(), "instance-b", &shutdown);
    stream_holds(&server, 1_000, "the first events published").await;
    // Whichever holds the sink dies wherever it is: mid-batch, or between
    // the acknowledgements and the cursor's move. It releases nothing.
    let holder = db.store.sinks().await.unwrap()[0].lease_owner.clone().expect("held");
    let (dead, alive) = if holder == "instance-a" { (first, second) } else { (second, first) };
    dead.abort();
    let _ = dead.await;
    assert!(server.count().await < 4_000, "the holder must die with events left to publish");
    stream_holds(&server, 4_000, "the other instance to publish the rest").await;
    shutdown.cancel();
    alive.await.unwrap();
    assert_arrived(&server, &events).await;
    let sinks = db.store.sinks().await.unwrap();
    assert_eq!(sinks[0].last_seq, 4_000);
}

/// Messages lost between the sink and the server while the ones sent after
/// them arrive (as when a connection breaks under a client's buffered
/// writes): each is published again, and no later event of its resource is
/// stored before it.
#[tokio::test]
async fn a_message_lost_in_transit_is_sent_again_before_its_resource_moves_on() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = NatsServer::start().await;
    let proxy = LossyProxy::start(server.port, vec![10, 11, 50, 120]).await;
    let events = append(&db.url, 1, 300, 3).await;
    let shutdown = CancellationToken::new();
    let config = NatsConfig { ack_timeout: Duration::from_secs(1), ..config(&proxy.url()) };
    let task = tokio::spawn(nats::run(db.store.clone(), config, "instance-a".into(), shutdown.clone()));
    stream_holds(&server, 300, "every event published").await;
    shutdown.cancel();
    task.await.unwrap();
    assert_eq!(proxy.lost.load(std::sync::atomic::Ordering::SeqCst), 4, "the messages were lost");
    assert_arrived(&server, &events).await;
}

/// `run --nats-url` while nothing listens there: it indexes deposits and
/// serves as ever; once NATS is up, every event the outbox holds arrives,
/// exactly as the pull API serves it.
#[tokio::test]
async fn run_indexes_while_nats_is_down_and_publishes_when_it_returns() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let alice = anvil.accounts[1];
    env.add_account("alice", &alice.to_string(), CHAIN);
    let store = env.store().await;
    let mut server = NatsServer::stopped();
    let log = std::fs::File::create(env.dir.path().join("run.log")).unwrap();
    let mut run = Process(
        env.command(&["run", "--chain", CHAIN.as_str(), "--nats-url", &server.url()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    for i in 0..10u64 {
        anvil.send_eth(anvil.accounts[0], alice, U256::from(1_000 + i)).await;
    }
    anvil.mine(70).await;
    eventually(Duration::from_secs(90), "ten confirmed deposits", || {
        let store = store.clone();
        async move {
            let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
            (deposits.len() == 10 && deposits.iter().all(|d| d.status == DepositStatus::Confirmed))
                .then_some(())
        }
    })
    .await;
    let served = store.events_after("default", None, 100).await.unwrap();
    assert!(served.len() >= 10, "{served:?}");
    assert_eq!(server.count().await, 0, "nothing could be published yet");
    assert_eq!(store.sinks().await.unwrap()[0].last_seq, 0);
    let log_path = env.dir.path().join("run.log");
    eventually(Duration::from_secs(30), "the outage logged", || async {
        std::fs::read_to_string(&log_path).unwrap().contains("NATS sink cannot publish").then_some(())
    })
    .await;

    server.restart().await;
    let published = tokio::time::timeout(Duration::from_secs(90), async {
        while server.count().await < served.len() as u64 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        published.is_ok(),
        "the outbox was not published within 90 s of NATS being up; run's log:\n{}",
        std::fs::read_to_string(&log_path).unwrap()
    );
    let messages = server.messages().await;
    let bodies: Vec<serde_json::Value> =
        messages.iter().map(|(_, _, body)| serde_json::from_str(body).unwrap()).collect();
    let envelopes: Vec<serde_json::Value> = served.iter().map(|e| e.envelope.clone()).collect();
    assert_eq!(bodies, envelopes, "the stream holds the pull API's events, in its order");
    assert!(messages.iter().all(|(s, id, _)| s == "custody.events.default.deposit_v2" && !id.is_empty()));
    let status = terminate(&mut run);
    assert!(status.success(), "SIGTERM stops run cleanly: {status}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(log.matches("NATS sink cannot publish").count(), 1, "the outage is logged once: {log}");
    assert!(log.contains("NATS sink publishing again"), "{log}");
    assert!(!log.contains("IO error"), "the client's reconnection attempts are not logged: {log}");
}

/// A stream an operator made that does not take the sink's subjects: the
/// sink publishes nothing and keeps its cursor, then uses the stream as
/// soon as it is corrected, without a restart.
#[tokio::test]
async fn a_stream_that_does_not_take_the_events_holds_the_sink_until_it_is_corrected() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = NatsServer::start().await;
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut stream_config = async_nats::jetstream::stream::Config {
        name: STREAM.into(),
        subjects: vec!["elsewhere.>".into()],
        ..Default::default()
    };
    js.create_stream(stream_config.clone()).await.unwrap();
    let events = append(&db.url, 1, 300, 7).await;
    let shutdown = CancellationToken::new();
    let task = sink(&db.store, &server.url(), "instance-a", &shutdown);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(server.count().await, 0, "nothing is published to a stream that does not take it");
    let sinks = db.store.sinks().await.unwrap();
    assert_eq!((sinks[0].last_seq, sinks[0].behind), (0, 300), "the cursor stays before every event");
    stream_config.subjects.push("custody.events.>".into());
    js.update_stream(stream_config).await.unwrap();
    stream_holds(&server, 300, "every event published once the stream takes them").await;
    shutdown.cancel();
    task.await.unwrap();
    assert_arrived(&server, &events).await;
}
