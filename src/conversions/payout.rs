//! An off-ramp's payout, between the platform and its bank. Once the
//! stablecoin is committed (the collect `CONFIRMED`, see
//! [`super::off_ramp::target`]) the worker hands the payout over in three
//! steps, the bank's call outside any database transaction:
//!
//! 1. **claim** it (one instance calls the bank at a time; a claim lapses
//!    after [`CLAIM_MICROS`](crate::store::payouts::CLAIM_MICROS) so a
//!    crashed instance's payout is taken up, and sooner when the bank
//!    answered that it is unavailable). Once a payout was claimed, the
//!    bank may have it: it is never refused on the identity's account
//!    any more, only followed to the bank's answer;
//! 2. **pay out** through [`Bank::pay_out`] under the off-ramp's id as the
//!    idempotency key, so a call repeated after a crash or a lost answer
//!    pays once and answers the same reference;
//! 3. **record** the hand-off with the bank's reference (once, whichever
//!    instance comes first): `PAYOUT_INITIATED`.
//!
//! The bank's answer applies once, through one of two doors: an
//! operator's answer in `production` ([`super::answers`], with a second
//! operator's confirmation for money that comes back), or the sandbox
//! bank's own answer, recorded with the hand-off and due
//! [`crate::bank::sandbox::PAYOUT_DELAY`] after it.

use std::sync::Arc;

use crate::{
    amount::Cents,
    bank::{Answer, Bank, BankError, Payout},
    store::{
        Store, StoreError, now_micros,
        payouts::{self, Claimed},
    },
};

/// How long the bank may take to answer a payout: well under the claim,
/// so no other instance asks while it answers.
const PAY_OUT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How soon a bank that answered that it is unavailable is asked again.
const RETRY_MICROS: i64 = 2_000_000;

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
/// recorded the hand-off. A bank that refuses it refuses the payout (the
/// stablecoin goes back). A bank that answers it is unavailable is asked
/// again [`RETRY_MICROS`] later; one whose answer is unknown (unreadable,
/// or none within [`PAY_OUT_TIMEOUT`]) once the claim lapses, under the
/// same key, so it answers what it did.
async fn hand_off(store: &Store, bank: &dyn Bank, id: &str) -> Result<bool, StoreError> {
    let claimed_at = now_micros();
    let Some(claimed) = claim_payout(store, id, claimed_at).await? else { return Ok(false) };
    let account = store.bank_account(&claimed.organization, &claimed.bank_account).await?;
    let account_number = account.bank_account_details.expose()["account_number"].as_str().unwrap_or_default();
    let payout = Payout {
        key: id.to_string(),
        account_number: account_number.to_string(),
        cents: claimed.cents,
        currency: claimed.currency,
    };
    let sent = match tokio::time::timeout(PAY_OUT_TIMEOUT, bank.pay_out(&payout)).await {
        Ok(Ok(sent)) => sent,
        Ok(Err(BankError::Refused(why))) => {
            let reason = format!("the bank refused the payout: {why}");
            tracing::warn!(conversion = id, %reason, "an off-ramp's payout is refused");
            let now = now_micros();
            return record_handoff(store, id, None, Some((Answer::Refused, &reason, now)), now).await;
        }
        Ok(Err(error)) if error.retryable() => {
            tracing::warn!(conversion = id, %error, "the bank cannot take an off-ramp's payout now; asked again soon");
            release_payout(store, id, claimed_at, now_micros() + RETRY_MICROS).await?;
            return Ok(false);
        }
        // Whether the bank took it is unknown: asked again under the same
        // key once the claim lapses, it answers what it did.
        Ok(Err(error)) => {
            tracing::error!(conversion = id, %error, "the bank's answer to an off-ramp's payout cannot be read; asked again");
            return Ok(false);
        }
        Err(_) => {
            tracing::warn!(
                conversion = id,
                "the bank did not answer an off-ramp's payout in time; asked again"
            );
            return Ok(false);
        }
    };
    let now = now_micros();
    let delay = |after: std::time::Duration| i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
    let answer = sent
        .answer
        .as_ref()
        .map(|(a, reason, after)| (*a, reason.as_str(), now.saturating_add(delay(*after))));
    let recorded = record_handoff(store, id, Some(&sent.reference), answer, now).await?;
    if !recorded {
        tracing::warn!(conversion = id, reference = %sent.reference, "the bank took a payout whose hand-off another instance recorded first");
    } else {
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

/// Claims the payout of the `PROCESSING` off-ramp `id` for its hand-off at
/// `now`: `None` when it was handed off already, or another instance
/// claimed it within [`CLAIM_MICROS`](crate::store::payouts::CLAIM_MICROS).
pub async fn claim_payout(store: &Store, id: &str, now: i64) -> Result<Option<Claimed>, StoreError> {
    let mut tx = store.begin().await?;
    let claimed = payouts::claim(&mut tx, id, now).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// Shortens the claim on the payout of off-ramp `id` made at `claimed_at`
/// (the bank answered that it is unavailable) so that it lapses at
/// `lapses_at`. The payout stays claimed once: the bank may have it.
async fn release_payout(store: &Store, id: &str, claimed_at: i64, lapses_at: i64) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    payouts::release(&mut tx, id, claimed_at, lapses_at).await?;
    tx.commit().await?;
    Ok(())
}

/// Records that the bank took the payout of off-ramp `id` under
/// `reference` at `now`, with the answer it already gave (due at its third
/// part) unless one is recorded (an off-ramp accepted before the hand-off
/// was a step of its own holds its sandbox answer, due now): whether this
/// call recorded the hand-off (once per payout, whichever instance comes
/// first).
async fn record_handoff(
    store: &Store,
    id: &str,
    reference: Option<&str>,
    answer: Option<(Answer, &str, i64)>,
    now: i64,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let recorded = payouts::hand_off(&mut tx, id, reference, answer, now).await?;
    tx.commit().await?;
    Ok(recorded)
}
