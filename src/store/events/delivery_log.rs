//! Webhook deliveries as people read them: one webhook's deliveries,
//! newest first, each with its attempts; a delivery resent.

use sqlx::Row;

use crate::store::{Delivery, Store, StoreError, Tx, now_micros, time};

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    pub number: u32,
    /// Microseconds since the epoch.
    pub at: i64,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

impl Store {
    /// The newest `limit` deliveries (of `webhook` only, when given; the
    /// dead-lettered ones only when `failed`).
    pub async fn newest_deliveries(
        &self,
        webhook: Option<&str>,
        failed: bool,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(
            "SELECT d.id, e.id AS event_id, e.type AS event_type, d.webhook_id, w.url, d.state, d.attempts,
                d.last_status, d.last_error, d.updated_at
             FROM deliveries d JOIN events e ON e.seq = d.event_seq JOIN webhooks w ON w.id = d.webhook_id
             WHERE ($1 IS NULL OR d.webhook_id = $1) AND ($2 = 0 OR d.state = 'FAILED')
             ORDER BY d.event_seq DESC, d.id LIMIT $3",
        )
        .bind(webhook)
        .bind(i64::from(failed))
        .bind(limit)
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

    /// Every attempt of the deliveries `ids`, in order.
    pub async fn attempts_of(&self, ids: &[String]) -> Result<Vec<(String, AttemptRow)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list = crate::store::params::placeholders(1, ids.len());
        let sql = format!(
            "SELECT delivery_id, attempt, at, status_code, error, duration_ms FROM delivery_attempts
             WHERE delivery_id IN ({list}) ORDER BY delivery_id, attempt"
        );
        let rows = ids.iter().fold(sqlx::query(&sql), |q, id| q.bind(id)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let attempt = AttemptRow {
                    number: r.try_get::<i64, _>("attempt")? as u32,
                    at: r.try_get("at")?,
                    status_code: r.try_get::<Option<i64>, _>("status_code")?.map(|s| s as u16),
                    error: r.try_get("error")?,
                    duration_ms: r.try_get::<i64, _>("duration_ms")? as u64,
                };
                Ok((r.try_get("delivery_id")?, attempt))
            })
            .collect()
    }

    /// Sends delivery `id` of an active webhook of `organization` again,
    /// delivered or dead-lettered, with a fresh retry schedule (its earlier
    /// attempts stay recorded); `false` when there is no such delivery or
    /// it is still being sent.
    pub(crate) async fn resend_in(
        &self,
        tx: &mut Tx,
        organization: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE deliveries SET state = 'PENDING', attempts = 0, next_attempt_at = {}, updated_at = $1,
                lease_owner = NULL, lease_until = NULL
             WHERE id = $2 AND state IN ('FAILED', 'DELIVERED')
               AND webhook_id IN (SELECT id FROM webhooks WHERE status = 'ACTIVE' AND organization_id = $3)",
            self.lease_now(4)
        );
        let query = sqlx::query(&sql).bind(now_micros()).bind(id).bind(organization);
        let updated = self.bind_lease_now(query).execute(&mut **tx).await?;
        Ok(updated.rows_affected() == 1)
    }
}
