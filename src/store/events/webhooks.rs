//! Webhooks and their signing keys.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Row, any::AnyRow};
use utoipa::ToSchema;

use crate::deposits::resource::{rfc3339, rfc3339_opt};
use crate::store::{Store, StoreError, Tx, now_micros, quotas::Quota, time, webhook_keys};

/// The Webhook resource; its secrets are never part of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Webhook {
    pub id: String,
    #[serde(skip)]
    pub organization: String,
    pub url: String,
    pub label: String,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    /// `ACTIVE`, or `DISABLED` after the receiver answered `410 Gone`.
    pub status: String,
    pub signing_key_id: String,
    #[serde(serialize_with = "rfc3339")]
    pub signing_key_created_at: DateTime<Utc>,
    /// The latest expiry of the keys rotated out of this webhook: until
    /// then deliveries carry, beside the current key's signature, one by
    /// each previous key not yet expired (two at most).
    #[serde(serialize_with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    pub previous_key_expires_at: Option<DateTime<Utc>>,
}

const WEBHOOK_COLUMNS: &str = "id, organization_id, url, label, created_at, status, signing_key_id, \
     signing_key_created_at, (SELECT MAX(k.expires_at) FROM webhook_previous_keys k \
     WHERE k.webhook_id = webhooks.id) AS previous_key_expires_at";

impl Store {
    /// Registers a webhook in `tx`; refused when the organization holds its
    /// limit of webhooks (deleted ones do not count). The new webhook's id.
    pub(crate) async fn create_webhook_in(
        &self,
        tx: &mut Tx,
        organization: &str,
        url: &str,
        label: &str,
        secret: &str,
    ) -> Result<String, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let key_id = uuid::Uuid::new_v4().to_string();
        let sealed = self.seal_signing_secret(&id, &key_id, secret)?;
        let now = now_micros();
        self.claim(tx, organization, Quota::Webhooks).await?;
        sqlx::query(
            "INSERT INTO webhooks (id, organization_id, url, label, status, created_at, signing_key_id,
                signing_secret, signing_key_created_at) VALUES ($1, $2, $3, $4, 'ACTIVE', $5, $6, $7, $5)",
        )
        .bind(&id)
        .bind(organization)
        .bind(url)
        .bind(label)
        .bind(now)
        .bind(&key_id)
        .bind(sealed)
        .execute(&mut **tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
                StoreError::NotFound(format!("organization {organization}"))
            }
            e => e.into(),
        })?;
        Ok(id)
    }

    /// The webhooks not deleted, oldest first, of one organization or all.
    pub async fn webhooks(&self, organization: Option<&str>) -> Result<Vec<Webhook>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE status <> 'DELETED' AND ($1 IS NULL OR organization_id = $1)
             ORDER BY created_at, id"
        ))
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(webhook_from_row).collect()
    }

    /// A webhook not deleted, if it belongs to `organization` (any when `None`).
    pub async fn webhook(&self, organization: Option<&str>, id: &str) -> Result<Webhook, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks
             WHERE id = $1 AND status <> 'DELETED' AND ($2 IS NULL OR organization_id = $2)"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("webhook {id}")))?;
        webhook_from_row(&row)
    }

    /// Deletes a webhook in `tx`, if it belongs to `organization` (any when
    /// `None`): it gets no new events and its pending deliveries end. Its
    /// organization.
    pub(crate) async fn delete_webhook_in(
        &self,
        tx: &mut Tx,
        organization: Option<&str>,
        id: &str,
    ) -> Result<String, StoreError> {
        let owner = webhook_keys::lock_webhook(tx, organization, id).await?;
        let now = now_micros();
        sqlx::query("UPDATE webhooks SET status = 'DELETED' WHERE id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
        webhook_keys::forget_previous_keys(tx, id).await?;
        sqlx::query("DELETE FROM conditions WHERE chain = '' AND kind = $1 AND subject = $2")
            .bind(crate::store::WEBHOOK_FAILING)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        sqlx::query(
            "UPDATE deliveries SET state = 'FAILED', last_error = 'webhook deleted', updated_at = $1
             WHERE webhook_id = $2 AND state = 'PENDING'",
        )
        .bind(now)
        .bind(id)
        .execute(&mut **tx)
        .await?;
        Ok(owner)
    }
}

fn webhook_from_row(row: &AnyRow) -> Result<Webhook, StoreError> {
    Ok(Webhook {
        id: row.try_get("id")?,
        organization: row.try_get("organization_id")?,
        url: row.try_get("url")?,
        label: row.try_get("label")?,
        created_at: time(row.try_get("created_at")?)?,
        status: row.try_get("status")?,
        signing_key_id: row.try_get("signing_key_id")?,
        signing_key_created_at: time(row.try_get("signing_key_created_at")?)?,
        previous_key_expires_at: row
            .try_get::<Option<i64>, _>("previous_key_expires_at")?
            .map(time)
            .transpose()?,
    })
}
