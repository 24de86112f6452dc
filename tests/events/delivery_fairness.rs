//! Deliveries shared out among organizations, on SQLite and PostgreSQL: an
//! organization whose receiver hangs, with a backlog queued before anyone
//! else's events, holds its share of the worker's slots and no more, and
//! another organization's deliveries go out beside it.

use crate::common;

use std::time::Duration;

use common::{
    db::{BACKENDS, TestDb, pending_deliveries_from},
    eventually,
    receiver::Receiver,
};
use custody_indexer::events::{
    delivery::{self, DeliveryConfig},
    signing::Secret,
    url::Policy,
};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_hanging_receiver_holds_its_share_and_the_others_are_delivered() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        let secret = Secret::generate().expose().to_string();
        let (hanging, answering) = (Receiver::start().await, Receiver::start().await);
        hanging.delay(Duration::from_secs(600));
        for (organization, receiver) in [("stuck", &hanging), ("steady", &answering)] {
            custody_indexer::operators::tenants::create_bare_organization(store, organization, None)
                .await
                .unwrap();
            common::webhook(store, organization, (&receiver.url, "ledger"), &secret).await;
        }
        let webhooks = store.webhooks(None).await.unwrap();
        let id =
            |organization: &str| webhooks.iter().find(|w| w.organization == organization).unwrap().id.clone();
        // The stuck organization's backlog is older: oldest first alone
        // would give it every slot.
        pending_deliveries_from(&db.url, "stuck", &id("stuck"), 1, 200).await;
        pending_deliveries_from(&db.url, "steady", &id("steady"), 201, 20).await;

        let config = DeliveryConfig {
            concurrency: 8,
            per_organization: 2,
            timeout: Duration::from_secs(300),
            poll: Duration::from_millis(50),
            policy: Policy::PRIVATE,
            ..DeliveryConfig::default()
        };
        let shutdown = CancellationToken::new();
        let worker = tokio::spawn(delivery::run(store.clone(), config, shutdown.clone()));
        eventually(Duration::from_secs(60), "the steady organization's events delivered", || async {
            (answering.delivered().len() == 20).then_some(())
        })
        .await;
        assert_eq!(hanging.arrived(), 2, "{backend:?}: the stuck organization holds its share of the slots");
        eventually(Duration::from_secs(10), "the steady organization's attempts recorded", || async {
            let deliveries = store.deliveries(false, Some(&id("steady"))).await.unwrap();
            deliveries.iter().all(|d| d.state == "DELIVERED").then_some(())
        })
        .await;
        worker.abort();
    }
}
