//! Deliveries of events to webhooks: claimed under a lease, shared out
//! among organizations, and their attempts recorded many at a time.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Any, AnyConnection, Row, Transaction};
use zeroize::Zeroizing;

use crate::store::{
    Backend, Store, StoreError, Tx,
    clock::database_now,
    now_micros,
    params::{CHUNK, placeholders},
    webhook_keys,
};
use crate::{deposits::resource::rfc3339, pii::Cipher};

/// A delivery a worker leased: everything needed to send it. Its `Debug`
/// leaves the signing secrets out.
#[derive(Clone)]
pub struct Claimed {
    pub delivery_id: String,
    pub attempts: u32,
    pub event_id: String,
    pub payload: String,
    pub webhook_id: String,
    /// The webhook's organization: deliveries in flight are shared out by it.
    pub organization: String,
    pub url: String,
    /// The signing secrets valid now, newest first: the current one and up
    /// to two previous ones; or why they do not open (a value altered or
    /// moved from another row), which fails this delivery's attempt alone.
    pub secrets: Result<Vec<Zeroizing<String>>, String>,
}

impl std::fmt::Debug for Claimed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claimed")
            .field("delivery_id", &self.delivery_id)
            .field("attempts", &self.attempts)
            .field("event_id", &self.event_id)
            .field("webhook_id", &self.webhook_id)
            .field("organization", &self.organization)
            .field("secrets", &format_args!("[{} redacted]", self.secrets.as_ref().map_or(0, Vec::len)))
            .finish_non_exhaustive()
    }
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

/// An attempt made and what follows from it, to be recorded.
#[derive(Debug, Clone)]
pub struct Finished {
    pub claimed: Claimed,
    pub attempt: Attempt,
    pub outcome: Outcome,
}

/// How many more deliveries a claim may lease of each organization: `each`
/// for any organization not listed in `left`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rooms {
    pub each: u32,
    pub left: Vec<(String, u32)>,
}

impl Rooms {
    /// `each` for every organization.
    pub fn even(each: u32) -> Self {
        Self { each, left: Vec::new() }
    }
}

/// A delivery a claim may take: pending, due, not leased, and the earliest
/// event of its resource still pending for its webhook (so each receiver
/// gets a resource's events in order). Asked as the earliest rather than
/// as "no earlier one exists": a correlated minimum is read from the
/// resource's own index entries whatever the planner's statistics say,
/// where an anti-join on a store not yet analysed was planned as a scan of
/// the webhook's every pending delivery.
fn due(now: &str) -> String {
    format!(
        "d.state = 'PENDING' AND d.next_attempt_at <= {now} AND (d.lease_until IS NULL OR d.lease_until < {now})
         AND d.event_seq = (SELECT MIN(e.event_seq) FROM deliveries e
             WHERE e.webhook_id = d.webhook_id AND e.resource_id = d.resource_id AND e.state = 'PENDING')"
    )
}

impl Store {
    /// Whether a pending delivery is due: a read, since idle workers poll
    /// often and a write transaction would take SQLite's write lock from the
    /// watchers each time.
    pub(crate) async fn any_delivery_due(&self) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT id FROM deliveries WHERE state = 'PENDING' AND next_attempt_at <= {} LIMIT 1",
            self.lease_now(1)
        );
        Ok(self.bind_lease_now(sqlx::query(&sql)).fetch_optional(&self.pool).await?.is_some())
    }

    /// Leases up to `limit` due deliveries to `owner` for `lease_micros` in
    /// `tx`, at most `rooms` of each organization, and reads what sending
    /// each needs.
    pub(crate) async fn lease_deliveries(
        &self,
        tx: &mut Tx,
        owner: &str,
        lease_micros: i64,
        limit: u32,
        rooms: &Rooms,
    ) -> Result<Vec<Claimed>, StoreError> {
        let each = rooms.each.min(limit);
        let sql = self.claim_sql(rooms.left.len());
        let mut query =
            sqlx::query(&sql).bind(owner).bind(lease_micros).bind(i64::from(limit)).bind(i64::from(each));
        for (organization, room) in &rooms.left {
            query = query.bind(organization).bind(i64::from(*room));
        }
        if self.backend == Backend::Postgres {
            // A lease lost to a database crash only means the delivery is
            // sent again: at least once holds without waiting for the disk.
            sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut **tx).await?;
        }
        let ids = self.bind_lease_now(query).fetch_all(&mut **tx).await?;
        let ids = ids.iter().map(|row| row.try_get("id")).collect::<Result<Vec<String>, _>>()?;
        claimed(self.cipher()?, tx, &ids).await
    }

    /// The claim statement with `left` organizations' own rooms.
    fn claim_sql(&self, left: usize) -> String {
        let now = self.lease_now(5 + 2 * left);
        let due = due(&now);
        let candidates = match self.backend {
            Backend::Postgres => format!(
                "SELECT c.id, w.organization_id AS org, c.next_attempt_at, c.event_seq
                 FROM webhooks w CROSS JOIN LATERAL (
                     SELECT d.id, d.next_attempt_at, d.event_seq FROM deliveries d
                     WHERE d.webhook_id = w.id AND {due}
                     ORDER BY d.next_attempt_at, d.event_seq LIMIT $4 FOR UPDATE OF d SKIP LOCKED) c
                 WHERE w.status = 'ACTIVE'"
            ),
            // SQLite has no LATERAL; a correlated list does the same, where a
            // window over every due delivery read a backlog whole (about
            // 190 ms for 100,000, under the write lock the watchers wait on).
            Backend::Sqlite => format!(
                "SELECT p.id, w.organization_id AS org, p.next_attempt_at, p.event_seq
                 FROM webhooks w JOIN deliveries p ON p.id IN (
                     SELECT d.id FROM deliveries d WHERE d.webhook_id = w.id AND {due}
                     ORDER BY d.next_attempt_at, d.event_seq LIMIT $4)
                 WHERE w.status = 'ACTIVE'"
            ),
        };
        let (room, rooms) = match left {
            0 => ("$4".to_string(), String::new()),
            _ => {
                let rows: Vec<String> = (0..left)
                    .map(|i| match i {
                        0 => "SELECT $5 AS org, $6 AS room".to_string(),
                        _ => format!("SELECT ${}, ${}", 5 + 2 * i, 6 + 2 * i),
                    })
                    .collect();
                (
                    "COALESCE(b.room, $4)".to_string(),
                    format!("LEFT JOIN ({}) b ON b.org = c.org", rows.join(" UNION ALL ")),
                )
            }
        };
        format!(
            "UPDATE deliveries SET lease_owner = $1, lease_until = {now} + $2 WHERE id IN (
                SELECT id FROM (
                    SELECT c.id, c.event_seq, {room} AS room,
                        ROW_NUMBER() OVER (PARTITION BY c.org ORDER BY c.next_attempt_at, c.event_seq) AS turn
                    FROM ({candidates}) c {rooms}
                ) t WHERE turn <= room ORDER BY turn, event_seq LIMIT $3
             ) RETURNING id"
        )
    }

    /// Deliveries, newest first: the dead-lettered ones only when `failed`.
    pub async fn deliveries(&self, failed: bool, webhook: Option<&str>) -> Result<Vec<Delivery>, StoreError> {
        self.newest_deliveries(webhook, failed, i64::MAX).await
    }

    /// Sends a dead-lettered delivery again in `tx`, with a fresh retry
    /// schedule; its past attempts stay recorded. Its webhook's
    /// organization.
    pub(crate) async fn redeliver_in(&self, tx: &mut Tx, id: &str) -> Result<String, StoreError> {
        // Due now by the clock the claims compare with (see `clock`).
        let sql = format!(
            "UPDATE deliveries SET state = 'PENDING', attempts = 0, next_attempt_at = {}, updated_at = $1,
                lease_owner = NULL, lease_until = NULL
             WHERE id = $2 AND state = 'FAILED'
               AND webhook_id IN (SELECT id FROM webhooks WHERE status = 'ACTIVE')
             RETURNING webhook_id",
            self.lease_now(3)
        );
        let query = sqlx::query(&sql).bind(now_micros()).bind(id);
        let updated = self.bind_lease_now(query).fetch_optional(&mut **tx).await?;
        let Some(row) = updated else {
            return Err(StoreError::NotFound(format!("failed delivery {id} of an active webhook")));
        };
        let webhook: String = row.try_get("webhook_id")?;
        let organization = sqlx::query_scalar("SELECT organization_id FROM webhooks WHERE id = $1")
            .bind(&webhook)
            .fetch_one(&mut **tx)
            .await?;
        Ok(organization)
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

/// Moves each delivery of `finished` to what its attempt's outcome says,
/// where `owner` still holds it (or its lease lapsed and no one took it
/// since); the deliveries it moved.
pub(crate) async fn record_outcomes(
    tx: &mut Tx,
    owner: &str,
    finished: &[Finished],
) -> Result<Vec<String>, StoreError> {
    let mut recorded = Vec::with_capacity(finished.len());
    for chunk in finished.chunks(CHUNK / 7) {
        recorded.extend(record_outcome_chunk(tx, owner, chunk).await?);
    }
    Ok(recorded)
}

/// Records each attempt of `done`, numbered after its delivery's attempts so far.
pub(crate) async fn record_attempts(tx: &mut Tx, done: &[&Finished]) -> Result<(), StoreError> {
    for chunk in done.chunks(CHUNK / 5) {
        record_attempt_chunk(tx, chunk).await?;
    }
    Ok(())
}

/// Disables an active webhook whose receiver answered `410 Gone`.
pub(crate) async fn disable_gone_webhook(tx: &mut Tx, webhook_id: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE webhooks SET status = 'DISABLED' WHERE id = $1 AND status = 'ACTIVE'")
        .bind(webhook_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Moves each delivery of `chunk` to what its attempt's outcome says, in one
/// statement, where `owner` still holds it; the deliveries it moved. A retry
/// falls due its wait after now by the database's clock on PostgreSQL (see
/// `clock`), after the attempt on SQLite.
async fn record_outcome_chunk(
    tx: &mut Transaction<'static, Any>,
    owner: &str,
    chunk: &[Finished],
) -> Result<Vec<String>, StoreError> {
    let rows: Vec<String> = (0..chunk.len())
        .map(|i| {
            let p = 2 + 7 * i;
            let [id, state, attempts, wait, status, error, at] =
                std::array::from_fn(|k| format!("${}", p + k));
            format!(
                "SELECT {id} AS id, {state} AS state, {attempts} AS attempts, {wait} AS wait, \
                 {status} AS status, {error} AS error, {at} AS at"
            )
        })
        .collect();
    let now = database_now(tx).unwrap_or("v.at");
    let sql = format!(
        "UPDATE deliveries SET state = v.state, attempts = v.attempts, next_attempt_at = {now} + v.wait,
            lease_owner = NULL, lease_until = NULL, last_status = v.status, last_error = v.error, updated_at = v.at
         FROM ({}) v WHERE deliveries.id = v.id AND deliveries.lease_owner = $1 AND deliveries.state = 'PENDING'
         RETURNING deliveries.id",
        rows.join(" UNION ALL ")
    );
    let query = chunk.iter().fold(sqlx::query(&sql).bind(owner), |query, one| {
        let (state, wait) = match one.outcome {
            Outcome::Delivered => ("DELIVERED", 0),
            Outcome::Retry(at) => ("PENDING", at.saturating_sub(one.attempt.at)),
            Outcome::Failed | Outcome::Gone => ("FAILED", 0),
        };
        query
            .bind(&one.claimed.delivery_id)
            .bind(state)
            .bind(i64::from(one.claimed.attempts) + 1)
            .bind(wait)
            .bind(one.attempt.status_code.map(i64::from))
            .bind(one.attempt.error.as_deref())
            .bind(one.attempt.at)
    });
    let rows = query.fetch_all(&mut **tx).await?;
    rows.iter().map(|row| Ok(row.try_get::<String, _>(0)?)).collect()
}

/// Each attempt of `chunk`, in one statement, numbered after the
/// delivery's attempts recorded so far (a delivery sent again after its
/// dead letter, or resent, keeps its earlier attempts).
async fn record_attempt_chunk(
    tx: &mut Transaction<'static, Any>,
    chunk: &[&Finished],
) -> Result<(), StoreError> {
    let rows: Vec<String> = (0..chunk.len())
        .map(|i| {
            let first = 1 + 5 * i;
            format!(
                "(${first}, (SELECT COALESCE(MAX(a.attempt), 0) + 1 FROM delivery_attempts a \
                 WHERE a.delivery_id = ${first}), {})",
                placeholders(first + 1, 4)
            )
        })
        .collect();
    let sql = format!(
        "INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, error, duration_ms) VALUES {}",
        rows.join(", ")
    );
    let query = chunk.iter().fold(sqlx::query(&sql), |query, one| {
        query
            .bind(&one.claimed.delivery_id)
            .bind(one.attempt.at)
            .bind(one.attempt.status_code.map(i64::from))
            .bind(one.attempt.error.as_deref())
            .bind(one.attempt.duration_ms as i64)
    });
    query.execute(&mut **tx).await?;
    Ok(())
}

/// What sending each claimed delivery needs: its event, its webhook's
/// URL and the secrets to sign with (the current one, then each
/// previous one until it expires).
async fn claimed(
    cipher: &Cipher,
    conn: &mut AnyConnection,
    ids: &[String],
) -> Result<Vec<Claimed>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "SELECT d.id, d.attempts, e.id AS event_id, e.payload, w.id AS webhook_id, w.organization_id,
                w.url, w.signing_key_id, w.signing_secret,
                (SELECT COUNT(*) FROM webhook_previous_keys k WHERE k.webhook_id = w.id) AS previous_keys
             FROM deliveries d JOIN events e ON e.seq = d.event_seq JOIN webhooks w ON w.id = d.webhook_id
             WHERE d.id IN ({}) ORDER BY d.event_seq",
            placeholders(1, chunk.len())
        );
        let rows = chunk.iter().fold(sqlx::query(&sql), |q, id| q.bind(id)).fetch_all(&mut *conn).await?;
        for row in rows {
            let webhook_id: String = row.try_get("webhook_id")?;
            let (key_id, sealed): (String, String) =
                (row.try_get("signing_key_id")?, row.try_get("signing_secret")?);
            let previous = row.try_get::<i64, _>("previous_keys")? > 0;
            let secrets = match signing_secrets(cipher, conn, &webhook_id, (&key_id, &sealed), previous).await
            {
                Ok(secrets) => Ok(secrets),
                Err(StoreError::Pii(unopenable)) => {
                    tracing::error!(webhook_id, error = %unopenable, "a webhook's signing secret does not open");
                    Err(format!("the webhook's signing secret does not open: {unopenable}"))
                }
                Err(error) => return Err(error),
            };
            out.push(Claimed {
                delivery_id: row.try_get("id")?,
                attempts: row.try_get::<i64, _>("attempts")? as u32,
                event_id: row.try_get("event_id")?,
                payload: row.try_get("payload")?,
                webhook_id,
                organization: row.try_get("organization_id")?,
                url: row.try_get("url")?,
                secrets,
            });
        }
    }
    Ok(out)
}

/// A webhook's current signing secret and, when it has any, its previous
/// ones valid now, opened.
async fn signing_secrets(
    cipher: &Cipher,
    conn: &mut AnyConnection,
    webhook_id: &str,
    (key_id, sealed): (&str, &str),
    previous: bool,
) -> Result<Vec<Zeroizing<String>>, StoreError> {
    let mut secrets = vec![webhook_keys::open_signing_secret(cipher, webhook_id, key_id, sealed)?];
    if previous {
        secrets.extend(webhook_keys::previous_secrets(cipher, conn, webhook_id, now_micros()).await?);
    }
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use zeroize::Zeroizing;

    use super::Claimed;

    #[test]
    fn a_claimed_deliverys_debug_shows_no_secret() {
        let claimed = Claimed {
            delivery_id: "d".into(),
            attempts: 0,
            event_id: "e".into(),
            payload: "{}".into(),
            webhook_id: "w".into(),
            organization: "o".into(),
            url: "https://receiver.test/".into(),
            secrets: Ok(vec![Zeroizing::new("whsec_c2VjcmV0".into())]),
        };
        let shown = format!("{claimed:?}");
        assert!(!shown.contains("whsec_"), "{shown}");
        assert!(shown.contains("[1 redacted]"), "{shown}");
    }
}
