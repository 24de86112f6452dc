//! The rows of `run`'s background reconciliation: each chain's last run,
//! and the unexplained debits alarmed once each.

use sqlx::Row;

use crate::store::{Store, StoreError, Tx, to_i64};
use crate::{
    chain::Chain,
    deposits::resource::format_time,
    reconcile::{Debit, Run},
};

/// Keeps `run` as its chain's last reconciliation.
pub async fn record_run(tx: &mut Tx, run: &Run) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO reconcile_runs (chain, at, at_block, lines, differ, failed, skipped, detail, took_ms,
                                     started_at, slices, every_ms, period_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         ON CONFLICT (chain) DO UPDATE SET at = excluded.at, at_block = excluded.at_block, took_ms = excluded.took_ms,
             lines = excluded.lines, differ = excluded.differ, failed = excluded.failed,
             skipped = excluded.skipped, detail = excluded.detail, started_at = excluded.started_at,
             slices = excluded.slices, every_ms = excluded.every_ms, period_ms = excluded.period_ms",
    )
    .bind(&run.chain)
    .bind(run.at_micros)
    .bind(to_i64(run.at_block)?)
    .bind(to_i64(run.lines)?)
    .bind(to_i64(run.differ)?)
    .bind(to_i64(run.failed)?)
    .bind(to_i64(run.skipped)?)
    .bind(run.detail.to_string())
    .bind(to_i64(run.took_ms)?)
    .bind(run.started_micros)
    .bind(to_i64(run.slices)?)
    .bind(to_i64(run.every_ms)?)
    .bind(run.period_ms.map(to_i64).transpose()?)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Records `debit` unless it is known (the alarm is decided by the audit
/// log, see [`alarmed`]).
pub async fn record_debit(tx: &mut Tx, debit: &Debit, now: i64) -> Result<(), StoreError> {
    let transactions = serde_json::to_string(&debit.transactions)
        .map_err(|e| StoreError::Invalid(format!("a debit's transactions: {e}")))?;
    sqlx::query(
        "INSERT INTO unexplained_debits (chain, address, asset, block, account_id, change, transactions, first_seen_at, wallet)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (chain, address, asset, block) DO NOTHING",
    )
    .bind(&debit.chain)
    .bind(&debit.address)
    .bind(&debit.asset)
    .bind(to_i64(debit.block)?)
    .bind(&debit.account_id)
    .bind(&debit.change)
    .bind(&transactions)
    .bind(now)
    .bind(&debit.wallet)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Whether the audit log holds the alarm of `target` already: the log is
/// hash-chained, so a row written beside it cannot silence an alarm.
pub async fn alarmed(tx: &mut Tx, target: &str) -> Result<bool, StoreError> {
    let found = sqlx::query(
        "SELECT seq FROM audit_log WHERE action = 'reconcile.unexplained_debit' AND target_id = $1 LIMIT 1",
    )
    .bind(target)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(found.is_some())
}

impl Store {
    /// Each chain's last reconciliation, by chain; of one chain when asked.
    pub async fn reconcile_runs(&self, chain: Option<Chain>) -> Result<Vec<Run>, StoreError> {
        let rows =
            sqlx::query("SELECT * FROM reconcile_runs WHERE ($1 IS NULL OR chain = $1) ORDER BY chain")
                .bind(chain.map(|c| c.as_str()))
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                let at: i64 = r.try_get("at")?;
                let detail: String = r.try_get("detail")?;
                let count = |column: &str| -> Result<u64, StoreError> {
                    Ok(r.try_get::<i64, _>(column)?.max(0) as u64)
                };
                let period: Option<i64> = r.try_get("period_ms")?;
                Ok(Run {
                    chain: r.try_get("chain")?,
                    at: format_time(&crate::store::time(at)?),
                    at_micros: at,
                    started_micros: r.try_get::<Option<i64>, _>("started_at")?.unwrap_or(at),
                    took_ms: count("took_ms")?,
                    slices: count("slices")?,
                    every_ms: count("every_ms")?,
                    period_ms: period.map(|p| p.max(0) as u64),
                    at_block: count("at_block")?,
                    lines: count("lines")?,
                    differ: count("differ")?,
                    failed: count("failed")?,
                    skipped: count("skipped")?,
                    detail: serde_json::from_str(&detail)
                        .map_err(|_| StoreError::Corrupt("reconcile_runs.detail".into()))?,
                })
            })
            .collect()
    }
}
