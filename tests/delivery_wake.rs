//! On PostgreSQL a delivery worker claims an event the moment any process
//! commits it, whatever its kind, without waiting for its poll.

mod common;

use std::time::Duration;

use common::{
    db::{Backend, TestDb},
    eventually,
    receiver::Receiver,
};
use custody_indexer::{
    events::{
        delivery::{self, DeliveryConfig},
        signing::Secret,
        url::Policy,
    },
    identity::Event,
    store::{Change, Store},
};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn an_event_committed_by_another_process_is_delivered_without_waiting_for_the_poll() {
    let db = TestDb::new(Backend::Postgres).await;
    let receiver = Receiver::start().await;
    let secret = Secret::generate();
    db.store.create_webhook("default", &receiver.url, "ledger", secret.expose()).await.unwrap();
    // The worker's process: a store of its own, polling once a minute.
    let worker_store = common::db::unlocked(&Store::open(&db.url).await.unwrap()).await;
    let config = DeliveryConfig {
        poll: Duration::from_secs(60),
        policy: Policy { allow_private: true },
        ..DeliveryConfig::default()
    };
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(delivery::run(worker_store, config, shutdown.clone()));
    // Its first claim finds nothing: the next is a minute away.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Another process suspends an identity: an event that is not a deposit's.
    common::identity(&db.store, "default", "identity-1").await;
    let suspend = Change {
        organization: "default",
        identity_id: "identity-1",
        event: Event::Suspended,
        actor: "operator:test",
        reason: None,
    };
    let unsent = |_| unreachable!("no transfers");
    db.store.change_identity(&suspend, &unsent).await.unwrap();
    let suspended = || receiver.received().iter().any(|r| r.json()["type"] == "identity_status_update");
    eventually(Duration::from_secs(10), "the identity's event delivered before the poll", || async {
        suspended().then_some(())
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap();
}
