//! An off-ramp's refund: the stablecoin of a payout the bank refused or
//! returned, sent back from the settlement wallet to the address it came
//! from by the chain's sender (route `SETTLEMENT`, the platform's own).

use sqlx::Row;

use super::{Store, StoreError, now_micros};
use crate::amount::Cents;
use crate::{
    bank::Answer,
    chain::Chain,
    conversions::{
        off_ramp::{LastRefund, Pending, refund_backoff_micros, refund_replaceable},
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
            "SELECT id, organization_id, source_cents, source_currency, source_chain, payout_outcome,
                 payout_handed_at, payout_due_at, refund_attempts, payout_reference
             FROM conversions
             WHERE type = $1 AND status NOT IN ($2, $3, $4) AND payout_handed_at IS NOT NULL
               AND (payout_outcome IS NULL OR payout_outcome IN ($5, $6))
             ORDER BY payout_handed_at, id",
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
                let cents: i64 = r.try_get("source_cents")?;
                let since = if answered { "payout_due_at" } else { "payout_handed_at" };
                Ok(Pending {
                    conversion_id: r.try_get("id")?,
                    organization_id: r.try_get("organization_id")?,
                    waiting_for: if answered { "REFUND" } else { "BANK_ANSWER" },
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

    /// Creates the refund transfer (route `SETTLEMENT`) of each off-ramp on
    /// `chain` whose payout the bank refused or returned and whose
    /// stablecoin is not on its way back: from `settlement` to the address
    /// the stablecoin came from, the amount collected. Each is created with
    /// the conversion's `refund_transfer_id` in one transaction holding its
    /// row, guarded by the refund it replaces, so two instances create it
    /// once. Returns how many it created.
    ///
    /// A refund is replaced only once it provably can never land (see
    /// [`refund_replaceable`]); one that might still land waits. Attempts
    /// back off ([`refund_backoff_micros`]); an operator's
    /// [`Store::retry_refund`] lifts the wait.
    pub async fn start_refunds(&self, chain: Chain, settlement: &str) -> Result<usize, StoreError> {
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
        .bind(now_micros())
        .fetch_all(&self.pool)
        .await?;
        let mut started = 0;
        for row in rows {
            let (id, replaced): (String, Option<String>) =
                (row.try_get("id")?, row.try_get("refund_transfer_id")?);
            if !refund_replaceable(chain.family(), last_refund(&row)?.as_ref().map(Last::view)) {
                continue;
            }
            if start_refund(self, &id, replaced.as_deref(), settlement).await? {
                started += 1;
            }
        }
        Ok(started)
    }

    /// An operator's word that off-ramp `id`'s refund be sent again now, by
    /// `actor` for `reason`: the backoff is lifted, so the chain's sender
    /// starts a new refund at its next step, and the action is recorded.
    /// Refused unless the off-ramp owes a refund and its last refund
    /// provably can never land ([`refund_replaceable`]).
    pub async fn retry_refund(&self, id: &str, actor: &str, reason: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "UPDATE conversions SET updated_at = updated_at WHERE id = $1 AND type = $2
             RETURNING status, payout_outcome, source_chain, refund_transfer_id",
        )
        .bind(id)
        .bind(Type::OffRamp.as_str())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("off-ramp {id}")))?;
        let status: String = row.try_get("status")?;
        let outcome: Option<String> = row.try_get("payout_outcome")?;
        let owed = outcome.is_some_and(|o| o == Answer::Returned.as_str() || o == Answer::Refused.as_str());
        let ended =
            [Status::Completed, Status::Failed, Status::Returned].iter().any(|s| s.as_str() == status);
        if !owed || ended {
            return Err(StoreError::Conflict(format!("off-ramp {id} is {status} and owes no refund")));
        }
        let chain: Chain = super::parse_column(
            &row.try_get::<Option<String>, _>("source_chain")?.unwrap_or_default(),
            "conversions.source_chain",
        )?;
        let refund: Option<String> = row.try_get("refund_transfer_id")?;
        if let Some(refund) = &refund {
            let last = sqlx::query(
                "SELECT status AS refund_status, failure_code,
                     (SELECT COUNT(*) FROM transfer_transactions x WHERE x.transfer_id = $1) AS signed
                 FROM transfers WHERE id = $1",
            )
            .bind(refund)
            .fetch_one(&mut *tx)
            .await?;
            let last = last_refund(&last)?;
            if !refund_replaceable(chain.family(), last.as_ref().map(Last::view)) {
                let status = last.map_or_else(String::new, |l| l.status.to_string());
                return Err(StoreError::Conflict(format!(
                    "off-ramp {id}'s last refund {refund} is {status} and may still land: a new one waits until \
                     it provably cannot"
                )));
            }
        }
        sqlx::query("UPDATE conversions SET refund_after = NULL WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
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
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(conversion = id, actor, reason, "an operator asked for the refund to be sent again");
        Ok(())
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

/// A refund transfer's row, owned: see [`LastRefund`].
struct Last {
    status: TransferStatus,
    failure_code: Option<String>,
    signed: bool,
}

impl Last {
    fn view(&self) -> LastRefund<'_> {
        LastRefund { status: self.status, failure_code: self.failure_code.as_deref(), signed: self.signed }
    }
}

/// The refund in `row` (`refund_status`, `failure_code`, `signed`), if any.
fn last_refund(row: &sqlx::any::AnyRow) -> Result<Option<Last>, StoreError> {
    let Some(status) = row.try_get::<Option<String>, _>("refund_status")? else { return Ok(None) };
    Ok(Some(Last {
        status: super::parse_column(&status, "transfers.status")?,
        failure_code: row.try_get("failure_code")?,
        signed: row.try_get::<i64, _>("signed")? > 0,
    }))
}

/// Creates the refund of off-ramp `id`, unless its refund is no longer
/// `replaced`: whether it did.
async fn start_refund(
    store: &Store,
    id: &str,
    replaced: Option<&str>,
    settlement: &str,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let Some(collect) = sqlx::query(
        "UPDATE conversions SET refund_attempts = refund_attempts + 1
         WHERE id = $1 AND COALESCE(refund_transfer_id, '') = $2 RETURNING transfer_id, refund_attempts",
    )
    .bind(id)
    .bind(replaced.unwrap_or(""))
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(false);
    };
    let attempts: i64 = collect.try_get("refund_attempts")?;
    let collect: String = collect.try_get("transfer_id")?;
    let refund = uuid::Uuid::new_v4().to_string();
    let now = now_micros();
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
    .bind(&refund)
    .bind(format!("refund:{id}:{refund}"))
    .bind(settlement)
    .bind(now)
    .bind(&collect)
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() != 1 {
        return Err(StoreError::Corrupt(format!("off-ramp {id}: its collect transfer {collect} is missing")));
    }
    sqlx::query("UPDATE conversions SET refund_transfer_id = $2, refund_after = $3 WHERE id = $1")
        .bind(id)
        .bind(&refund)
        .bind(now + refund_backoff_micros(attempts))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    if attempts > 3 {
        tracing::error!(conversion = id, transfer = %refund, attempts, "an off-ramp's refund keeps failing: check the settlement wallet");
    } else {
        tracing::info!(conversion = id, transfer = %refund, attempts, "off-ramp refund to send");
    }
    Ok(true)
}
