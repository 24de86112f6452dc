//! The outbox: events are appended in the transaction of the change that
//! causes them, with a delivery per active webhook of the organization, and
//! read back in commit order by the pull API.

use std::collections::BTreeSet;

use serde_json::Value;
use sqlx::{Any, Row, Transaction};

use super::{Store, StoreError, deposits::deposit_from_row, parse_column, time};
use crate::{
    deposit::DepositStatus,
    events::{DEPOSIT_V2, Event},
};

/// Announces each deposit whose status differs from the one its last event
/// announced: the first event's id is the deposit's `dedup_key`, later ones
/// get ids of their own. Called inside the transaction that changed them, so
/// a rolled-back change announces nothing and a committed one always has its event.
pub(super) async fn announce_deposits<'a>(
    tx: &mut Transaction<'static, Any>,
    ids: impl IntoIterator<Item = &'a str>,
    now: i64,
) -> Result<(), StoreError> {
    let ids: BTreeSet<&str> = ids.into_iter().collect();
    for id in ids {
        let row = sqlx::query(&format!(
            "SELECT {}, announced_status,
                (SELECT organization_id FROM accounts a WHERE a.id = deposits.account_id) AS organization_id
             FROM deposits WHERE id = $1",
            super::deposits::DEPOSIT_COLUMNS
        ))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
        let deposit = deposit_from_row(&row)?;
        let announced: Option<String> = row.try_get("announced_status")?;
        let announced: Option<DepositStatus> =
            announced.map(|s| parse_column(&s, "deposits.announced_status")).transpose()?;
        if announced == Some(deposit.status) {
            continue;
        }
        let event_id =
            if announced.is_none() { deposit.dedup_key.clone() } else { uuid::Uuid::new_v4().to_string() };
        let organization: String = row.try_get("organization_id")?;
        let data = serde_json::to_value(&deposit).map_err(|e| StoreError::Invalid(e.to_string()))?;
        append(tx, &organization, DEPOSIT_V2, &deposit.id, &event_id, data, now).await?;
        sqlx::query("UPDATE deposits SET announced_status = $1 WHERE id = $2")
            .bind(deposit.status.as_str())
            .bind(&deposit.id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Appends one event and queues it for every active webhook of the
/// organization. Taking the next sequence number locks the counter row until
/// commit, so events are numbered in commit order.
pub(super) async fn append(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    kind: &str,
    resource_id: &str,
    event_id: &str,
    data: Value,
    now: i64,
) -> Result<i64, StoreError> {
    let seq: i64 =
        sqlx::query("UPDATE store_meta SET value = value + 1 WHERE key = 'event_seq' RETURNING value")
            .fetch_one(&mut **tx)
            .await?
            .try_get("value")?;
    let payload = serde_json::json!({ "id": event_id, "type": kind, "data": data }).to_string();
    sqlx::query(
        "INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(seq)
    .bind(event_id)
    .bind(organization)
    .bind(kind)
    .bind(resource_id)
    .bind(&payload)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let webhooks = sqlx::query("SELECT id FROM webhooks WHERE organization_id = $1 AND status = 'ACTIVE'")
        .bind(organization)
        .fetch_all(&mut **tx)
        .await?;
    for webhook in webhooks {
        let webhook: String = webhook.try_get("id")?;
        sqlx::query(
            "INSERT INTO deliveries (id, event_seq, webhook_id, resource_id, state, attempts, next_attempt_at,
                created_at, updated_at)
             VALUES ($1, $2, $3, $4, 'PENDING', 0, $5, $5, $5)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(seq)
        .bind(&webhook)
        .bind(resource_id)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    Ok(seq)
}

impl Store {
    /// Up to `limit` of the organization's events after the event `after`
    /// (from the first when `None`), in commit order.
    pub async fn events_after(
        &self,
        organization: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        let after_seq = match after {
            None => 0,
            Some(id) => sqlx::query("SELECT seq FROM events WHERE id = $1 AND organization_id = $2")
                .bind(id)
                .bind(organization)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("event {id}")))?
                .try_get("seq")?,
        };
        let rows = sqlx::query(
            "SELECT seq, payload, created_at FROM events WHERE organization_id = $1 AND seq > $2
             ORDER BY seq LIMIT $3",
        )
        .bind(organization)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let payload: String = r.try_get("payload")?;
                Ok(Event {
                    seq: r.try_get::<i64, _>("seq")? as u64,
                    envelope: serde_json::from_str(&payload)
                        .map_err(|_| StoreError::Corrupt(format!("events.payload = {payload:?}")))?,
                    created_at: time(r.try_get("created_at")?)?,
                })
            })
            .collect()
    }

    /// How many events the outbox holds.
    pub async fn event_count(&self) -> Result<u64, StoreError> {
        let n: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM events").fetch_one(&self.pool).await?.try_get("n")?;
        Ok(n as u64)
    }
}
