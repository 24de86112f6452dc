//! The outbox: events are appended in the transaction of the change that
//! causes them, with a delivery per active webhook of the organization, and
//! read back in commit order by the pull API.

use std::collections::{HashMap, HashSet};

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
/// a rolled-back change announces nothing and a committed one always has its
/// event. Works in batches: a backfill announces thousands at once.
pub(super) async fn announce_deposits<'a>(
    tx: &mut Transaction<'static, Any>,
    ids: impl IntoIterator<Item = &'a str>,
    now: i64,
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    let ids: Vec<&str> = ids.into_iter().filter(|id| seen.insert(*id)).collect();
    let mut announce = Vec::new();
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "SELECT {}, announced_status,
                (SELECT organization_id FROM accounts a WHERE a.id = deposits.account_id) AS organization_id
             FROM deposits WHERE id IN ({})",
            super::deposits::DEPOSIT_COLUMNS,
            placeholders(1, chunk.len())
        );
        let rows = chunk.iter().fold(sqlx::query(&sql), |q, id| q.bind(*id)).fetch_all(&mut **tx).await?;
        let mut found = HashMap::new();
        for row in rows {
            let deposit = deposit_from_row(&row)?;
            let announced: Option<String> = row.try_get("announced_status")?;
            let announced: Option<DepositStatus> =
                announced.map(|s| parse_column(&s, "deposits.announced_status")).transpose()?;
            if announced != Some(deposit.status) {
                let organization: String = row.try_get("organization_id")?;
                found.insert(deposit.id.clone(), (deposit, announced.is_none(), organization));
            }
        }
        // In the order the changes were made.
        announce.extend(chunk.iter().filter_map(|id| found.remove(*id)));
    }
    if announce.is_empty() {
        return Ok(());
    }
    let mut events = Vec::with_capacity(announce.len());
    for (deposit, first, organization) in &announce {
        let event_id = if *first { deposit.dedup_key.clone() } else { uuid::Uuid::new_v4().to_string() };
        let data = serde_json::to_value(deposit).map_err(|e| StoreError::Invalid(e.to_string()))?;
        events.push(NewEvent {
            organization,
            kind: DEPOSIT_V2,
            resource_id: &deposit.id,
            id: event_id,
            data,
        });
    }
    append(tx, &events, now).await?;
    let changed: Vec<&str> = announce.iter().map(|(d, ..)| d.id.as_str()).collect();
    for chunk in changed.chunks(CHUNK) {
        let query = format!(
            "UPDATE deposits SET announced_status = status WHERE id IN ({})",
            placeholders(1, chunk.len())
        );
        chunk.iter().fold(sqlx::query(&query), |q, id| q.bind(*id)).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Rows per multi-row statement: well inside both databases' parameter limits.
pub(super) const CHUNK: usize = 500;

/// `$first, $first+1, …` for `count` parameters.
pub(super) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// An event to append.
pub(super) struct NewEvent<'a> {
    pub organization: &'a str,
    pub kind: &'a str,
    pub resource_id: &'a str,
    pub id: String,
    pub data: Value,
}

/// Appends events, in order, and queues each for every active webhook of its
/// organization. Taking the sequence numbers locks the counter row until
/// commit, so events are numbered in commit order.
pub(super) async fn append(
    tx: &mut Transaction<'static, Any>,
    events: &[NewEvent<'_>],
    now: i64,
) -> Result<(), StoreError> {
    let last: i64 =
        sqlx::query("UPDATE store_meta SET value = value + $1 WHERE key = 'event_seq' RETURNING value")
            .bind(events.len() as i64)
            .fetch_one(&mut **tx)
            .await?
            .try_get("value")?;
    let first = last - events.len() as i64 + 1;
    let mut webhooks: HashMap<&str, Vec<String>> = HashMap::new();
    for event in events {
        if !webhooks.contains_key(event.organization) {
            let rows =
                sqlx::query("SELECT id FROM webhooks WHERE organization_id = $1 AND status = 'ACTIVE'")
                    .bind(event.organization)
                    .fetch_all(&mut **tx)
                    .await?;
            let ids = rows.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?;
            webhooks.insert(event.organization, ids);
        }
    }
    let numbered: Vec<(i64, &NewEvent)> = (first..).zip(events).collect();
    for chunk in numbered.chunks(CHUNK / 7) {
        let values: Vec<String> =
            (0..chunk.len()).map(|i| format!("({})", placeholders(i * 7 + 1, 7))).collect();
        let sql = format!(
            "INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at) VALUES {}",
            values.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for (seq, event) in chunk {
            let payload =
                serde_json::json!({ "id": event.id, "type": event.kind, "data": event.data }).to_string();
            query = query
                .bind(*seq)
                .bind(event.id.clone())
                .bind(event.organization)
                .bind(event.kind)
                .bind(event.resource_id)
                .bind(payload)
                .bind(now);
        }
        query.execute(&mut **tx).await?;
    }
    let deliveries: Vec<(i64, &str, &str)> = numbered
        .iter()
        .flat_map(|(seq, e)| webhooks[e.organization].iter().map(move |w| (*seq, w.as_str(), e.resource_id)))
        .collect();
    for chunk in deliveries.chunks(CHUNK / 5) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let p = i * 5;
                format!(
                    "(${}, ${}, ${}, ${}, 'PENDING', 0, ${n}, ${n}, ${n})",
                    p + 1,
                    p + 2,
                    p + 3,
                    p + 4,
                    n = p + 5
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO deliveries (id, event_seq, webhook_id, resource_id, state, attempts, next_attempt_at,
                created_at, updated_at) VALUES {}",
            values.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for (seq, webhook, resource) in chunk {
            query = query
                .bind(uuid::Uuid::new_v4().to_string())
                .bind(*seq)
                .bind(*webhook)
                .bind(*resource)
                .bind(now);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
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
