//! Webhook signing keys: the current one on the webhook's row, and the keys
//! rotated out of it, each signing beside the current one until its own
//! expiry (`webhook_previous_keys`).

use sqlx::{Any, AnyConnection, Row, Transaction};

use zeroize::Zeroizing;

use crate::pii::{Cipher, Place};
use crate::store::{Store, StoreError, Tx, now_micros, pii::WEBHOOK_SECRET};

/// How many rotated-out keys sign beside the current one at most: a delivery
/// carries at most three signatures. A rotation past that drops the oldest
/// (see [`Store::rotate_signing_key`]).
pub const MAX_PREVIOUS_KEYS: usize = 2;

impl Store {
    /// Replaces the signing key in `tx`; the replaced one keeps signing for
    /// `overlap`, and the keys rotated out before it keep signing until their
    /// own expiry. Of those not yet expired the newest [`MAX_PREVIOUS_KEYS`]
    /// are kept and the older ones dropped at once: a rotation is what an
    /// operator does when a key leaked, so it is never refused, and a
    /// receiver still on a dropped key gets the deliveries again once it
    /// takes a newer one (every refused delivery is retried). The
    /// webhook's organization.
    pub(crate) async fn rotate_signing_key_in(
        &self,
        tx: &mut Tx,
        organization: Option<&str>,
        id: &str,
        secret: &str,
        overlap: std::time::Duration,
    ) -> Result<String, StoreError> {
        let now = now_micros();
        let expires = now.saturating_add(i64::try_from(overlap.as_micros()).unwrap_or(i64::MAX));
        let key_id = uuid::Uuid::new_v4().to_string();
        let sealed = self.seal_signing_secret(id, &key_id, secret)?;
        let owner = lock_webhook(tx, organization, id).await?;
        // Newer than every earlier rotation whatever this instance's clock
        // says: the newest keys are the ones kept.
        let newest: Option<i64> =
            sqlx::query_scalar("SELECT MAX(rotated_at) FROM webhook_previous_keys WHERE webhook_id = $1")
                .bind(id)
                .fetch_one(&mut **tx)
                .await?;
        let rotated_at = newest.map_or(now, |newest| now.max(newest.saturating_add(1)));
        sqlx::query(
            "INSERT INTO webhook_previous_keys (webhook_id, key_id, secret, rotated_at, expires_at)
             SELECT id, signing_key_id, signing_secret, $1, $2 FROM webhooks WHERE id = $3",
        )
        .bind(rotated_at)
        .bind(expires)
        .bind(id)
        .execute(&mut **tx)
        .await?;
        // The row's own previous-key columns are no longer read (see
        // migration 0022): the table holds every previous key, sealed.
        sqlx::query(
            "UPDATE webhooks SET previous_secret = NULL, previous_key_expires_at = $1,
                signing_secret = $2, signing_key_id = $3, signing_key_created_at = $4
             WHERE id = $5",
        )
        .bind(expires)
        .bind(sealed)
        .bind(&key_id)
        .bind(now)
        .bind(id)
        .execute(&mut **tx)
        .await?;
        prune_previous_keys(tx, id, now).await?;
        Ok(owner)
    }
}

impl Store {
    /// Ends every rotated-out key of a webhook at once in `tx`, whatever
    /// its expiry: a key that leaked must stop signing now, not in 24
    /// hours. From then on deliveries carry the current key's signature
    /// alone. The webhook's organization.
    pub(crate) async fn revoke_previous_keys_in(
        &self,
        tx: &mut Tx,
        organization: Option<&str>,
        id: &str,
    ) -> Result<String, StoreError> {
        let owner = lock_webhook(tx, organization, id).await?;
        forget_previous_keys(tx, id).await?;
        sqlx::query(
            "UPDATE webhooks SET previous_secret = NULL, previous_key_expires_at = NULL WHERE id = $1",
        )
        .bind(id)
        .execute(&mut **tx)
        .await?;
        Ok(owner)
    }
}

/// Locks a webhook's row for a change (PostgreSQL: concurrent changes of
/// one webhook queue here; SQLite's write transaction holds the whole
/// file), or fails when it is not one of `organization`'s (any when
/// `None`): its organization.
pub(in crate::store) async fn lock_webhook(
    tx: &mut Transaction<'static, Any>,
    organization: Option<&str>,
    id: &str,
) -> Result<String, StoreError> {
    let locked = sqlx::query(
        "UPDATE webhooks SET status = status
         WHERE id = $1 AND status <> 'DELETED' AND ($2 IS NULL OR organization_id = $2)
         RETURNING organization_id",
    )
    .bind(id)
    .bind(organization)
    .fetch_optional(&mut **tx)
    .await?;
    let row = locked.ok_or_else(|| StoreError::NotFound(format!("webhook {id}")))?;
    Ok(row.try_get("organization_id")?)
}

/// Drops a webhook's expired previous keys and all but the newest
/// [`MAX_PREVIOUS_KEYS`] valid ones: their secrets are not kept longer than
/// they sign.
async fn prune_previous_keys(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "DELETE FROM webhook_previous_keys WHERE webhook_id = $1 AND (expires_at <= $2 OR key_id NOT IN (
            SELECT key_id FROM webhook_previous_keys WHERE webhook_id = $1 AND expires_at > $2
            ORDER BY rotated_at DESC, expires_at DESC LIMIT {MAX_PREVIOUS_KEYS}))"
    ))
    .bind(id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A deleted webhook's previous keys: nothing signs with them any more.
pub(in crate::store) async fn forget_previous_keys(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM webhook_previous_keys WHERE webhook_id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The secrets of a webhook's previous keys valid at `now`, newest first,
/// opened; at most [`MAX_PREVIOUS_KEYS`]. One that does not open is left
/// out, with an error log.
pub(in crate::store) async fn previous_secrets(
    cipher: &Cipher,
    conn: &mut AnyConnection,
    webhook_id: &str,
    now: i64,
) -> Result<Vec<Zeroizing<String>>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT key_id, secret FROM webhook_previous_keys WHERE webhook_id = $1 AND expires_at > $2
         ORDER BY rotated_at DESC, expires_at DESC LIMIT {MAX_PREVIOUS_KEYS}"
    ))
    .bind(webhook_id)
    .bind(now)
    .fetch_all(conn)
    .await?;
    let mut secrets = Vec::with_capacity(rows.len());
    for row in rows {
        let key_id: String = row.try_get("key_id")?;
        match open_signing_secret(cipher, webhook_id, &key_id, &row.try_get::<String, _>("secret")?) {
            Ok(secret) => secrets.push(secret),
            // The current key still signs: a previous one that does not open
            // is left out rather than stopping the webhook's deliveries.
            Err(StoreError::Pii(error)) => {
                tracing::error!(webhook_id, key_id, %error, "a previous signing key does not open; left out");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(secrets)
}

/// A signing secret as stored: sealed under the webhook's id and the key's.
pub(in crate::store) fn open_signing_secret(
    cipher: &Cipher,
    webhook_id: &str,
    key_id: &str,
    sealed: &str,
) -> Result<Zeroizing<String>, StoreError> {
    let place = Place { column: WEBHOOK_SECRET, row: &[webhook_id, key_id] };
    Ok(Zeroizing::new(cipher.open_text(sealed, place)?))
}

impl Store {
    /// `secret` sealed for the webhook's key `key_id`; refused by a store
    /// unlocked by no key.
    pub(in crate::store) fn seal_signing_secret(
        &self,
        webhook_id: &str,
        key_id: &str,
        secret: &str,
    ) -> Result<String, StoreError> {
        let place = Place { column: WEBHOOK_SECRET, row: &[webhook_id, key_id] };
        Ok(self.cipher()?.seal(secret.as_bytes(), place))
    }
}
