//! Personal data at rest, on SQLite and PostgreSQL: labels and KYC/KYB
//! submissions are stored sealed under the store's key, plaintext written
//! before encryption is sealed when the key is first given, and a store
//! refuses any other key.

use crate::common;

use common::{
    TestDb,
    api::kyc,
    db::{BACKENDS, TEST_PII_KEY, unlocked},
};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::{
    identity::{State, Type},
    pii::{Key, KeySource, PiiError},
    start::unlock_pii,
    store::{NewIdentity, Store, StoreError},
};
use serde_json::json;
use sqlx::{AnyPool, Row};

/// What the data of these tests holds that must never be stored as is.
const PLAINTEXT: [&str; 5] = ["Lovelace", "1990-12-10", "1 Main St", "N1 1AA", "12-3456789"];

/// Every value of the sealed columns, as stored.
async fn raw(url: &str) -> Vec<String> {
    let pool = AnyPool::connect(url).await.unwrap();
    let mut values = Vec::new();
    for sql in ["SELECT label AS v FROM identities", "SELECT data AS v FROM compliance_submissions"] {
        for row in sqlx::query(sql).fetch_all(&pool).await.unwrap() {
            values.push(row.try_get::<String, _>("v").unwrap());
        }
    }
    pool.close().await;
    values
}

fn assert_sealed(values: &[String], key_id: &str) {
    assert!(!values.is_empty());
    for value in values {
        assert!(value.starts_with(&format!("pii1.{key_id}.")), "{value}");
        for plaintext in PLAINTEXT {
            assert!(!value.contains(plaintext), "{plaintext} stored in {value}");
        }
    }
}

async fn register(store: &Store, id: &str, label: &str) {
    let new = NewIdentity {
        organization: "default".into(),
        id: id.into(),
        request_id: Some(format!("request-{id}")),
        kind: Type::Individual,
        label: label.into(),
        state: State::CREATED,
        actor: "client".into(),
    };
    custody_indexer::identity::register::create_identity(store, &new).await.unwrap();
}

#[tokio::test]
async fn labels_and_submissions_are_stored_sealed_and_read_back() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        register(store, "ada", "Ada Lovelace").await;
        let mut data = kyc("Lovelace");
        data["kyc"]["additional_id_number"] = json!("12-3456789");
        lifecycle::submit(store, "default", "ada", &data).await.unwrap();

        let key_id = Key::parse(TEST_PII_KEY).unwrap().id();
        assert_sealed(&raw(&db.url).await, &key_id);
        assert_eq!(store.identity("default", "ada").await.unwrap().label.expose(), "Ada Lovelace");
        let reviews = store.reviews(None, i64::MAX, 10).await.unwrap();
        assert_eq!(*reviews[0].submission.expose(), data, "{backend:?}");
        assert!(!format!("{:?}", reviews[0]).contains("Lovelace"), "Debug hides personal data");

        // A store handle without the key refuses personal data, naming the variable.
        let locked = Store::connect(&db.url).await.unwrap();
        let error = locked.identity("default", "ada").await.unwrap_err();
        assert!(error.to_string().contains("CUSTODY_INDEXER_PII_KEY"), "{error}");
    }
}

#[tokio::test]
async fn plaintext_from_before_is_sealed_once_and_another_key_is_refused() {
    for backend in BACKENDS {
        let db = TestDb::unmigrated(backend).await;
        db.store.migrate().await.unwrap();
        // Rows as the release before encryption wrote them.
        let pool = AnyPool::connect(&db.url).await.unwrap();
        sqlx::query(
            "INSERT INTO identities (organization_id, id, request_id, type, label, status, sub_status,
                 rfi_step, fiat_operations_enabled, created_at, updated_at)
             VALUES ('default', 'ada', NULL, 'INDIVIDUAL', 'Ada Lovelace', 'PENDING_ONBOARDING',
                 'COMPLIANCE_CHECKS_IN_PROGRESS', NULL, 0, 1, 1)",
        )
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO compliance_submissions (id, organization_id, identity_id, kind, data, created_at)
             VALUES ('s-1', 'default', 'ada', 'KYC', $1, 1)",
        )
        .bind(kyc("Lovelace").to_string())
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;

        let store = unlocked(&db.store).await;
        let key_id = Key::parse(TEST_PII_KEY).unwrap().id();
        assert_sealed(&raw(&db.url).await, &key_id);
        assert_eq!(store.identity("default", "ada").await.unwrap().label.expose(), "Ada Lovelace");
        let reviews = store.reviews(None, i64::MAX, 10).await.unwrap();
        assert_eq!(*reviews[0].submission.expose(), kyc("Lovelace"));
        // Again: nothing left to seal, the same values.
        let before = raw(&db.url).await;
        unlocked(&db.store).await;
        assert_eq!(raw(&db.url).await, before, "{backend:?}");

        let other = Key::generate();
        let error = unlock_pii(&db.store, KeySource::Given(other.clone())).await.unwrap_err();
        let StoreError::Pii(PiiError::WrongKey { stored, given, .. }) = &error else { panic!("{error:?}") };
        assert_eq!((stored, given), (&key_id, &other.id()));
        assert!(error.to_string().contains("CUSTODY_INDEXER_PII_KEY"), "{error}");
    }
}

#[tokio::test]
async fn a_sandbox_store_keeps_its_own_key_and_refuses_the_variable_with_another() {
    for backend in BACKENDS {
        let db = TestDb::unmigrated(backend).await;
        db.store.migrate().await.unwrap();
        let first = unlock_pii(&db.store, KeySource::Kept).await.unwrap();
        register(&first, "ada", "Ada Lovelace").await;
        assert_eq!(db.store.keeps_pii_key().await.unwrap(), Some(true));

        // Another handle (a restart) takes the same kept key.
        let again = unlock_pii(&Store::connect(&db.url).await.unwrap(), KeySource::Kept).await.unwrap();
        assert_eq!(again.pii_key_id(), first.pii_key_id());
        assert_eq!(again.identity("default", "ada").await.unwrap().label.expose(), "Ada Lovelace");
        assert_sealed(&raw(&db.url).await, first.pii_key_id().unwrap());

        let error = unlock_pii(&db.store, KeySource::Given(Key::generate())).await.unwrap_err();
        assert!(error.to_string().contains("keeps its own"), "{error}");
    }
}
