//! What a database writer does to the audit log: an entry appended after
//! the head with plain SQL, chained as the guards require (its hash over
//! its fields and the head's), without the MAC only the pepper makes.

use custody_indexer::{
    audit::{Detail, chain::Entry},
    store::Store,
};

use super::db::Backend;
use sqlx::AnyPool;

/// What the forged entry says.
pub struct Forged<'a> {
    pub actor: &'a str,
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub organization_id: Option<&'a str>,
    pub detail: Option<Detail>,
}

/// Appends `forged` after `store`'s head with SQL on `pool`; the entry.
pub async fn append_forged(pool: &AnyPool, store: &Store, forged: Forged<'_>) -> Entry {
    let (seq, prev_hash) = store.audit_head().await.unwrap();
    let mut entry = Entry {
        seq: seq + 1,
        at: custody_indexer::store::now_micros(),
        actor: forged.actor.into(),
        actor_name: None,
        action: forged.action.into(),
        target_kind: forged.target_kind.into(),
        target_id: forged.target_id.into(),
        organization_id: forged.organization_id.map(str::to_string),
        reason: None,
        request_id: None,
        detail: forged.detail.map(|d| d.text()),
        prev_hash,
        hash: String::new(),
        mac: None,
    };
    entry.hash = entry.digest();
    sqlx::query(
        "INSERT INTO audit_log (seq, at, actor, action, target_kind, target_id, organization_id, detail, \
         prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(entry.seq)
    .bind(entry.at)
    .bind(&entry.actor)
    .bind(&entry.action)
    .bind(&entry.target_kind)
    .bind(&entry.target_id)
    .bind(entry.organization_id.as_deref())
    .bind(entry.detail.as_deref())
    .bind(&entry.prev_hash)
    .bind(&entry.hash)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1")
        .bind(entry.seq)
        .bind(&entry.hash)
        .execute(pool)
        .await
        .unwrap();
    entry
}

/// Drops the audit log's guards, as the tables' owner can.
pub async fn drop_guards(pool: &AnyPool, backend: Backend) {
    let statements: &[&str] = match backend {
        Backend::Sqlite => &[
            "DROP TRIGGER audit_log_no_update",
            "DROP TRIGGER audit_log_no_delete",
            "DROP TRIGGER audit_log_append",
            "DROP TRIGGER audit_head_forward",
            "DROP TRIGGER audit_head_no_delete",
            "DROP TRIGGER audit_head_no_insert",
        ],
        Backend::Postgres => &[
            "DROP TRIGGER audit_log_guard ON audit_log",
            "DROP TRIGGER audit_log_no_truncate ON audit_log",
            "DROP TRIGGER audit_head_guard ON audit_head",
            "DROP TRIGGER audit_head_no_truncate ON audit_head",
        ],
    };
    for statement in statements {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
}
