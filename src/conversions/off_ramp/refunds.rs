//! An off-ramp's refund: the stablecoin of a payout the bank refused or
//! returned, sent back from the settlement wallet to the address it came
//! from by the chain's sender (route `SETTLEMENT`, the platform's own).
//!
//! A refund is replaced only once it provably can never land (see
//! [`refund_replaceable`]); one that might still land waits. Attempts back
//! off ([`refund_backoff_micros`]); an operator's [`retry`] lifts the wait.

use super::{refund_backoff_micros, refund_replaceable};
use crate::{
    audit::{self, Actor, Record},
    bank::Answer,
    chain::Chain,
    conversions::state::Status,
    store::{
        Store, StoreError, now_micros,
        off_ramp_refunds::{self as rows, Owed},
    },
};

/// Creates the refund transfer of each off-ramp on `chain` that owes one,
/// from `settlement`, the amount collected: each in one transaction
/// holding its row, guarded by the refund it replaces, so two instances
/// create it once. Returns how many it created.
pub async fn start(store: &Store, chain: Chain, settlement: &str) -> Result<usize, StoreError> {
    let mut started = 0;
    for owed in store.refunds_owed(chain, now_micros()).await? {
        if !refund_replaceable(chain.family(), owed.last.as_ref().map(rows::Last::view)) {
            continue;
        }
        if start_one(store, &owed, settlement).await? {
            started += 1;
        }
    }
    Ok(started)
}

/// Creates the refund of `owed`, unless another instance replaced its
/// refund first: whether it did.
async fn start_one(store: &Store, owed: &Owed, settlement: &str) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let Some((collect, attempts)) = rows::next_attempt(&mut tx, &owed.id, owed.refund.as_deref()).await?
    else {
        return Ok(false);
    };
    let (refund, now) = (uuid::Uuid::new_v4().to_string(), now_micros());
    let after = now + refund_backoff_micros(attempts);
    rows::insert_refund(&mut tx, (&owed.id, &collect, &refund), settlement, (now, after)).await?;
    tx.commit().await?;
    let id = &owed.id;
    if attempts > 3 {
        tracing::error!(conversion = id, transfer = %refund, attempts, "an off-ramp's refund keeps failing: check the settlement wallet");
    } else {
        tracing::info!(conversion = id, transfer = %refund, attempts, "off-ramp refund to send");
    }
    Ok(true)
}

/// An operator's word that off-ramp `id`'s refund be sent again now, by
/// `actor` for `reason`: the backoff is lifted, so the conversions worker
/// beside the chain's sender starts a new refund at its next pass, and the
/// action is recorded.
/// Refused unless the off-ramp owes a refund and its last refund provably
/// can never land ([`refund_replaceable`]).
pub async fn retry(store: &Store, id: &str, actor: &Actor, reason: &str) -> Result<(), StoreError> {
    if reason.trim().is_empty() {
        return Err(StoreError::Invalid("reason: say why the refund is sent again".into()));
    }
    let mut tx = store.begin().await?;
    let (status, answer, chain, refund) = rows::lock_for_refund(&mut tx, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("off-ramp {id}")))?;
    let owed = matches!(answer, Some(Answer::Returned | Answer::Refused));
    let ended = matches!(status, Status::Completed | Status::Failed | Status::Returned);
    if !owed || ended {
        return Err(StoreError::Refused(format!("off-ramp {id} is {status} and owes no refund")));
    }
    if let Some(refund) = &refund {
        let last = rows::last_refund_in(&mut tx, refund).await?;
        if !refund_replaceable(chain.family(), Some(last.view())) {
            let status = last.status;
            return Err(StoreError::Waiting(format!(
                "off-ramp {id}'s last refund {refund} is {status} and may still land: a new one waits until \
                 it provably cannot"
            )));
        }
    }
    rows::lift_backoff(&mut tx, id, &actor.recorded(), reason).await?;
    let organization = rows::organization_of(&mut tx, id).await?;
    let record = Record {
        actor,
        action: "conversion.refund_retried",
        target_kind: "conversion",
        target_id: id,
        organization_id: organization.as_deref(),
        reason: Some(reason),
        request_id: None,
        detail: None,
    };
    audit::append(&mut tx, store.cipher().ok(), record).await?;
    tx.commit().await?;
    tracing::info!(conversion = id, actor = %actor, "an operator asked for the refund to be sent again");
    Ok(())
}
