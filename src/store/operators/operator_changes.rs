//! Proposed changes of operators' rows, and the latches of their genesis.

use sqlx::{Row, any::AnyRow};

use crate::operators::resource::{Change, ChangeStatus, Proposal};
use crate::store::{Store, StoreError, Tx, time};

const COLUMNS: &str = "id, kind, status, proposed_by, target, proposal, reason, created_at, decided_by, \
                       decided_at, decision_reason";

fn change(row: &AnyRow) -> Result<Change, StoreError> {
    let kind: String = row.try_get("kind")?;
    let status: String = row.try_get("status")?;
    let proposal: String = row.try_get("proposal")?;
    Ok(Change {
        id: row.try_get("id")?,
        kind: kind.parse().map_err(StoreError::Corrupt)?,
        status: status.parse().map_err(StoreError::Corrupt)?,
        proposed_by: row.try_get("proposed_by")?,
        target: row.try_get("target")?,
        created_at: time(row.try_get("created_at")?)?,
        decided_by: row.try_get("decided_by")?,
        decided_at: row.try_get::<Option<i64>, _>("decided_at")?.map(time).transpose()?,
        proposal: serde_json::from_str::<Proposal>(&proposal)
            .map_err(|e| StoreError::Corrupt(format!("operator change proposal: {e}")))?,
        reason: row.try_get("reason")?,
        decision_reason: row.try_get("decision_reason")?,
    })
}

/// Writes a new pending change.
pub async fn insert(tx: &mut Tx, new: &Change) -> Result<(), StoreError> {
    let proposal = serde_json::to_string(&new.proposal).expect("a proposal serializes");
    sqlx::query(
        "INSERT INTO operator_changes (id, kind, status, proposed_by, target, proposal, reason, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&new.id)
    .bind(new.kind.as_str())
    .bind(new.status.as_str())
    .bind(&new.proposed_by)
    .bind(&new.target)
    .bind(proposal)
    .bind(&new.reason)
    .bind(new.created_at.timestamp_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Change `id`, its row locked until `tx` ends (PostgreSQL).
pub async fn lock(tx: &mut Tx, id: &str) -> Result<Option<Change>, StoreError> {
    let lock = crate::store::lock_suffix(tx);
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM operator_changes WHERE id = $1{lock}"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.as_ref().map(change).transpose()
}

/// Ends pending change `id` with `status`; `by` is the deciding admin
/// (none for an expiry). Answers whether it was still pending.
pub async fn decide(
    tx: &mut Tx,
    id: &str,
    status: ChangeStatus,
    by: Option<&str>,
    reason: Option<&str>,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE operator_changes SET status = $1, decided_by = $2, decided_at = $3, decision_reason = $4
         WHERE id = $5 AND status = 'PENDING'",
    )
    .bind(status.as_str())
    .bind(by)
    .bind(now)
    .bind(reason)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The ids of pending changes proposed before `before`.
pub async fn pending_before(tx: &mut Tx, before: i64) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT id FROM operator_changes WHERE status = 'PENDING' AND created_at < $1 ORDER BY created_at, id",
    )
    .bind(before)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
}

/// The ids of the pending changes `proposer` proposed.
pub async fn pending_of(tx: &mut Tx, proposer: &str) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT id FROM operator_changes WHERE status = 'PENDING' AND proposed_by = $1 ORDER BY id",
    )
    .bind(proposer)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
}

/// The suspensions pending (see [`crate::operators::suspension`]) made
/// after `since`, of `target` only when given, oldest first.
pub async fn pending_suspensions(
    tx: &mut Tx,
    target: Option<&str>,
    since: i64,
) -> Result<Vec<Change>, StoreError> {
    let of = if target.is_some() { "AND target = $2" } else { "" };
    let sql = format!(
        "SELECT {COLUMNS} FROM operator_changes WHERE status = 'PENDING' AND kind IN ({SUSPENDING})
         AND created_at > $1 {of} ORDER BY created_at, id"
    );
    let mut query = sqlx::query(&sql).bind(since);
    if let Some(target) = target {
        query = query.bind(target);
    }
    let rows = query.fetch_all(&mut **tx).await?;
    rows.iter().map(change).collect()
}

/// The kinds of change that suspend their target, as SQL.
const SUSPENDING: &str = "'operator.disable', 'operator.demote'";

/// Whether a pending change proposes a new operator with `email`.
pub async fn email_pending(tx: &mut Tx, email: &str) -> Result<bool, StoreError> {
    let rows = sqlx::query(
        "SELECT proposal FROM operator_changes WHERE kind = 'operator.create' AND status = 'PENDING'",
    )
    .fetch_all(&mut **tx)
    .await?;
    for row in rows {
        let text: String = row.try_get("proposal")?;
        let proposal: Proposal = serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("operator change proposal: {e}")))?;
        if proposal.email.is_some_and(|e| e.eq_ignore_ascii_case(email)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether latch `name` is closed.
pub async fn latched(tx: &mut Tx, name: &str) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT 1 FROM operator_latches WHERE name = $1")
        .bind(name)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

/// Closes latch `name` for good.
pub async fn latch(tx: &mut Tx, name: &str, detail: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO operator_latches (name, at, detail) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
    )
    .bind(name)
    .bind(now)
    .bind(detail)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl Store {
    /// The pending suspension of operator `id` made after `since`,
    /// if any (see [`pending_suspensions`]).
    pub async fn suspension_of(&self, id: &str, since: i64) -> Result<Option<Change>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM operator_changes WHERE status = 'PENDING' AND kind IN ({SUSPENDING})
             AND created_at > $1 AND target = $2 ORDER BY created_at LIMIT 1"
        ))
        .bind(since)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(change).transpose()
    }

    /// Changes of operators, newest first; only pending ones when asked.
    pub async fn operator_changes(&self, pending_only: bool, limit: i64) -> Result<Vec<Change>, StoreError> {
        let only = if pending_only { "WHERE status = 'PENDING'" } else { "" };
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM operator_changes {only} ORDER BY created_at DESC, id DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(change).collect()
    }
}
