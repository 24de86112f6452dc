//! Webhook signing-key rotations in the store, on SQLite and PostgreSQL:
//! every previous key signs until its own expiry, at most two beside the
//! current one, the oldest dropped by a rotation past that; the upgrade
//! that carries a store's one previous key over; and the secrets sealed at
//! rest with the personal-data key.

use crate::common;

use std::time::Duration;

use common::db::{BACKENDS, TestDb, pending_deliveries};
use custody_indexer::{
    events::{claims::claim_deliveries, signing::Secret},
    operators::tenants::create_bare_organization,
    store::{MAX_PREVIOUS_KEYS, Rooms, Store, Webhook},
};

const HOUR: Duration = Duration::from_secs(3600);

/// The secrets a delivery to the webhook would be signed with now, newest first.
async fn signing_secrets(store: &Store) -> Vec<String> {
    // A lease of 1 µs: the delivery is free again for the next claim.
    let claimed = claim_deliveries(store, "test", 1, 1, &Rooms::even(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(claimed.len(), 1);
    let secrets = claimed.into_iter().next().unwrap().secrets.unwrap();
    secrets.into_iter().map(|secret| secret.to_string()).collect()
}

async fn rotate(store: &Store, webhook: &str, overlap: Duration) -> (String, Webhook) {
    let system = custody_indexer::audit::Actor::System;
    let (rotated, secret) =
        custody_indexer::webhooks::rotate(store, Some("acme"), webhook, overlap, &system).await.unwrap();
    (secret.expose().to_string(), rotated)
}

/// How long the first previous key of the rotation test signs.
const K0_LIFE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn previous_keys_sign_until_their_own_expiry_at_most_two_at_a_time() {
    assert_eq!(MAX_PREVIOUS_KEYS, 2);
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        create_bare_organization(store, "acme", None).await.unwrap();
        let k0 = Secret::generate().expose().to_string();
        let webhook = common::webhook(store, "acme", ("https://receiver.test/", "ledger"), &k0).await;
        pending_deliveries(&db.url, "acme", &webhook.id, 1).await;
        assert_eq!(signing_secrets(store).await, [k0.as_str()]);

        // Two rotations: k0 for 10 s (a bound no slow machine reaches before
        // the next assertion), then k1 for an hour; all three sign.
        let (k1, first) = rotate(store, &webhook.id, K0_LIFE).await;
        let (k2, second) = rotate(store, &webhook.id, HOUR).await;
        assert_eq!(signing_secrets(store).await, [k2.as_str(), k1.as_str(), k0.as_str()], "{backend:?}");
        let (first_expiry, latest) =
            (first.previous_key_expires_at.unwrap(), second.previous_key_expires_at.unwrap());
        assert!(
            latest - first_expiry > chrono::Duration::minutes(59),
            "the latest expiry: {first_expiry} {latest}"
        );
        assert_eq!(store.webhook(None, &webhook.id).await.unwrap().previous_key_expires_at, Some(latest));

        // k0 expires on its own at the instant the rotation gave it; k1 signs on.
        let expired = (first_expiry - chrono::Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(expired + Duration::from_millis(100)).await;
        assert_eq!(signing_secrets(store).await, [k2.as_str(), k1.as_str()], "{backend:?}");

        // Two more rotations within k1's hour: k1, still valid, is the
        // oldest of three previous keys and is dropped.
        let (k3, _) = rotate(store, &webhook.id, HOUR).await;
        assert_eq!(signing_secrets(store).await, [k3.as_str(), k2.as_str(), k1.as_str()]);
        let (k4, _) = rotate(store, &webhook.id, HOUR).await;
        assert_eq!(signing_secrets(store).await, [k4.as_str(), k3.as_str(), k2.as_str()], "{backend:?}");

        // Another organization can neither rotate nor see it.
        let other = custody_indexer::webhooks::rotate(
            store,
            Some("other"),
            &webhook.id,
            HOUR,
            &custody_indexer::audit::Actor::System,
        )
        .await
        .unwrap_err();
        assert!(other.to_string().contains("not found"), "{other}");
        custody_indexer::webhooks::delete(store, None, &webhook.id, &custody_indexer::audit::Actor::System)
            .await
            .unwrap();
        assert!(
            custody_indexer::webhooks::rotate(
                store,
                None,
                &webhook.id,
                HOUR,
                &custody_indexer::audit::Actor::System
            )
            .await
            .is_err(),
            "deleted"
        );
    }
}

#[tokio::test]
async fn the_upgrade_keeps_a_stores_previous_key_signing() {
    for backend in BACKENDS {
        let db = TestDb::migrated_before(backend, 22).await;
        let (current, previous) = (Secret::generate(), Secret::generate());
        let expires = custody_indexer::store::now_micros() + 3_600_000_000;
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&db.url).await.unwrap();
        sqlx::query("INSERT INTO organizations (id, name, created_at) VALUES ('acme', 'acme', 0)")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO webhooks (id, organization_id, url, label, status, created_at, signing_key_id,
                signing_secret, signing_key_created_at, previous_secret, previous_key_expires_at)
             VALUES ('w1', 'acme', 'https://receiver.test/', '', 'ACTIVE', 0, 'key-1', $1, 0, $2, $3)",
        )
        .bind(current.expose())
        .bind(previous.expose())
        .bind(expires)
        .execute(&mut conn)
        .await
        .unwrap();
        db.store.migrate().await.unwrap();
        // Opened with the key: the secrets written in plaintext are sealed.
        let store = common::db::unlocked(&db.store).await;
        assert_sealed(&db.url, &[current.expose(), previous.expose()]).await;
        pending_deliveries(&db.url, "acme", "w1", 1).await;
        let webhook = store.webhook(None, "w1").await.unwrap();
        assert_eq!(webhook.previous_key_expires_at.unwrap().timestamp_micros(), expires, "{backend:?}");
        assert_eq!(signing_secrets(&store).await, [current.expose(), previous.expose()]);
        let (newest, _) = rotate(&store, "w1", HOUR).await;
        assert_eq!(signing_secrets(&store).await, [newest.as_str(), current.expose(), previous.expose()]);
        assert_sealed(&db.url, &[newest.as_str(), current.expose(), previous.expose()]).await;
    }
}

/// Every signing secret in the database is sealed, and none of `secrets`
/// appears in any of its columns.
async fn assert_sealed(url: &str, secrets: &[&str]) {
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(url).await.unwrap();
    let stored: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT signing_secret FROM webhooks UNION ALL SELECT previous_secret FROM webhooks
         UNION ALL SELECT secret FROM webhook_previous_keys",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let stored: Vec<String> = stored.into_iter().flatten().collect();
    assert!(!stored.is_empty());
    for value in &stored {
        assert!(value.starts_with("pii1."), "a signing secret in plaintext: {value}");
        for secret in secrets {
            let key = secret.trim_start_matches("whsec_");
            assert!(!value.contains(key), "a signing secret in plaintext");
        }
    }
}

/// The signing secrets are sealed with the personal-data key, each bound to
/// its webhook and key: the database holds none in plaintext, a store opened
/// without the key cannot sign with them, and a sealed secret copied onto
/// another webhook does not open there. Checked against f395c56:
/// `webhooks.signing_secret` and `webhook_previous_keys.secret` held the
/// secrets in plaintext.
#[tokio::test]
async fn signing_secrets_are_sealed_at_rest_and_open_only_where_they_were_sealed() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        create_bare_organization(store, "acme", None).await.unwrap();
        let (k0, other) = (Secret::generate().expose().to_string(), Secret::generate().expose().to_string());
        let webhook = common::webhook(store, "acme", ("https://receiver.test/", "ledger"), &k0).await;
        let second = common::webhook(store, "acme", ("https://receiver.test/b", "b"), &other).await;
        let (k1, _) = rotate(store, &webhook.id, HOUR).await;
        assert_sealed(&db.url, &[&k0, &k1, &other]).await;
        pending_deliveries(&db.url, "acme", &webhook.id, 1).await;
        assert_eq!(signing_secrets(store).await, [k1.as_str(), k0.as_str()], "{backend:?}");

        // A store opened without the key signs nothing.
        let locked = Store::open(&db.url).await.unwrap();
        let refused = claim_deliveries(&locked, "test", 1, 1, &Rooms::even(1)).await.unwrap_err();
        assert!(refused.to_string().contains("CUSTODY_INDEXER_PII_KEY"), "{refused}");
        assert!(
            custody_indexer::webhooks::register(
                &locked,
                "acme",
                ("https://receiver.test/c", "c"),
                &k0,
                &custody_indexer::audit::Actor::System
            )
            .await
            .is_err()
        );

        // The second webhook's sealed secret copied onto the first.
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&db.url).await.unwrap();
        sqlx::query(
            "UPDATE webhooks SET signing_secret = (SELECT signing_secret FROM webhooks WHERE id = $1) WHERE id = $2",
        )
        .bind(&second.id)
        .bind(&webhook.id)
        .execute(&mut conn)
        .await
        .unwrap();
        // That delivery's attempt fails, naming why; nothing else stops.
        let claimed = claim_deliveries(store, "test", 1, 1, &Rooms::even(1)).await.unwrap();
        let unopenable = claimed[0].secrets.as_ref().unwrap_err();
        assert!(unopenable.contains("does not open"), "{unopenable}");
    }
}

#[tokio::test]
async fn a_rotation_on_an_instance_whose_clock_is_behind_keeps_the_key_it_rotated_out() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        create_bare_organization(store, "acme", None).await.unwrap();
        let k0 = Secret::generate().expose().to_string();
        let webhook = common::webhook(store, "acme", ("https://receiver.test/", "ledger"), &k0).await;
        pending_deliveries(&db.url, "acme", &webhook.id, 1).await;
        let (k1, _) = rotate(store, &webhook.id, HOUR).await;
        let (k2, _) = rotate(store, &webhook.id, HOUR).await;
        // Both rotations as an instance a minute ahead recorded them.
        let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE webhook_previous_keys SET rotated_at = rotated_at + 60000000")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        // This instance rotates k2 out: k2 is the newest previous key, k0 the
        // one dropped.
        let (k3, _) = rotate(store, &webhook.id, HOUR).await;
        assert_eq!(signing_secrets(store).await, [k3.as_str(), k2.as_str(), k1.as_str()], "{backend:?}");
    }
}

/// A key that leaked is revoked at once through the API, not 24 hours
/// later; another organization cannot revoke it.
#[tokio::test]
async fn rotated_out_keys_are_revoked_at_once_through_the_api() {
    for backend in BACKENDS {
        let app = common::api::spawn_app(
            backend,
            custody_indexer::config::Chains::load(None).unwrap(),
            Default::default(),
        )
        .await;
        let (acme, other) = (app.key("acme").await, app.key("other").await);
        let hook = serde_json::json!({ "url": "https://8.8.8.8/hooks", "label": "ledger" });
        let created = app.post("/v2/webhooks", &acme, &hook).await;
        assert_eq!(created.status, 201, "{created:?}");
        let id = created.body["id"].as_str().unwrap().to_string();
        pending_deliveries(&app.db.url, "acme", &id, 1).await;
        let rotated =
            app.post(&format!("/v2/webhooks/{id}/rotate-signing-key"), &acme, &serde_json::json!({})).await;
        assert_eq!(rotated.status, 200, "{rotated:?}");
        let current = rotated.body["signing_secret"].as_str().unwrap().to_string();
        assert_eq!(signing_secrets(app.store()).await.len(), 2, "{backend:?}: both keys sign");

        let path = format!("/v2/webhooks/{id}/revoke-previous-keys");
        let refused = app.post(&path, &other, &serde_json::json!({})).await;
        assert_eq!(refused.status, 404, "{refused:?}");
        let revoked = app.post(&path, &acme, &serde_json::json!({})).await;
        assert_eq!(revoked.status, 200, "{revoked:?}");
        assert!(revoked.body["previous_key_expires_at"].is_null(), "{:?}", revoked.body);
        assert!(revoked.body.get("signing_secret").is_none(), "no secret is shown");
        assert_eq!(
            signing_secrets(app.store()).await,
            [current.as_str()],
            "{backend:?}: the current key alone"
        );
        let again = app.post(&path, &acme, &serde_json::json!({})).await;
        assert_eq!(again.status, 200, "revoking none changes nothing");
    }
}
