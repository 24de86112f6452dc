//! What a compliance round costs the store, on SQLite and PostgreSQL: with
//! a thousand identities waiting on their clients (an open RFI), a round
//! reads only what is due, in a few statements, not one per identity; and a
//! waiting identity that changes is reviewed again at once.
//!
//! Statements are counted from sqlx's `sqlx::query` events inside this
//! test's own span: the other tests of the binary run at the same time, and
//! sqlx's SQLite worker enters the span of the task that sent the statement.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{
    api::kyc,
    db::{BACKENDS, TestDb},
};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::{
    identity::{State, Type, provider},
    store::{NewIdentity, Store},
};
use tracing::Instrument;
use tracing_subscriber::{Layer, layer::SubscriberExt, registry::LookupSpan};

static STATEMENTS: AtomicUsize = AtomicUsize::new(0);

struct Counter;

/// The span a counted round runs in.
const ROUND: &str = "compliance_round";

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Counter {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let in_round =
            || ctx.event_scope(event).is_some_and(|mut scope| scope.any(|span| span.name() == ROUND));
        if event.metadata().target() == "sqlx::query" && in_round() {
            STATEMENTS.fetch_add(1, Ordering::SeqCst);
        }
    }
}

const WAITING: usize = 1_000;

/// The statements one round of the sandbox provider runs.
async fn round(store: &Store) -> usize {
    let before = STATEMENTS.load(Ordering::SeqCst);
    let sandbox = provider::Sandbox::new(std::time::Duration::from_secs(3600));
    provider::round(store, &sandbox, 100).instrument(tracing::info_span!(ROUND)).await.unwrap();
    STATEMENTS.load(Ordering::SeqCst) - before
}

async fn status(store: &Store, id: &str) -> String {
    let identity = store.identity("acme", id).await.unwrap();
    format!("{}/{}", identity.status, identity.sub_status.map(|s| s.to_string()).unwrap_or_default())
}

#[tokio::test]
async fn a_round_over_identities_waiting_on_their_clients_reads_only_what_is_due() {
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Counter)).unwrap();
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        custody_indexer::operators::tenants::create_bare_organization(store, "acme", None).await.unwrap();
        for n in 0..WAITING {
            let new = NewIdentity {
                organization: "acme".into(),
                id: format!("identity-{n:04}"),
                request_id: None,
                kind: Type::Individual,
                label: format!("applicant {n}").into(),
                state: State::CREATED,
                actor: "test".into(),
            };
            custody_indexer::identity::register::create_identity(store, &new).await.unwrap();
            lifecycle::submit(store, "acme", &new.id, &kyc("Rfi")).await.unwrap();
        }
        // The first round raises an RFI on each; then every one waits on its client.
        round(store).await;
        assert_eq!(status(store, "identity-0000").await, "PENDING_ONBOARDING/RFI_REQUIRED");
        let first_wait = round(store).await;
        let idle = round(store).await;
        eprintln!(
            "{backend:?}: {WAITING} waiting identities: {first_wait} statements, then {idle} per round"
        );
        assert!(idle <= 3, "{backend:?}: an idle round ran {idle} statements");

        // An answered RFI is reviewed at the next round.
        lifecycle::submit(store, "acme", "identity-0500", &kyc("Lovelace")).await.unwrap();
        let answered = round(store).await;
        eprintln!("{backend:?}: a round with one answered RFI: {answered} statements");
        assert!(answered < 20, "{backend:?}: {answered} statements");
        // The positive control: the counter sees a round's statements (an
        // answered RFI is read and written), so the bounds above are not
        // met by counting nothing.
        assert!(answered >= 2, "{backend:?}: the counter saw {answered} statements of a review");
        assert_eq!(status(store, "identity-0500").await, "PENDING_ONBOARDING/COMPLIANCE_CHECKS_IN_PROGRESS");
        assert_eq!(status(store, "identity-0499").await, "PENDING_ONBOARDING/RFI_REQUIRED");
    }
}
