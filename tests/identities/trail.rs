//! An identity's trail and the audit log are one history: on both stores,
//! trail entries written before the log existed are adopted once (linked to
//! the log's entry of their decision when it has one, appended with their
//! recorded actor when it has none), and `identities show` names the log's
//! actor.

use crate::common;

use common::db::{BACKENDS, TestDb, unlocked};
use custody_indexer::{
    audit::{Actor, chain},
    config::Chains,
    identity::{decide, trail},
};

#[tokio::test]
async fn trail_entries_from_before_the_log_are_adopted_once_and_never_twice() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = unlocked(&db.store).await;
        // Registered the way an older release did: a trail entry alone.
        common::identity(&store, "default", "ada").await;
        let cleo = Actor::Operator { id: "op_0123456789abcdef0123456789abcdef".into(), name: "Cleo".into() };
        let chains = Chains::default();
        let ada = ("default", "ada");
        decide::decide(&store, &chains, ada, decide::Decision::Suspend, &cleo, "fraud report").await.unwrap();
        decide::decide(&store, &chains, ada, decide::Decision::Reinstate, &cleo, "withdrawn").await.unwrap();
        // An older release logged the reinstatement but did not link it.
        let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE identity_actions SET audit_seq = NULL WHERE event = 'Reinstated'")
            .execute(&pool)
            .await
            .unwrap();

        assert_eq!(trail::adopt(&store).await.unwrap(), 2, "{backend:?}: Registered and Reinstated");
        assert_eq!(trail::adopt(&store).await.unwrap(), 0, "{backend:?}: adopted once");
        let log = store.audit_entries(0, Some("default"), 100).await.unwrap();
        let entries: Vec<_> = log.iter().map(|e| (e.action.as_str(), e.actor.as_str())).collect();
        let cleo_actor = "operator:op_0123456789abcdef0123456789abcdef";
        assert_eq!(
            entries,
            [
                ("identity.suspended", cleo_actor),
                ("identity.reinstated", cleo_actor),
                ("identity.registered", "trail:operator:test")
            ],
            "{backend:?}: the reinstatement claimed, not logged twice; the registration appended as recorded"
        );

        let history = store.identity_actions("default", "ada").await.unwrap();
        let shown: Vec<_> =
            history.iter().map(|a| (a.event.as_str(), a.actor.as_str(), a.audit_seq)).collect();
        let named = format!("{cleo_actor} (Cleo)");
        assert_eq!(
            shown,
            [
                ("Registered", "trail:operator:test", Some(log[2].seq)),
                ("Suspended", named.as_str(), Some(log[0].seq)),
                ("Reinstated", named.as_str(), Some(log[1].seq))
            ],
            "{backend:?}"
        );
        let (seq, hash) = store.audit_head().await.unwrap();
        assert_eq!(chain::verify(&log, Some((seq, &hash))), Ok(3), "{backend:?}");
    }
}
