//! An off-ramp's payout rows: the claim of the step that hands it to the
//! bank, the hand-off with the bank's reference, and the bank's answer.

use sqlx::Row;

use crate::store::{StoreError, Tx};
use crate::{
    bank::Answer,
    conversions::{resource::Type, state::Status},
};

/// How long a claim keeps other instances from calling the bank for the
/// same payout: longer than a bank's call takes.
pub const CLAIM_MICROS: i64 = 30_000_000;

/// A payout claimed for its hand-off to the bank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub organization: String,
    /// The client's bank account paid.
    pub bank_account: String,
    /// What is paid: the conversion's destination, in its smallest unit.
    pub cents: i64,
    pub currency: String,
}

/// Claims the payout of the `PROCESSING` off-ramp `id` for its hand-off at
/// `now`: `None` when it was handed off already, or another instance
/// claimed it within [`CLAIM_MICROS`].
pub(crate) async fn claim(tx: &mut Tx, id: &str, now: i64) -> Result<Option<Claimed>, StoreError> {
    let row = sqlx::query(
        "UPDATE conversions SET payout_claimed_at = $2
         WHERE id = $1 AND type = $3 AND status = $4 AND payout_handed_at IS NULL
           AND (payout_claimed_at IS NULL OR payout_claimed_at <= $5)
         RETURNING organization_id, payment_instructions_id, destination_currency",
    )
    .bind(id)
    .bind(now)
    .bind(Type::OffRamp.as_str())
    .bind(Status::Processing.as_str())
    .bind(now - CLAIM_MICROS)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let priced = sqlx::query(
        "SELECT COALESCE(c.destination_cents, q.destination_cents) AS cents
         FROM conversions c LEFT JOIN quotes q ON q.id = c.quote_id WHERE c.id = $1",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    let cents = priced
        .try_get::<Option<i64>, _>("cents")?
        .ok_or_else(|| StoreError::Corrupt(format!("off-ramp {id} has no destination amount")))?;
    Ok(Some(Claimed {
        organization: row.try_get("organization_id")?,
        bank_account: row.try_get("payment_instructions_id")?,
        cents,
        currency: row.try_get("destination_currency")?,
    }))
}

/// Shortens the claim on the payout of off-ramp `id` made at `claimed_at`
/// so that it lapses at `lapses_at`.
pub(crate) async fn release(
    tx: &mut Tx,
    id: &str,
    claimed_at: i64,
    lapses_at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE conversions SET payout_claimed_at = $3
         WHERE id = $1 AND payout_claimed_at = $2 AND payout_handed_at IS NULL",
    )
    .bind(id)
    .bind(claimed_at)
    .bind(lapses_at - CLAIM_MICROS)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Records the hand-off of off-ramp `id`'s payout under `reference` at
/// `now`, with the bank's answer unless one is recorded: whether it did.
pub(crate) async fn hand_off(
    tx: &mut Tx,
    id: &str,
    reference: Option<&str>,
    answer: Option<(Answer, &str, i64)>,
    now: i64,
) -> Result<bool, StoreError> {
    let (outcome, reason, due) =
        answer.map_or((None, None, None), |(a, r, d)| (Some(a.as_str()), Some(r), Some(d)));
    let done = sqlx::query(
        "UPDATE conversions SET payout_handed_at = $2, payout_reference = $3,
             payout_outcome = COALESCE(payout_outcome, $4), payout_reason = COALESCE(payout_reason, $5),
             payout_due_at = COALESCE(payout_due_at, $6, CASE WHEN payout_outcome IS NOT NULL THEN $2 END)
         WHERE id = $1 AND payout_handed_at IS NULL",
    )
    .bind(id)
    .bind(now)
    .bind(reference)
    .bind(outcome)
    .bind(reason)
    .bind(due)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}
