//! Event sinks' cursors and the outbox's retention. A sink (NATS JetStream)
//! takes the outbox in commit order from its own durable cursor, one
//! instance at a time under the lease on its row; the purge removes only
//! the oldest events that every sink and every webhook delivery has taken.

use sqlx::Row;

use super::{Store, StoreError, now_micros};

/// An event as a sink publishes it: its envelope, and what names its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    pub seq: i64,
    pub id: String,
    pub organization: String,
    pub kind: String,
    pub resource_id: String,
    /// The envelope, exactly the body a webhook receives.
    pub payload: String,
}

/// A sink's cursor, as `events sinks list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SinkCursor {
    pub name: String,
    pub last_seq: i64,
    /// Events committed after the cursor.
    pub behind: i64,
    pub lease_owner: Option<String>,
}

/// Events purged per transaction.
const PURGE_BATCH: i64 = 5_000;

impl Store {
    /// Takes (or renews) the lease on sink `name` for `owner` until
    /// `until` (microseconds), creating the sink at the outbox's start on
    /// first use. The sink's cursor when taken; `None` while another
    /// instance holds it.
    pub async fn take_sink(&self, name: &str, owner: &str, until: i64) -> Result<Option<i64>, StoreError> {
        let now = now_micros();
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO event_sinks (name, last_seq, created_at, updated_at) VALUES ($1, 0, $2, $2)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(
            "UPDATE event_sinks SET lease_owner = $1, lease_until = $2
             WHERE name = $3 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < $4)
             RETURNING last_seq",
        )
        .bind(owner)
        .bind(until)
        .bind(name)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row.map(|r| r.try_get("last_seq")).transpose()?)
    }

    /// Moves sink `name`'s cursor on to `seq` while `owner` still holds its
    /// lease; never back. False when the lease was lost: the caller stops.
    pub async fn advance_sink(&self, name: &str, owner: &str, seq: i64) -> Result<bool, StoreError> {
        let now = now_micros();
        let done = sqlx::query(
            "UPDATE event_sinks SET last_seq = CASE WHEN last_seq < $1 THEN $1 ELSE last_seq END,
                 updated_at = $2
             WHERE name = $3 AND lease_owner = $4 AND lease_until >= $2",
        )
        .bind(seq)
        .bind(now)
        .bind(name)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives up `owner`'s lease on sink `name` (at shutdown), so another
    /// instance takes it at once.
    pub async fn release_sink(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE event_sinks SET lease_owner = NULL, lease_until = NULL WHERE name = $1 AND lease_owner = $2")
            .bind(name)
            .bind(owner)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Up to `limit` events after `after`, in commit order.
    pub async fn outbox_after(&self, after: i64, limit: u32) -> Result<Vec<OutboxEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, id, organization_id, type, resource_id, payload FROM events
             WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(OutboxEvent {
                    seq: r.try_get("seq")?,
                    id: r.try_get("id")?,
                    organization: r.try_get("organization_id")?,
                    kind: r.try_get("type")?,
                    resource_id: r.try_get("resource_id")?,
                    payload: r.try_get("payload")?,
                })
            })
            .collect()
    }

    /// Every sink's cursor and how far behind the outbox it is.
    pub async fn sinks(&self) -> Result<Vec<SinkCursor>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.name, s.last_seq, s.lease_owner, s.lease_until,
                 (SELECT COUNT(*) FROM events e WHERE e.seq > s.last_seq) AS behind
             FROM event_sinks s ORDER BY s.name",
        )
        .fetch_all(&self.pool)
        .await?;
        let now = now_micros();
        rows.iter()
            .map(|r| {
                let until: Option<i64> = r.try_get("lease_until")?;
                Ok(SinkCursor {
                    name: r.try_get("name")?,
                    last_seq: r.try_get("last_seq")?,
                    behind: r.try_get("behind")?,
                    lease_owner: r
                        .try_get::<Option<String>, _>("lease_owner")?
                        .filter(|_| until >= Some(now)),
                })
            })
            .collect()
    }

    /// Forgets sink `name` and its cursor: the purge no longer waits for it.
    /// False when there was none.
    pub async fn remove_sink(&self, name: &str) -> Result<bool, StoreError> {
        let done =
            sqlx::query("DELETE FROM event_sinks WHERE name = $1").bind(name).execute(&self.pool).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the events committed before `before` (microseconds) that
    /// every sink and every webhook has taken, oldest first, with their
    /// finished deliveries: never an event past a sink's cursor, nor one a
    /// webhook still owes (a `PENDING` delivery) or any after it. How many
    /// events were removed.
    pub async fn purge_events(&self, before: i64) -> Result<u64, StoreError> {
        let bound = self.purge_bound(before).await?;
        let mut removed = 0;
        loop {
            let mut tx = self.begin().await?;
            let first: Option<i64> = sqlx::query("SELECT MIN(seq) AS first FROM events")
                .fetch_one(&mut *tx)
                .await?
                .try_get("first")?;
            let Some(first) = first.filter(|f| *f <= bound) else { break };
            let upto = bound.min(first + PURGE_BATCH - 1);
            sqlx::query(
                "DELETE FROM delivery_attempts WHERE delivery_id IN
                     (SELECT id FROM deliveries WHERE event_seq <= $1)",
            )
            .bind(upto)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM deliveries WHERE event_seq <= $1").bind(upto).execute(&mut *tx).await?;
            let done = sqlx::query("DELETE FROM events WHERE seq <= $1").bind(upto).execute(&mut *tx).await?;
            tx.commit().await?;
            removed += done.rows_affected();
        }
        Ok(removed)
    }

    /// The last event the purge may remove: before the first event at or
    /// after `before`, the first a webhook still owes and the first a sink
    /// has not taken.
    async fn purge_bound(&self, before: i64) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "SELECT
                 (SELECT seq FROM events WHERE created_at >= $1 ORDER BY seq LIMIT 1) AS young,
                 (SELECT MAX(seq) FROM events) AS last,
                 (SELECT MIN(event_seq) FROM deliveries WHERE state = 'PENDING') AS owed,
                 (SELECT MIN(last_seq) FROM event_sinks) AS sunk",
        )
        .bind(before)
        .fetch_one(&self.pool)
        .await?;
        let young: Option<i64> = row.try_get("young")?;
        let last: Option<i64> = row.try_get("last")?;
        let owed: Option<i64> = row.try_get("owed")?;
        let sunk: Option<i64> = row.try_get("sunk")?;
        let mut bound = young.map_or(last.unwrap_or(0), |y| y - 1);
        if let Some(owed) = owed {
            bound = bound.min(owed - 1);
        }
        if let Some(sunk) = sunk {
            bound = bound.min(sunk);
        }
        Ok(bound)
    }
}
