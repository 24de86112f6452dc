//! An off-ramp's payout, between the platform and its bank. Once the
//! stablecoin is committed (the collect `CONFIRMED`, see
//! [`super::off_ramp::target`]) the worker hands the payout over in three
//! steps, the bank's call outside any database transaction:
//!
//! 1. **claim** it (one instance calls the bank at a time; a claim lapses
//!    after [`CLAIM_MICROS`](crate::store::payouts::CLAIM_MICROS) so a
//!    crashed instance's payout is taken up, and is given up at once when
//!    the bank cannot answer now);
//! 2. **pay out** through [`Bank::pay_out`] under the off-ramp's id as the
//!    idempotency key, so a call repeated after a crash or a lost answer
//!    pays once and answers the same reference;
//! 3. **record** the hand-off with the bank's reference (once, whichever
//!    instance comes first): `PAYOUT_INITIATED`.
//!
//! The bank's answer arrives as an event through [`answer`], its one door
//! (an operator's `conversions payouts record` in production; the sandbox
//! bank's own answer, due [`crate::bank::sandbox::PAYOUT_DELAY`] after the
//! hand-off), and applies once.

use std::sync::Arc;

use crate::{
    amount::Cents,
    bank::{Answer, Bank, BankEvent, Payout},
    store::{Store, StoreError, now_micros},
};

/// One step of the off-ramp `id`: walked to where its legs put it, its
/// payout handed to `bank` when due, then walked again; the status changes
/// it made.
pub async fn follow(store: &Store, bank: &Arc<dyn Bank>, id: &str) -> Result<usize, StoreError> {
    let followed = super::off_ramp::follow(store, id).await?;
    if !followed.payout_due || !hand_off(store, bank.as_ref(), id).await? {
        return Ok(followed.moved);
    }
    Ok(followed.moved + super::off_ramp::follow(store, id).await?.moved)
}

/// Hands the payout of the off-ramp `id` to `bank`: whether this call
/// recorded the hand-off. A bank that cannot answer now is asked again at
/// the next step (the claim given up); a bank that refuses it refuses the
/// payout (the stablecoin goes back).
async fn hand_off(store: &Store, bank: &dyn Bank, id: &str) -> Result<bool, StoreError> {
    let claimed_at = now_micros();
    let Some(claimed) = store.claim_payout(id, claimed_at).await? else { return Ok(false) };
    let account = store.bank_account(&claimed.organization, &claimed.bank_account).await?;
    let account_number = account.bank_account_details.expose()["account_number"].as_str().unwrap_or_default();
    let payout = Payout {
        key: id.to_string(),
        account_number: account_number.to_string(),
        cents: claimed.cents,
        currency: claimed.currency,
    };
    let sent = match bank.pay_out(&payout).await {
        Ok(sent) => sent,
        Err(error) if error.retryable() => {
            tracing::warn!(conversion = id, %error, "the bank cannot take an off-ramp's payout now; retrying");
            store.release_payout(id, claimed_at).await?;
            return Ok(false);
        }
        Err(error) => {
            let reason = format!("the bank refused the payout: {error}");
            tracing::warn!(conversion = id, %reason, "an off-ramp's payout is refused");
            let now = now_micros();
            return store.record_handoff(id, None, Some((Answer::Refused, &reason, now)), now).await;
        }
    };
    let now = now_micros();
    let delay = |after: std::time::Duration| i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
    let answer = sent
        .answer
        .as_ref()
        .map(|(a, reason, after)| (*a, reason.as_str(), now.saturating_add(delay(*after))));
    let recorded = store.record_handoff(id, Some(&sent.reference), answer, now).await?;
    if recorded {
        tracing::info!(
            conversion = id,
            reference = %sent.reference,
            amount = %Cents(payout.cents),
            currency = %payout.currency,
            "off-ramp payout handed to the bank"
        );
    }
    Ok(recorded)
}

/// The one door of the bank's answer to a payout: applied to the off-ramp
/// whose id is the payout's key, once (a second answer to the same payout
/// is a conflict). Other events are not a payout's answer.
pub async fn answer(store: &Store, event: &BankEvent) -> Result<Answer, StoreError> {
    let (key, answer, reason) = match event {
        BankEvent::PayoutPaid { key } => (key, Answer::Paid, "paid"),
        BankEvent::PayoutReturned { key, reason } => (key, Answer::Returned, reason.as_str()),
        BankEvent::PayoutRefused { key, reason } => (key, Answer::Refused, reason.as_str()),
        other => return Err(StoreError::Invalid(format!("{other:?} is not a payout's answer"))),
    };
    store.record_payout(key, answer, reason).await?;
    Ok(answer)
}
