//! Event sinks' cursors and the outbox's retention. A sink (NATS JetStream)
//! takes the outbox in commit order from its own durable cursor, one
//! instance at a time under the lease on its row; the purge removes only
//! the oldest events that every sink and every webhook delivery has taken.

use sqlx::Row;

use crate::store::{Store, StoreError, Tx, now_micros};

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

impl Store {
    /// Takes (or renews) in `tx` the lease on sink `name` for `owner`, for
    /// `lease_micros` from now (the database's clock on PostgreSQL, as for
    /// worker leases). The sink's cursor when taken; `None` while another
    /// instance holds it or the sink does not exist.
    pub(crate) async fn lease_sink(
        &self,
        tx: &mut Tx,
        name: &str,
        owner: &str,
        lease_micros: i64,
    ) -> Result<Option<i64>, StoreError> {
        let now = self.lease_now(4);
        let sql = format!(
            "UPDATE event_sinks SET lease_owner = $1, lease_until = {now} + $2
             WHERE name = $3 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < {now})
             RETURNING last_seq"
        );
        let query = sqlx::query(&sql).bind(owner).bind(lease_micros).bind(name);
        match self.bind_lease_now(query).fetch_optional(&mut **tx).await? {
            Some(row) => Ok(Some(row.try_get("last_seq")?)),
            None => Ok(None),
        }
    }

    /// Moves sink `name`'s cursor on to `seq` (never back) and renews the
    /// lease for `lease_micros` in `tx`, while `owner` still holds it;
    /// whether it did.
    pub(crate) async fn move_sink(
        &self,
        tx: &mut Tx,
        name: &str,
        owner: &str,
        seq: i64,
        lease_micros: i64,
    ) -> Result<bool, StoreError> {
        let now = self.lease_now(6);
        let sql = format!(
            "UPDATE event_sinks SET last_seq = CASE WHEN last_seq < $1 THEN $1 ELSE last_seq END,
                 lease_until = {now} + $2, updated_at = $3
             WHERE name = $4 AND lease_owner = $5"
        );
        let query = sqlx::query(&sql).bind(seq).bind(lease_micros).bind(now_micros()).bind(name).bind(owner);
        let done = self.bind_lease_now(query).execute(&mut **tx).await?;
        Ok(done.rows_affected() == 1)
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

    /// Deletes sink `name` in `tx` unless an instance holds its lease;
    /// whether it did.
    pub(crate) async fn delete_idle_sink(&self, tx: &mut Tx, name: &str) -> Result<bool, StoreError> {
        let now = self.lease_now(2);
        let sql = format!(
            "DELETE FROM event_sinks WHERE name = $1 AND (lease_until IS NULL OR lease_until < {now})"
        );
        let done = self.bind_lease_now(sqlx::query(&sql).bind(name)).execute(&mut **tx).await?;
        Ok(done.rows_affected() == 1)
    }

    /// The outbox's oldest event, if any.
    pub(crate) async fn first_event_seq(&self) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query("SELECT MIN(seq) AS first FROM events")
            .fetch_one(&self.pool)
            .await?
            .try_get("first")?)
    }

    /// The last event the purge may remove: before the first event at or
    /// after `before`, the first a webhook still owes and the first a sink
    /// has not taken.
    pub(crate) async fn purge_bound(&self, before: i64) -> Result<i64, StoreError> {
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

/// Creates sink `name` at the outbox's start in `tx` unless it exists: from
/// then on the purge keeps every event it has not taken. Whether it was
/// created.
pub(crate) async fn insert_sink(tx: &mut Tx, name: &str) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO event_sinks (name, last_seq, created_at, updated_at) VALUES ($1, 0, $2, $2)
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(name)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Gives up `owner`'s lease on sink `name` in `tx`.
pub(crate) async fn free_sink(tx: &mut Tx, name: &str, owner: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE event_sinks SET lease_owner = NULL, lease_until = NULL WHERE name = $1 AND lease_owner = $2",
    )
    .bind(name)
    .bind(owner)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Removes in `tx` the events of seq `from` to `upto` with their finished
/// deliveries (delivered or dead-lettered) and attempts, keeping every
/// event a `PENDING` delivery still owes; how many events were removed.
pub(crate) async fn purge_range(tx: &mut Tx, from: i64, upto: i64) -> Result<u64, StoreError> {
    sqlx::query(
        "DELETE FROM delivery_attempts WHERE delivery_id IN
             (SELECT id FROM deliveries WHERE event_seq BETWEEN $1 AND $2 AND state <> 'PENDING')",
    )
    .bind(from)
    .bind(upto)
    .execute(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM deliveries WHERE event_seq BETWEEN $1 AND $2 AND state <> 'PENDING'")
        .bind(from)
        .bind(upto)
        .execute(&mut **tx)
        .await?;
    let done = sqlx::query(
        "DELETE FROM events WHERE seq BETWEEN $1 AND $2
         AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = events.seq)",
    )
    .bind(from)
    .bind(upto)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected())
}
