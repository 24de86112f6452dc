//! Fresh, migrated stores: a SQLite file in a temporary directory, or a new
//! database on the PostgreSQL at `TEST_DATABASE_URL`, dropped afterwards.

use std::borrow::Cow;

use custody_indexer::{
    pii::{Key, KeySource},
    store::Store,
};
use sqlx::{AnyConnection, AnyPool, Connection, Executor, PgConnection, migrate::Migrator};

pub const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

/// The personal-data key of the tests' stores and processes (32 bytes).
pub const TEST_PII_KEY: &str = "Y3VzdG9keS1pbmRleGVyIHRlc3QgcGlpIGtleSAzMmI=";

/// `store` with its personal data under [`TEST_PII_KEY`] (recorded on first use).
pub async fn unlocked(store: &Store) -> Store {
    custody_indexer::start::unlock_pii(store, KeySource::Given(Key::parse(TEST_PII_KEY).unwrap()))
        .await
        .unwrap()
}

pub struct TestDb {
    pub url: String,
    pub store: Store,
    _dir: Option<tempfile::TempDir>,
    postgres: Option<(String, String)>,
}

pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.into())
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        let mut db = Self::unmigrated(backend).await;
        db.store.migrate().await.unwrap();
        db.store = unlocked(&db.store).await;
        db
    }

    /// A new database with the migrations before `version` applied: a store
    /// as an older release left it.
    pub async fn migrated_before(backend: Backend, version: i64) -> Self {
        let db = Self::unmigrated(backend).await;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut migrator = Migrator::new(dir.as_path()).await.unwrap();
        migrator.migrations = Cow::Owned(migrator.iter().filter(|m| m.version < version).cloned().collect());
        let pool = AnyPool::connect(&db.url).await.unwrap();
        migrator.run(&pool).await.unwrap();
        pool.close().await;
        db
    }

    /// A new, empty database: no migration applied yet.
    pub async fn unmigrated(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("store.db").display());
                let store = Store::connect(&url).await.unwrap();
                Self { url, store, _dir: Some(dir), postgres: None }
            }
            Backend::Postgres => {
                let admin = admin_url();
                let name = format!("ci_{}", uuid::Uuid::new_v4().simple());
                let mut conn = PgConnection::connect(&admin).await.unwrap_or_else(|e| {
                    panic!("PostgreSQL at TEST_DATABASE_URL does not answer ({e}); run scripts/test.sh")
                });
                conn.execute(format!("CREATE DATABASE {name}").as_str()).await.unwrap();
                conn.close().await.unwrap();
                let (base, _) = admin.rsplit_once('/').unwrap();
                let url = format!("{base}/{name}");
                let store = Store::connect(&url).await.unwrap();
                Self { url, store, _dir: None, postgres: Some((admin, name)) }
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin, name)) = self.postgres.take() else {
            return;
        };
        // Drop runs inside the test's runtime: clean up on a thread of our own.
        // FORCE ends the store's connections, which belong to the test runtime.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                if let Ok(mut conn) = PgConnection::connect(&admin).await {
                    let _ =
                        conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str()).await;
                }
            });
        })
        .join();
    }
}

/// `count` events of distinct resources, each with a delivery due now to
/// `webhook`, in the store at `url` (opened once already, so that sqlx's
/// `Any` drivers are installed).
pub async fn pending_deliveries(url: &str, organization: &str, webhook: &str, count: usize) {
    pending_deliveries_from(url, organization, webhook, 1, count).await
}

/// `count` pending deliveries as [`pending_deliveries`] writes them, of
/// events numbered from `first`.
pub async fn pending_deliveries_from(
    url: &str,
    organization: &str,
    webhook: &str,
    first: usize,
    count: usize,
) {
    let mut conn = AnyConnection::connect(url).await.unwrap();
    let now = custody_indexer::store::now_micros();
    for seq in first as i64..(first + count) as i64 {
        let (event, resource) = (format!("event-{seq}"), format!("resource-{seq}"));
        let payload = serde_json::json!({ "id": event, "type": "deposit_v2", "data": { "id": resource } });
        sqlx::query(
            "INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at)
             VALUES ($1, $2, $3, 'deposit_v2', $4, $5, $6)",
        )
        .bind(seq)
        .bind(&event)
        .bind(organization)
        .bind(&resource)
        .bind(payload.to_string())
        .bind(now)
        .execute(&mut conn)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO deliveries (id, event_seq, webhook_id, resource_id, state, attempts, next_attempt_at,
                created_at, updated_at) VALUES ($1, $2, $3, $4, 'PENDING', 0, $5, $5, $5)",
        )
        .bind(format!("delivery-{seq}"))
        .bind(seq)
        .bind(webhook)
        .bind(&resource)
        .bind(now)
        .execute(&mut conn)
        .await
        .unwrap();
    }
}
