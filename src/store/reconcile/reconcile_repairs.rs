//! The rows of repairs asked for through the service: each repair's
//! credits, worth, requester and decision. Who asked is decided by the
//! audit log, never by these rows (see `reconcile::repairs`).

use alloy::primitives::U256;
use sqlx::{Row, any::AnyRow};

use crate::store::{Store, StoreError, Tx, USD_DECIMALS, time};
use crate::{
    amount::Amount,
    deposits::resource::format_time,
    reconcile::{Credit, Repair, RepairScope, RepairStatus},
};

/// A repair as it is first kept.
pub struct NewRepair<'a> {
    pub id: &'a str,
    pub chain: &'a str,
    pub scope: &'a RepairScope,
    pub credits: &'a [Credit],
    pub usd_micros: Option<i64>,
    pub requested_by: &'a str,
    pub reason: &'a str,
    pub now: i64,
}

fn json<T: serde::Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("a repair's {what}: {e}")))
}

/// Keeps a new repair, awaiting its decision (see [`decide`]).
pub async fn insert(tx: &mut Tx, repair: &NewRepair<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO reconcile_repairs (id, chain, scope, credits, usd_micros, status, requested_by, reason,
             deposits, created_at)
         VALUES ($1, $2, $3, $4, $5, 'AWAITING_APPROVAL', $6, $7, '[]', $8)",
    )
    .bind(repair.id)
    .bind(repair.chain)
    .bind(json(repair.scope, "scope")?)
    .bind(json(&repair.credits, "credits")?)
    .bind(repair.usd_micros)
    .bind(repair.requested_by)
    .bind(repair.reason)
    .bind(repair.now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Decides a repair that still awaits approval: `status`, by whom, the
/// deposits it recorded. Whether this call decided it (another decision
/// may have come first).
pub async fn decide(
    tx: &mut Tx,
    id: &str,
    status: RepairStatus,
    by: &str,
    deposits: &[String],
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE reconcile_repairs SET status = $2, decided_by = $3, deposits = $4, decided_at = $5
         WHERE id = $1 AND status = 'AWAITING_APPROVAL'",
    )
    .bind(id)
    .bind(status.as_str())
    .bind(by)
    .bind(json(&deposits, "deposits")?)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// What repairs of `chain` applied by their requester alone (no second
/// operator) since `since` (microseconds) were worth, in micro-dollars.
pub async fn applied_alone_since(tx: &mut Tx, chain: &str, since: i64) -> Result<u128, StoreError> {
    let rows = sqlx::query(
        "SELECT usd_micros FROM reconcile_repairs
         WHERE chain = $1 AND status = 'APPLIED' AND decided_by = requested_by AND created_at >= $2",
    )
    .bind(chain)
    .bind(since)
    .fetch_all(&mut **tx)
    .await?;
    let mut sum = 0u128;
    for row in rows {
        let worth: Option<i64> = row.try_get("usd_micros")?;
        sum = sum.saturating_add(worth.map_or(u128::MAX, |w| w.max(0) as u128));
    }
    Ok(sum)
}

/// The read of one repair by its id.
const REPAIR: &str = "SELECT * FROM reconcile_repairs WHERE id = $1";

/// One repair, read inside `tx`.
pub async fn repair_in(tx: &mut Tx, id: &str) -> Result<Repair, StoreError> {
    let row = sqlx::query(REPAIR)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("repair {id}")))?;
    repair_from(&row)
}

/// A JSON column, read as `T`.
fn from_json<T: serde::de::DeserializeOwned>(row: &AnyRow, column: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|_| StoreError::Corrupt(format!("reconcile_repairs.{column}")))
}

fn repair_from(row: &AnyRow) -> Result<Repair, StoreError> {
    let status: String = row.try_get("status")?;
    let usd_micros: Option<i64> = row.try_get("usd_micros")?;
    let decided_at: Option<i64> = row.try_get("decided_at")?;
    Ok(Repair {
        id: row.try_get("id")?,
        chain: row.try_get("chain")?,
        scope: from_json(row, "scope")?,
        credits: from_json(row, "credits")?,
        usd: usd_micros.map(|m| Amount::from_raw(U256::from(m.max(0)), USD_DECIMALS).to_string()),
        status: RepairStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt("reconcile_repairs.status".into()))?,
        requested_by: row.try_get("requested_by")?,
        reason: row.try_get("reason")?,
        decided_by: row.try_get("decided_by")?,
        deposits: from_json(row, "deposits")?,
        created_at: format_time(&time(row.try_get("created_at")?)?),
        decided_at: decided_at.map(|at| time(at).map(|t| format_time(&t))).transpose()?,
    })
}

impl Store {
    /// The repairs of `chain` (every chain's when none), newest first.
    pub async fn reconcile_repairs(&self, chain: Option<&str>) -> Result<Vec<Repair>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM reconcile_repairs WHERE ($1 IS NULL OR chain = $1) ORDER BY created_at DESC, id DESC
             LIMIT 500",
        )
        .bind(chain)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(repair_from).collect()
    }

    /// Repair `id`, as committed.
    pub async fn reconcile_repair(&self, id: &str) -> Result<Repair, StoreError> {
        let row = sqlx::query(REPAIR)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("repair {id}")))?;
        repair_from(&row)
    }
}
