//! An off-ramp's refund rows (see `conversions::off_ramp::refunds`): the
//! off-ramps owing their stablecoin back, a refund transfer inserted, an
//! operator's retry recorded; and what waits, for operators.

use sqlx::{Any, Row, Transaction};

use crate::amount::Cents;
use crate::store::{Store, StoreError, now_micros, parse_column};
use crate::{
    bank::Answer,
    chain::Chain,
    conversions::{
        off_ramp::rules::{LastRefund, Pending},
        resource::Type,
        state::Status,
    },
    transfers::resource::{Route, TransferStatus},
};

impl Store {
    /// The off-ramps waiting for the bank's answer or for their refund,
    /// oldest first (see [`Pending`]).
    pub async fn pending_payouts(&self) -> Result<Vec<Pending>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id, c.organization_id, c.source_cents, c.source_currency, c.source_chain, c.payout_outcome,
                 c.payout_handed_at, c.payout_due_at, c.refund_attempts, c.payout_reference,
                 a.answered_at AS answered_at
             FROM conversions c
             LEFT JOIN payout_answers a ON a.conversion_id = c.id AND a.confirmed_at IS NULL
             WHERE c.type = $1 AND c.status NOT IN ($2, $3, $4) AND c.payout_handed_at IS NOT NULL
               AND (c.payout_outcome IS NULL OR c.payout_outcome IN ($5, $6))
             ORDER BY c.payout_handed_at, c.id",
        )
        .bind(Type::OffRamp.as_str())
        .bind(Status::Completed.as_str())
        .bind(Status::Failed.as_str())
        .bind(Status::Returned.as_str())
        .bind(Answer::Returned.as_str())
        .bind(Answer::Refused.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let answered = r.try_get::<Option<String>, _>("payout_outcome")?.is_some();
                let awaiting = r.try_get::<Option<i64>, _>("answered_at")?.is_some();
                let cents: i64 = r.try_get("source_cents")?;
                let (waiting_for, since) = match (answered, awaiting) {
                    (true, _) => ("REFUND", "payout_due_at"),
                    (false, true) => ("CONFIRMATION", "answered_at"),
                    (false, false) => ("BANK_ANSWER", "payout_handed_at"),
                };
                Ok(Pending {
                    conversion_id: r.try_get("id")?,
                    organization_id: r.try_get("organization_id")?,
                    waiting_for,
                    amount: Cents(cents).to_string(),
                    cents,
                    currency: r.try_get("source_currency")?,
                    chain: r.try_get::<Option<String>, _>("source_chain")?.unwrap_or_default(),
                    since_micros: r.try_get::<Option<i64>, _>(since)?.unwrap_or_default(),
                    refund_attempts: r.try_get("refund_attempts")?,
                    payout_reference: r.try_get("payout_reference")?,
                })
            })
            .collect()
    }

    /// The refund transfer off-ramp `id` made last, if any.
    pub async fn off_ramp_refund(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT refund_transfer_id FROM conversions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("conversion {id}")))?;
        Ok(row.try_get("refund_transfer_id")?)
    }

    /// The off-ramps on `chain` whose payout the bank refused or returned
    /// (the answer due by `now`), whose refund may start by `now` (its
    /// backoff over), and whose last refund, if any, has `DROPPED` or
    /// `FAILED`: each one's id and last refund, oldest first.
    pub async fn refunds_owed(&self, chain: Chain, now: i64) -> Result<Vec<Owed>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id, c.refund_transfer_id, r.status AS refund_status, r.failure_code,
                 (SELECT COUNT(*) FROM transfer_transactions x WHERE x.transfer_id = r.id) AS signed
             FROM conversions c
             LEFT JOIN transfers r ON r.id = c.refund_transfer_id
             WHERE c.type = $1 AND c.source_chain = $2 AND c.status NOT IN ($3, $4, $5)
               AND c.payout_outcome IN ($6, $7) AND c.payout_due_at <= $8
               AND (c.refund_after IS NULL OR c.refund_after <= $8)
               AND (r.id IS NULL OR r.status IN ('DROPPED', 'FAILED'))
             ORDER BY c.created_at, c.id",
        )
        .bind(Type::OffRamp.as_str())
        .bind(chain.as_str())
        .bind(Status::Completed.as_str())
        .bind(Status::Failed.as_str())
        .bind(Status::Returned.as_str())
        .bind(Answer::Returned.as_str())
        .bind(Answer::Refused.as_str())
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Owed {
                    id: row.try_get("id")?,
                    refund: row.try_get("refund_transfer_id")?,
                    last: last_refund(row)?,
                })
            })
            .collect()
    }

    /// What operators did to conversion `id` by hand, oldest first:
    /// `(action, actor, reason)`.
    pub async fn conversion_actions(&self, id: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT action, actor, reason FROM conversion_actions WHERE conversion_id = $1 ORDER BY created_at, id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("action")?, r.try_get("actor")?, r.try_get("reason")?))).collect()
    }
}

/// An off-ramp owing its stablecoin back: see [`Store::refunds_owed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed {
    pub id: String,
    /// Its refund transfer, if one was made.
    pub refund: Option<String>,
    /// That transfer as it stands.
    pub last: Option<Last>,
}

/// A refund transfer's row, owned: see [`LastRefund`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Last {
    pub status: TransferStatus,
    pub failure_code: Option<String>,
    pub signed: bool,
}

impl Last {
    pub fn view(&self) -> LastRefund<'_> {
        LastRefund { status: self.status, failure_code: self.failure_code.as_deref(), signed: self.signed }
    }
}

/// The organization of conversion `id`.
pub async fn organization_of(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT organization_id FROM conversions WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
}

/// Takes the row lock of the off-ramp `id` for its refund: its status, the
/// bank's answer, its chain and its refund transfer, if any.
pub async fn lock_for_refund(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<Option<(Status, Option<Answer>, Chain, Option<String>)>, StoreError> {
    let row = sqlx::query(
        "UPDATE conversions SET updated_at = updated_at WHERE id = $1 AND type = $2
         RETURNING status, payout_outcome, source_chain, refund_transfer_id",
    )
    .bind(id)
    .bind(Type::OffRamp.as_str())
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let status = parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?;
    let answer = row.try_get::<Option<String>, _>("payout_outcome")?;
    let answer = answer.map(|a| parse_column(&a, "conversions.payout_outcome")).transpose()?;
    let chain = parse_column(
        &row.try_get::<Option<String>, _>("source_chain")?.unwrap_or_default(),
        "conversions.source_chain",
    )?;
    Ok(Some((status, answer, chain, row.try_get("refund_transfer_id")?)))
}

/// The refund transfer `refund` as it stands.
pub async fn last_refund_in(tx: &mut Transaction<'static, Any>, refund: &str) -> Result<Last, StoreError> {
    let row = sqlx::query(
        "SELECT status AS refund_status, failure_code,
             (SELECT COUNT(*) FROM transfer_transactions x WHERE x.transfer_id = $1) AS signed
         FROM transfers WHERE id = $1",
    )
    .bind(refund)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::Corrupt(format!("refund transfer {refund} is missing")))?;
    last_refund(&row)?.ok_or_else(|| StoreError::Corrupt(format!("refund transfer {refund} has no status")))
}

/// Lifts the refund backoff of off-ramp `id`, and records that `actor`
/// did, for `reason`.
pub async fn lift_backoff(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    actor: &str,
    reason: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE conversions SET refund_after = NULL WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO conversion_actions (id, conversion_id, action, actor, reason, created_at)
         VALUES ($1, $2, 'REFUND_RETRIED', $3, $4, $5)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(id)
    .bind(actor)
    .bind(reason)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The refund in `row` (`refund_status`, `failure_code`, `signed`), if any.
fn last_refund(row: &sqlx::any::AnyRow) -> Result<Option<Last>, StoreError> {
    let Some(status) = row.try_get::<Option<String>, _>("refund_status")? else { return Ok(None) };
    Ok(Some(Last {
        status: parse_column(&status, "transfers.status")?,
        failure_code: row.try_get("failure_code")?,
        signed: row.try_get::<i64, _>("signed")? > 0,
    }))
}

/// Counts a new refund attempt of off-ramp `id`, unless its refund is no
/// longer `replaced` (another instance made one): its collect transfer and
/// the attempts made, this one included.
pub async fn next_attempt(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    replaced: Option<&str>,
) -> Result<Option<(String, i64)>, StoreError> {
    let row = sqlx::query(
        "UPDATE conversions SET refund_attempts = refund_attempts + 1
         WHERE id = $1 AND COALESCE(refund_transfer_id, '') = $2 RETURNING transfer_id, refund_attempts",
    )
    .bind(id)
    .bind(replaced.unwrap_or(""))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some((row.try_get("transfer_id")?, row.try_get("refund_attempts")?)))
}

/// Inserts the `ACCEPTED` refund transfer `refund` of off-ramp `id` (route
/// `SETTLEMENT`): from `settlement` back to the address the collect
/// transfer `collect` came from, its amount; the off-ramp's refund from
/// now on, the next one not before `after`.
pub async fn insert_refund(
    tx: &mut Transaction<'static, Any>,
    (id, collect, refund): (&str, &str, &str),
    settlement: &str,
    (now, after): (i64, i64),
) -> Result<(), StoreError> {
    let inserted = sqlx::query(&format!(
        "INSERT INTO transfers (id, organization_id, request_id, request_fingerprint, account_id, identity_id,
             chain, source_address, destination_address, currency_symbol, amount_raw, decimals, status, route,
             created_at, updated_at)
         SELECT $1, organization_id, $2, 'refund', account_id, identity_id, chain, $3, source_address,
             currency_symbol, amount_raw, decimals, '{}', '{}', $4, $4
         FROM transfers WHERE id = $5",
        TransferStatus::Accepted,
        Route::Settlement.as_str()
    ))
    .bind(refund)
    .bind(format!("refund:{id}:{refund}"))
    .bind(settlement)
    .bind(now)
    .bind(collect)
    .execute(&mut **tx)
    .await?;
    if inserted.rows_affected() != 1 {
        return Err(StoreError::Corrupt(format!("off-ramp {id}: its collect transfer {collect} is missing")));
    }
    sqlx::query("UPDATE conversions SET refund_transfer_id = $2, refund_after = $3 WHERE id = $1")
        .bind(id)
        .bind(refund)
        .bind(after)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
