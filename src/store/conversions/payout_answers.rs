//! Operators' answers to payouts waiting for a second operator's
//! confirmation (see `conversions::payout`): written, locked, confirmed; and
//! the payout's outcome set inside a transaction.

use sqlx::Row;

use crate::store::{StoreError, Tx, lock_suffix, now_micros};
use crate::{bank::Answer, conversions::resource::Type};

/// An answer given and not yet confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unconfirmed {
    pub outcome: Answer,
    pub reason: String,
    /// As [`crate::audit::Actor::recorded`] writes it.
    pub answered_by: String,
    /// The off-ramp's organization.
    pub organization: String,
}

/// The organization of off-ramp `id` when it has a payout handed to the
/// bank and no outcome yet.
pub async fn awaits_answer(tx: &mut Tx, id: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "SELECT organization_id FROM conversions WHERE id = $1 AND type = $2 AND payout_handed_at IS NOT NULL
             AND payout_outcome IS NULL",
    )
    .bind(id)
    .bind(Type::OffRamp.as_str())
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
}

/// Sets the outcome of off-ramp `id`'s payout, due now: `false` when it was
/// not handed over or has an outcome already.
pub async fn set_outcome(tx: &mut Tx, id: &str, answer: Answer, reason: &str) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE conversions SET payout_outcome = $2, payout_reason = $3, payout_due_at = $4
         WHERE id = $1 AND type = $5 AND payout_handed_at IS NOT NULL AND payout_outcome IS NULL",
    )
    .bind(id)
    .bind(answer.as_str())
    .bind(reason)
    .bind(now_micros())
    .bind(Type::OffRamp.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Writes an answer awaiting confirmation; `false` when off-ramp `id` has
/// one already.
pub async fn insert(tx: &mut Tx, id: &str, answer: &Unconfirmed) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO payout_answers (conversion_id, outcome, reason, answered_by, answered_at)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (conversion_id) DO NOTHING",
    )
    .bind(id)
    .bind(answer.outcome.as_str())
    .bind(&answer.reason)
    .bind(&answer.answered_by)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The unconfirmed answer to off-ramp `id`'s payout, its row locked until
/// `tx` ends (PostgreSQL).
pub async fn lock(tx: &mut Tx, id: &str) -> Result<Option<Unconfirmed>, StoreError> {
    let sql = format!(
        "SELECT a.outcome, a.reason, a.answered_by, c.organization_id
         FROM payout_answers a JOIN conversions c ON c.id = a.conversion_id
         WHERE a.conversion_id = $1 AND a.confirmed_at IS NULL{}",
        lock_suffix(tx)
    );
    let row = sqlx::query(&sql).bind(id).fetch_optional(&mut **tx).await?;
    row.map(|r| {
        let outcome: String = r.try_get("outcome")?;
        Ok(Unconfirmed {
            outcome: outcome.parse().map_err(StoreError::Corrupt)?,
            reason: r.try_get("reason")?,
            answered_by: r.try_get("answered_by")?,
            organization: r.try_get("organization_id")?,
        })
    })
    .transpose()
}

/// Marks the answer to off-ramp `id` confirmed by `by`.
pub async fn confirm(tx: &mut Tx, id: &str, by: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE payout_answers SET confirmed_by = $2, confirmed_at = $3 WHERE conversion_id = $1")
        .bind(id)
        .bind(by)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
    Ok(())
}
