//! The store's personal-data key (see [`crate::pii`]): which key sealed its
//! data, the key itself for a sandbox store that keeps its own, and the
//! sealing of values written in plaintext before the data was encrypted.

use std::sync::Arc;

use sqlx::{Any, Row, Transaction};

use super::{Store, StoreError, Tx, now_micros};
use crate::pii::{Cipher, Key, PiiError, Place};

/// The store's key row: its id, and the key when the store keeps it.
pub(crate) struct Recorded {
    pub key_id: String,
    pub kept: Option<Key>,
}

impl Store {
    /// This handle's cipher; a store unlocked by no key refuses personal data.
    pub(crate) fn cipher(&self) -> Result<&Cipher, StoreError> {
        self.pii.as_deref().ok_or(StoreError::Pii(PiiError::Locked))
    }

    /// The id of the key this handle seals with, if unlocked.
    pub fn pii_key_id(&self) -> Option<&str> {
        self.pii.as_deref().map(Cipher::key_id)
    }

    /// This store with its personal data readable and writable with `cipher`.
    pub(crate) fn with_pii(&self, cipher: Cipher) -> Store {
        Store { pii: Some(Arc::new(cipher)), ..self.clone() }
    }

    /// Whether the store keeps its own key (a sandbox store started without
    /// `CUSTODY_INDEXER_PII_KEY`); `None` while it has no key yet.
    pub async fn keeps_pii_key(&self) -> Result<Option<bool>, StoreError> {
        let row =
            sqlx::query("SELECT kept_key FROM pii_keys WHERE id = 1").fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.try_get::<Option<String>, _>("kept_key").map(|k| k.is_some())).transpose()?)
    }
}

/// The store's key row as `tx` reads it; `None` while it has no key yet.
pub(crate) async fn recorded(tx: &mut Transaction<'static, Any>) -> Result<Option<Recorded>, StoreError> {
    let Some(row) =
        sqlx::query("SELECT key_id, kept_key FROM pii_keys WHERE id = 1").fetch_optional(&mut **tx).await?
    else {
        return Ok(None);
    };
    let kept = row.try_get::<Option<String>, _>("kept_key")?.map(zeroize::Zeroizing::new);
    let kept = kept
        .map(|text| Key::parse(&text))
        .transpose()
        .map_err(|_| StoreError::Corrupt("pii_keys.kept_key".into()))?;
    Ok(Some(Recorded { key_id: row.try_get("key_id")?, kept }))
}

/// Records key `key_id` (with the key itself, `kept`, when the store keeps
/// it) in `tx` unless the store has a key already.
pub(crate) async fn record_key(tx: &mut Tx, key_id: &str, kept: Option<&str>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO pii_keys (id, key_id, kept_key, created_at) VALUES (1, $1, $2, $3)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(key_id)
    .bind(kept)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Seals every label and submission still in plaintext; how many. Each is
/// rewritten only if it still holds the plaintext read, so a process
/// sealing the same rows at once changes nothing twice.
pub(crate) async fn seal_plaintext(
    tx: &mut Transaction<'static, Any>,
    cipher: &Cipher,
) -> Result<u64, StoreError> {
    let mut sealed = 0;
    let labels =
        sqlx::query("SELECT organization_id, id, label FROM identities WHERE substr(label, 1, 5) <> 'pii1.'")
            .fetch_all(&mut **tx)
            .await?;
    for row in labels {
        let (organization, id, label): (String, String, String) =
            (row.try_get("organization_id")?, row.try_get("id")?, row.try_get("label")?);
        let label = zeroize::Zeroizing::new(label);
        let value = cipher.seal(label.as_bytes(), Place { column: LABEL, row: &[&organization, &id] });
        let done = sqlx::query(
            "UPDATE identities SET label = $4 WHERE organization_id = $1 AND id = $2 AND label = $3",
        )
        .bind(&organization)
        .bind(&id)
        .bind(label.as_str())
        .bind(value)
        .execute(&mut **tx)
        .await?;
        sealed += done.rows_affected();
    }
    let submissions = sqlx::query(
        "SELECT id, organization_id, identity_id, data FROM compliance_submissions
             WHERE substr(data, 1, 5) <> 'pii1.'",
    )
    .fetch_all(&mut **tx)
    .await?;
    for row in submissions {
        let (id, data): (String, String) = (row.try_get("id")?, row.try_get("data")?);
        let (organization, identity): (String, String) =
            (row.try_get("organization_id")?, row.try_get("identity_id")?);
        let data = zeroize::Zeroizing::new(data);
        let value =
            cipher.seal(data.as_bytes(), Place { column: SUBMISSION, row: &[&organization, &identity, &id] });
        let done = sqlx::query("UPDATE compliance_submissions SET data = $3 WHERE id = $1 AND data = $2")
            .bind(&id)
            .bind(data.as_str())
            .bind(value)
            .execute(&mut **tx)
            .await?;
        sealed += done.rows_affected();
    }
    Ok(sealed + seal_webhook_secrets(tx, cipher).await?)
}

/// Seals the webhook signing secrets still in plaintext (written before
/// they were sealed), current and rotated out; how many.
async fn seal_webhook_secrets(
    tx: &mut Transaction<'static, Any>,
    cipher: &Cipher,
) -> Result<u64, StoreError> {
    let mut sealed = 0;
    let tables = [
        ("webhooks", "id", "signing_key_id", "signing_secret"),
        ("webhook_previous_keys", "webhook_id", "key_id", "secret"),
    ];
    for (table, webhook, key, column) in tables {
        let rows = sqlx::query(&format!(
            "SELECT {webhook} AS webhook, {key} AS key_id, {column} AS secret FROM {table}
             WHERE substr({column}, 1, 5) <> 'pii1.'"
        ))
        .fetch_all(&mut **tx)
        .await?;
        for row in rows {
            let (webhook_id, key_id): (String, String) = (row.try_get("webhook")?, row.try_get("key_id")?);
            let secret = zeroize::Zeroizing::new(row.try_get::<String, _>("secret")?);
            let value = cipher
                .seal(secret.as_bytes(), Place { column: WEBHOOK_SECRET, row: &[&webhook_id, &key_id] });
            let done = sqlx::query(&format!(
                "UPDATE {table} SET {column} = $4 WHERE {webhook} = $1 AND {key} = $2 AND {column} = $3"
            ))
            .bind(&webhook_id)
            .bind(&key_id)
            .bind(secret.as_str())
            .bind(value)
            .execute(&mut **tx)
            .await?;
            sealed += done.rows_affected();
        }
    }
    Ok(sealed)
}

/// The sealed columns, named in their values' associated data.
pub(super) const LABEL: &str = "identities.label";
pub(super) const SUBMISSION: &str = "compliance_submissions.data";
/// Always sealed: the table came after the key.
pub(super) const BANK_DETAILS: &str = "bank_accounts.details";
/// A webhook's signing secret, current or rotated out: one place for both
/// tables (row: webhook id, key id), so a rotation moves the sealed value
/// from the webhook's row to `webhook_previous_keys` unchanged.
pub(super) const WEBHOOK_SECRET: &str = "webhooks.signing_secret";
