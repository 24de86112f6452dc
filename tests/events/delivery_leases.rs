//! Webhook deliveries under several delivery workers on one PostgreSQL, with
//! receivers so slow that a claimed batch takes longer to send than the
//! claim's first lease: every attempt is still sent by one worker only;
//! leases run on the database's clock, whatever the workers' clocks say.

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use common::{
    db::{Backend, TestDb, pending_deliveries},
    eventually,
    receiver::Receiver,
};
use custody_indexer::{
    events::{
        claims::{claim_deliveries, finish_attempts},
        delivery::{self, DeliveryConfig},
        signing::Secret,
        url::Policy,
    },
    operators::tenants::create_bare_organization,
    store::{Attempt, Claimed, Clock, Finished, Outcome, Rooms, now_micros},
};
use tokio_util::sync::CancellationToken;

const EVENTS: usize = 24;

/// Two workers, two in flight each with a 4 s timeout, and a receiver that
/// answers after 3.6 s, near the timeout: each event must arrive exactly
/// once and each delivery record one attempt.
#[tokio::test]
async fn slow_receivers_get_each_attempt_from_one_worker() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = &db.store;
    create_bare_organization(store, "acme", None).await.unwrap();
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_millis(3600));
    let secret = Secret::generate().expose().to_string();
    let webhook = common::webhook(store, "acme", (&receiver.url, "ledger"), &secret).await;
    pending_deliveries(&db.url, "acme", &webhook.id, EVENTS).await;

    let config = DeliveryConfig {
        concurrency: 2,
        per_organization: 2,
        timeout: Duration::from_secs(4),
        schedule: vec![Duration::from_secs(1)],
        poll: Duration::from_millis(100),
        policy: Policy::PRIVATE,
    };
    let shutdown = CancellationToken::new();
    let workers: Vec<_> = (0..2)
        .map(|_| tokio::spawn(delivery::run(store.clone(), config.clone(), shutdown.clone())))
        .collect();
    eventually(Duration::from_secs(120), "every delivery done", || async {
        let deliveries = store.deliveries(false, None).await.unwrap();
        deliveries.iter().all(|d| d.state == "DELIVERED").then_some(())
    })
    .await;
    shutdown.cancel();
    for worker in workers {
        worker.await.unwrap();
    }

    let mut receipts: BTreeMap<String, usize> = BTreeMap::new();
    for received in receiver.received() {
        assert!(received.signed_by(&secret));
        *receipts.entry(received.id).or_default() += 1;
    }
    let twice: Vec<_> = receipts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "events received more than once: {twice:?}");
    assert_eq!(receipts.len(), EVENTS, "every event arrived");
    for delivery in store.deliveries(false, None).await.unwrap() {
        let attempts = store.delivery_attempts(&delivery.id).await.unwrap();
        assert_eq!(attempts.len(), 1, "{}: {attempts:?}", delivery.id);
    }
}

/// Delivery workers on one PostgreSQL whose clocks disagree by an hour: a
/// claim's lease runs on the database's clock, so a worker whose clock is
/// ahead claims nothing another worker holds, and one whose clock is behind
/// records nothing once its lease lapsed and another worker took it.
#[tokio::test]
async fn delivery_leases_lapse_by_the_databases_clock_not_a_workers() {
    const HOUR: i64 = 3_600_000_000;
    let db = TestDb::new(Backend::Postgres).await;
    create_bare_organization(&db.store, "acme", None).await.unwrap();
    let secret = Secret::generate().expose().to_string();
    let webhook = common::webhook(&db.store, "acme", ("https://receiver.test/", "ledger"), &secret).await;
    pending_deliveries(&db.url, "acme", &webhook.id, 1).await;
    let slow = db.store.with_clock(Clock::skewed(-HOUR));
    let fast = db.store.with_clock(Clock::skewed(HOUR));
    let rooms = Rooms::even(8);

    let claimed = claim_deliveries(&slow, "a", 2_000_000, 8, &rooms).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(
        claim_deliveries(&fast, "b", 60_000_000, 8, &rooms).await.unwrap().is_empty(),
        "the lease is live"
    );

    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let taken = claim_deliveries(&fast, "b", 60_000_000, 8, &rooms).await.unwrap();
    assert_eq!(taken.iter().map(|c| c.delivery_id.as_str()).collect::<Vec<_>>(), ["delivery-1"]);
    let attempt = |claimed: &Claimed| Finished {
        claimed: claimed.clone(),
        attempt: Attempt { at: now_micros(), status_code: Some(204), error: None, duration_ms: 1 },
        outcome: Outcome::Delivered,
    };
    assert!(
        finish_attempts(&slow, "a", &[attempt(&claimed[0])]).await.unwrap().is_empty(),
        "a's lease was lost"
    );
    assert_eq!(finish_attempts(&fast, "b", &[attempt(&taken[0])]).await.unwrap(), ["delivery-1"]);
    assert_eq!(db.store.delivery_attempts("delivery-1").await.unwrap().len(), 1, "one attempt recorded");
}
