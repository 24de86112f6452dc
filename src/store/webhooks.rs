//! Webhooks, their signing keys, and the deliveries of events to them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Any, Row, Transaction, any::AnyRow};
use utoipa::ToSchema;

use super::{Backend, Store, StoreError, now_micros, quotas::Quota, time, webhook_keys};
use crate::deposit::{rfc3339, rfc3339_opt};

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

/// A delivery a worker leased: everything needed to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery_id: String,
    pub attempts: u32,
    pub event_id: String,
    pub payload: String,
    pub webhook_id: String,
    pub url: String,
    /// The signing secrets valid now, newest first: the current one and up
    /// to two previous ones.
    pub secrets: Vec<String>,
}

/// What became of an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// Try again at this time (microseconds).
    Retry(i64),
    /// No attempt is left: dead-lettered.
    Failed,
    /// The receiver answered `410 Gone`: the webhook is disabled.
    Gone,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub at: i64,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// A delivery as operators list it.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    pub event_id: String,
    pub event_type: String,
    pub webhook_id: String,
    pub url: String,
    pub state: String,
    pub attempts: u32,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
}

const WEBHOOK_COLUMNS: &str = "id, organization_id, url, label, created_at, status, signing_key_id, \
     signing_key_created_at, (SELECT MAX(k.expires_at) FROM webhook_previous_keys k \
     WHERE k.webhook_id = webhooks.id) AS previous_key_expires_at";

impl Store {
    /// Registers a webhook; refused when the organization holds its limit of
    /// webhooks (deleted ones do not count).
    pub async fn create_webhook(
        &self,
        organization: &str,
        url: &str,
        label: &str,
        secret: &str,
    ) -> Result<Webhook, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_micros();
        let mut tx = self.begin().await?;
        self.claim(&mut tx, organization, Quota::Webhooks).await?;
        sqlx::query(
            "INSERT INTO webhooks (id, organization_id, url, label, status, created_at, signing_key_id,
                signing_secret, signing_key_created_at) VALUES ($1, $2, $3, $4, 'ACTIVE', $5, $6, $7, $5)",
        )
        .bind(&id)
        .bind(organization)
        .bind(url)
        .bind(label)
        .bind(now)
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(secret)
        .execute(&mut *tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(d) if d.message().to_lowercase().contains("foreign key") => {
                StoreError::NotFound(format!("organization {organization}"))
            }
            e => e.into(),
        })?;
        tx.commit().await?;
        self.webhook(Some(organization), &id).await
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

    /// Deletes a webhook: it gets no new events and its pending deliveries end.
    pub async fn delete_webhook(&self, organization: Option<&str>, id: &str) -> Result<(), StoreError> {
        self.webhook(organization, id).await?;
        let mut tx = self.begin().await?;
        let now = now_micros();
        sqlx::query("UPDATE webhooks SET status = 'DELETED' WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        webhook_keys::forget_previous_keys(&mut tx, id).await?;
        sqlx::query("DELETE FROM conditions WHERE chain = '' AND kind = $1 AND subject = $2")
            .bind(super::WEBHOOK_FAILING)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE deliveries SET state = 'FAILED', last_error = 'webhook deleted', updated_at = $1
             WHERE webhook_id = $2 AND state = 'PENDING'",
        )
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Leases up to `limit` due deliveries to `owner` for `lease_micros`. A
    /// delivery waits while an earlier event of the same resource is still
    /// pending for the same webhook, so each receiver gets a deposit's events
    /// in order. PostgreSQL skips rows other workers are claiming; SQLite
    /// serialises claims with its write lock. Lease times are the database's
    /// clock on PostgreSQL (see [`super::clock`]).
    pub async fn claim_deliveries(
        &self,
        owner: &str,
        lease_micros: i64,
        limit: u32,
    ) -> Result<Vec<Claimed>, StoreError> {
        // A read first: idle workers poll often, and a write transaction would
        // take SQLite's write lock from the watchers each time.
        let sql = format!(
            "SELECT id FROM deliveries WHERE state = 'PENDING' AND next_attempt_at <= {} LIMIT 1",
            self.lease_now(1)
        );
        if self.bind_lease_now(sqlx::query(&sql)).fetch_optional(&self.pool).await?.is_none() {
            return Ok(Vec::new());
        }
        let skip_locked = if self.backend == Backend::Postgres { "FOR UPDATE OF d SKIP LOCKED" } else { "" };
        let now = self.lease_now(4);
        let sql = format!(
            "UPDATE deliveries SET lease_owner = $1, lease_until = {now} + $2 WHERE id IN (
                SELECT d.id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
                WHERE d.state = 'PENDING' AND d.next_attempt_at <= {now}
                  AND (d.lease_until IS NULL OR d.lease_until < {now}) AND w.status = 'ACTIVE'
                  AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.webhook_id = d.webhook_id
                      AND e.resource_id = d.resource_id AND e.event_seq < d.event_seq AND e.state = 'PENDING')
                ORDER BY d.event_seq LIMIT $3 {skip_locked}
             ) RETURNING id"
        );
        let query = sqlx::query(&sql).bind(owner).bind(lease_micros).bind(i64::from(limit));
        let mut tx = self.begin().await?;
        let claimed = self.bind_lease_now(query).fetch_all(&mut *tx).await?;
        let mut out = Vec::with_capacity(claimed.len());
        for row in claimed {
            out.push(claimed_delivery(&mut tx, row.try_get("id")?).await?);
        }
        tx.commit().await?;
        Ok(out)
    }

    /// Extends `owner`'s lease on a delivery to `lease_micros` from now right
    /// before an attempt, if `owner` still holds it (its lease has not
    /// lapsed, so no other worker can have claimed it); whether it did. One
    /// statement: on PostgreSQL a concurrent claim either sees the extended
    /// lease or has taken the delivery, and then this matches nothing.
    pub async fn start_attempt(
        &self,
        delivery_id: &str,
        owner: &str,
        lease_micros: i64,
    ) -> Result<bool, StoreError> {
        let now = self.lease_now(4);
        let sql = format!(
            "UPDATE deliveries SET lease_until = {now} + $1
             WHERE id = $2 AND lease_owner = $3 AND state = 'PENDING' AND lease_until > {now}"
        );
        let query = sqlx::query(&sql).bind(lease_micros).bind(delivery_id).bind(owner);
        let updated = self.bind_lease_now(query).execute(&self.pool).await?;
        Ok(updated.rows_affected() == 1)
    }

    /// Records an attempt and its outcome, if `owner` still holds the lease.
    /// Returns whether it did.
    pub async fn finish_attempt(
        &self,
        claimed: &Claimed,
        owner: &str,
        attempt: &Attempt,
        outcome: &Outcome,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let (state, next) = match outcome {
            Outcome::Delivered => ("DELIVERED", attempt.at),
            Outcome::Retry(at) => ("PENDING", *at),
            Outcome::Failed | Outcome::Gone => ("FAILED", attempt.at),
        };
        let number = i64::from(claimed.attempts) + 1;
        let updated = sqlx::query(
            "UPDATE deliveries SET state = $1, attempts = $2, next_attempt_at = $3, lease_owner = NULL,
                lease_until = NULL, last_status = $4, last_error = $5, updated_at = $6
             WHERE id = $7 AND lease_owner = $8 AND state = 'PENDING'",
        )
        .bind(state)
        .bind(number)
        .bind(next)
        .bind(attempt.status_code.map(i64::from))
        .bind(attempt.error.as_deref())
        .bind(attempt.at)
        .bind(&claimed.delivery_id)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, error, duration_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&claimed.delivery_id)
        .bind(number)
        .bind(attempt.at)
        .bind(attempt.status_code.map(i64::from))
        .bind(attempt.error.as_deref())
        .bind(attempt.duration_ms as i64)
        .execute(&mut *tx)
        .await?;
        if *outcome == Outcome::Gone {
            sqlx::query("UPDATE webhooks SET status = 'DISABLED' WHERE id = $1 AND status = 'ACTIVE'")
                .bind(&claimed.webhook_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Deliveries, newest first: the dead-lettered ones only when `failed`.
    pub async fn deliveries(&self, failed: bool, webhook: Option<&str>) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(
            "SELECT d.id, e.id AS event_id, e.type AS event_type, d.webhook_id, w.url, d.state, d.attempts,
                d.last_status, d.last_error, d.updated_at
             FROM deliveries d JOIN events e ON e.seq = d.event_seq JOIN webhooks w ON w.id = d.webhook_id
             WHERE ($1 = 0 OR d.state = 'FAILED') AND ($2 IS NULL OR d.webhook_id = $2)
             ORDER BY d.event_seq DESC, d.id",
        )
        .bind(i64::from(failed))
        .bind(webhook)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Delivery {
                    id: r.try_get("id")?,
                    event_id: r.try_get("event_id")?,
                    event_type: r.try_get("event_type")?,
                    webhook_id: r.try_get("webhook_id")?,
                    url: r.try_get("url")?,
                    state: r.try_get("state")?,
                    attempts: r.try_get::<i64, _>("attempts")? as u32,
                    last_status: r.try_get::<Option<i64>, _>("last_status")?.map(|s| s as u16),
                    last_error: r.try_get("last_error")?,
                    updated_at: time(r.try_get("updated_at")?)?,
                })
            })
            .collect()
    }

    /// Sends a dead-lettered delivery again, with a fresh retry schedule. Its
    /// past attempts stay recorded.
    pub async fn redeliver(&self, id: &str) -> Result<(), StoreError> {
        let now = now_micros();
        let updated = sqlx::query(
            "UPDATE deliveries SET state = 'PENDING', attempts = 0, next_attempt_at = $1, updated_at = $1,
                lease_owner = NULL, lease_until = NULL
             WHERE id = $2 AND state = 'FAILED'
               AND webhook_id IN (SELECT id FROM webhooks WHERE status = 'ACTIVE')",
        )
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("failed delivery {id} of an active webhook")));
        }
        Ok(())
    }

    /// Every attempt of a delivery: `(attempt, status code, error, duration ms)`.
    pub async fn delivery_attempts(
        &self,
        id: &str,
    ) -> Result<Vec<(u32, Option<u16>, Option<String>, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT attempt, status_code, error, duration_ms FROM delivery_attempts WHERE delivery_id = $1
             ORDER BY attempt",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<i64, _>("attempt")? as u32,
                    r.try_get::<Option<i64>, _>("status_code")?.map(|s| s as u16),
                    r.try_get("error")?,
                    r.try_get::<i64, _>("duration_ms")? as u64,
                ))
            })
            .collect()
    }
}

/// What sending a claimed delivery needs: its event, its webhook's URL and
/// the secrets to sign with (the current one, then each previous one until
/// it expires).
async fn claimed_delivery(tx: &mut Transaction<'static, Any>, id: String) -> Result<Claimed, StoreError> {
    let row = sqlx::query(
        "SELECT d.id, d.attempts, e.id AS event_id, e.payload, w.id AS webhook_id, w.url, w.signing_secret
         FROM deliveries d JOIN events e ON e.seq = d.event_seq JOIN webhooks w ON w.id = d.webhook_id
         WHERE d.id = $1",
    )
    .bind(&id)
    .fetch_one(&mut **tx)
    .await?;
    let webhook_id: String = row.try_get("webhook_id")?;
    let mut secrets = vec![row.try_get::<String, _>("signing_secret")?];
    secrets.extend(webhook_keys::previous_secrets(tx, &webhook_id, now_micros()).await?);
    Ok(Claimed {
        delivery_id: id,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        event_id: row.try_get("event_id")?,
        payload: row.try_get("payload")?,
        webhook_id,
        url: row.try_get("url")?,
        secrets,
    })
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
