//! An `OFF_RAMP` conversion's rules, pure: where it stands given its legs
//! ([`target`]), what a request is ([`fingerprint`]), whether a quote
//! prices it ([`quote_usable`]), and why a payout is refused
//! ([`payout_refusal`]).
//!
//! The legs, in order:
//! 1. **collect**: a transfer of the account's stablecoin to the platform's
//!    settlement wallet, accepted with the conversion (held from
//!    submission, like any transfer). `CONFIRMED` commits the source funds
//!    (`PROCESSING`); `FAILED` or `DROPPED` moved nothing (`FAILED`).
//! 2. **payout**: handed to the bank (`PAYOUT_INITIATED`). The bank pays
//!    (`PAYOUT_IN_PROGRESS`, then `COMPLETED`), returns the payment after
//!    sending it (`PAYOUT_IN_PROGRESS`, then `RETURNED`), or refuses it
//!    before sending anything (`FAILED`).
//! 3. **refund**, after a return or a refusal: the stablecoin sent back from
//!    the settlement wallet to the account. The conversion ends
//!    (`RETURNED` or `FAILED`) only once the refund is `CONFIRMED`, so a
//!    terminal off-ramp never has funds in flight.

use crate::conversions::state::Status;
use crate::{bank::Answer, chain::Family, issuance::Gate, transfers::TransferStatus};

/// A refund transfer as far as replacing it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRefund<'a> {
    pub status: TransferStatus,
    pub failure_code: Option<&'a str>,
    /// Whether any transaction of it was ever recorded.
    pub signed: bool,
}

/// Whether an off-ramp whose last refund is `last` (none yet: `None`) may
/// have a new one on a chain of `family`: only once the last one provably
/// can never land, so the stablecoin is never sent back twice. Proven:
/// `DROPPED` (its nonce taken by a final cancellation, or its window over
/// with its blockhash expired); reverted; failed before anything was
/// signed; on Solana, refused by every node until its blockhash expired
/// with no status at a node that reached the finalized slot past it
/// (`REJECTED_BY_NODE`, which the Solana sender gives only then). On EVM a
/// refused transaction may still sit in some node's pool: it waits.
pub fn refund_replaceable(family: Family, last: Option<LastRefund<'_>>) -> bool {
    let Some(last) = last else { return true };
    match (last.status, last.failure_code) {
        (TransferStatus::Dropped, _) => true,
        (TransferStatus::Failed, Some("REVERTED" | "NOT_SUBMITTED")) => true,
        (TransferStatus::Failed, Some("REJECTED_BY_NODE")) => !crate::family::rules::refused_may_land(family),
        (TransferStatus::Failed, _) => !last.signed,
        _ => false,
    }
}

/// How long after a refund attempt the next may start: doubling from 10 s
/// per attempt, at most an hour.
pub fn refund_backoff_micros(attempts: i64) -> i64 {
    let exponent = u32::try_from(attempts.clamp(0, 10)).unwrap_or(10);
    (10_000_000i64 << exponent).min(3_600_000_000)
}

/// Where an off-ramp's legs stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Legs {
    /// The collect transfer's status.
    pub collect: TransferStatus,
    /// Whether the payout was handed to the bank.
    pub handed_off: bool,
    /// The bank's answer, and whether it applies yet.
    pub answer: Option<(Answer, bool)>,
    /// The latest refund transfer's status, if one was made.
    pub refund: Option<TransferStatus>,
}

/// What an off-ramp needs done before it can move on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Nothing,
    /// Hand the payout to the bank.
    Handoff,
    /// Send the stablecoin back (none is on its way or arrived).
    Refund,
}

/// The status an off-ramp's legs put it in, and what it needs next.
pub fn target(legs: Legs) -> (Status, Need) {
    use TransferStatus::{Accepted, Confirmed, Dropped, Failed, Submitted};
    // Only a confirmed collect is handed to the bank: from then on the
    // payout decides, whatever the collect's row says.
    if !legs.handed_off {
        return match legs.collect {
            Accepted | Submitted => (Status::Initiated, Need::Nothing),
            Failed | Dropped => (Status::Failed, Need::Nothing),
            Confirmed => (Status::Processing, Need::Handoff),
        };
    }
    let back = |ended: Status, waiting: Status| match legs.refund {
        Some(Confirmed) => (ended, Need::Nothing),
        Some(Accepted | Submitted) => (waiting, Need::Nothing),
        None | Some(Failed | Dropped) => (waiting, Need::Refund),
    };
    match legs.answer {
        None | Some((Answer::Refused, false)) => (Status::PayoutInitiated, Need::Nothing),
        Some((Answer::Paid | Answer::Returned, false)) => (Status::PayoutInProgress, Need::Nothing),
        Some((Answer::Paid, true)) => (Status::Completed, Need::Nothing),
        Some((Answer::Returned, true)) => back(Status::Returned, Status::PayoutInProgress),
        Some((Answer::Refused, true)) => back(Status::Failed, Status::PayoutInitiated),
    }
}

/// An off-ramp an operator should know is waiting: for the bank's answer
/// (`production`), or for its stablecoin to come back from the
/// settlement wallet (which must keep at least what is owed back).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pending {
    pub conversion_id: String,
    pub organization_id: String,
    /// `BANK_ANSWER`, `CONFIRMATION` (an operator's answer awaits a second
    /// operator) or `REFUND`.
    pub waiting_for: &'static str,
    /// Of the stablecoin, in dollars.
    pub amount: String,
    #[serde(skip)]
    pub cents: i64,
    pub currency: String,
    pub chain: String,
    /// Since when, in microseconds: the handoff, or the bank's answer.
    #[serde(skip)]
    pub since_micros: i64,
    /// Refund transfers made so far.
    pub refund_attempts: i64,
    /// The bank's reference of the payout (`null` for one refused before
    /// the bank took it).
    pub payout_reference: Option<String>,
}

/// What a request asked, to tell the same request from another under one
/// `request_id`.
pub fn fingerprint(
    account_id: &str,
    payment_instructions_id: &str,
    cents: i64,
    currency: &str,
    chain: &str,
    quote_id: Option<&str>,
) -> String {
    let quote = quote_id.unwrap_or("-");
    format!("OFF_RAMP|{account_id}|{payment_instructions_id}|{cents}|{currency}|{chain}|{quote}")
}

/// Why a quote cannot price a new off-ramp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuoteProblem {
    /// Another conversion holds it: in flight, completed or returned.
    Used,
    /// It expired before the off-ramp was accepted.
    Expired,
}

/// Whether a quote held by a conversion now at `holder` (if any) and that
/// expires at `expires_at` can price an off-ramp accepted `now`. A quote
/// supports one successful conversion: one whose conversion ended `FAILED`
/// (nothing was paid out, the stablecoin is back) is free again until it
/// expires; one whose conversion is in flight, `COMPLETED` or `RETURNED`
/// (paid out, then sent back) is used.
pub fn quote_usable(holder: Option<Status>, expires_at: i64, now: i64) -> Result<(), QuoteProblem> {
    let taken = holder.is_some_and(|status| status != Status::Failed);
    match (taken, expires_at <= now) {
        (true, _) => Err(QuoteProblem::Used),
        (false, true) => Err(QuoteProblem::Expired),
        (false, false) => Ok(()),
    }
}

/// Why the payout of an off-ramp of `identity`, which no longer passes
/// the fiat gate, is refused before anything is paid out.
pub fn payout_refusal(identity: &str, gate: Gate) -> String {
    match gate {
        Gate::NotActive(status) => {
            format!("ACCOUNT_NOT_ACTIVE: identity {identity} is {status}; nothing was paid out")
        }
        Gate::FiatNotEnabled => {
            format!(
                "FIAT_NOT_ENABLED: identity {identity} is not enabled for fiat operations; nothing was paid out"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfers::TransferStatus::{Accepted, Confirmed, Dropped, Failed, Submitted};

    #[test]
    fn a_quote_prices_one_off_ramp_before_it_expires() {
        use Status::*;
        for (holder, expires_at, now, answer) in [
            (None, 10, 9, Ok(())),
            (None, 10, 10, Err(QuoteProblem::Expired)),
            (None, 10, 11, Err(QuoteProblem::Expired)),
            (Some(Failed), 10, 9, Ok(())),
            (Some(Failed), 10, 10, Err(QuoteProblem::Expired)),
            (Some(Initiated), 10, 9, Err(QuoteProblem::Used)),
            (Some(Processing), 10, 9, Err(QuoteProblem::Used)),
            (Some(PayoutInitiated), 10, 9, Err(QuoteProblem::Used)),
            (Some(PayoutInProgress), 10, 9, Err(QuoteProblem::Used)),
            (Some(Completed), 10, 9, Err(QuoteProblem::Used)),
            (Some(Returned), 10, 9, Err(QuoteProblem::Used)),
            (Some(Completed), 10, 11, Err(QuoteProblem::Used)),
        ] {
            assert_eq!(quote_usable(holder, expires_at, now), answer, "{holder:?} {expires_at} {now}");
        }
    }

    #[test]
    fn a_refused_payout_says_which_gate_and_that_nothing_was_paid() {
        let suspended = payout_refusal("ada", Gate::NotActive(crate::identity::Status::Suspended));
        assert_eq!(suspended, "ACCOUNT_NOT_ACTIVE: identity ada is SUSPENDED; nothing was paid out");
        let fiat = payout_refusal("ada", Gate::FiatNotEnabled);
        assert!(
            fiat.starts_with("FIAT_NOT_ENABLED: identity ada ") && fiat.ends_with("nothing was paid out")
        );
    }

    fn legs(collect: TransferStatus) -> Legs {
        Legs { collect, handed_off: false, answer: None, refund: None }
    }

    #[test]
    fn the_collect_leg_decides_until_the_funds_are_committed() {
        assert_eq!(target(legs(Accepted)), (Status::Initiated, Need::Nothing));
        assert_eq!(target(legs(Submitted)), (Status::Initiated, Need::Nothing));
        assert_eq!(target(legs(Failed)), (Status::Failed, Need::Nothing));
        assert_eq!(target(legs(Dropped)), (Status::Failed, Need::Nothing));
        assert_eq!(target(legs(Confirmed)), (Status::Processing, Need::Handoff));
    }

    #[test]
    fn the_bank_and_the_refund_decide_the_rest() {
        use Answer::{Paid, Refused, Returned};
        let handed = Legs { handed_off: true, ..legs(Confirmed) };
        let table = [
            (None, None, Status::PayoutInitiated, Need::Nothing),
            (Some((Paid, false)), None, Status::PayoutInProgress, Need::Nothing),
            (Some((Returned, false)), None, Status::PayoutInProgress, Need::Nothing),
            (Some((Refused, false)), None, Status::PayoutInitiated, Need::Nothing),
            (Some((Paid, true)), None, Status::Completed, Need::Nothing),
            (Some((Returned, true)), None, Status::PayoutInProgress, Need::Refund),
            (Some((Returned, true)), Some(Submitted), Status::PayoutInProgress, Need::Nothing),
            (Some((Returned, true)), Some(Dropped), Status::PayoutInProgress, Need::Refund),
            (Some((Returned, true)), Some(Confirmed), Status::Returned, Need::Nothing),
            (Some((Refused, true)), None, Status::PayoutInitiated, Need::Refund),
            (Some((Refused, true)), Some(Accepted), Status::PayoutInitiated, Need::Nothing),
            (Some((Refused, true)), Some(Failed), Status::PayoutInitiated, Need::Refund),
            (Some((Refused, true)), Some(Confirmed), Status::Failed, Need::Nothing),
        ];
        for (answer, refund, status, need) in table {
            let at = Legs { answer, refund, ..handed };
            assert_eq!(target(at), (status, need), "{answer:?} {refund:?}");
        }
    }

    #[test]
    fn every_target_is_reachable_from_initiated_along_the_table() {
        use crate::conversions::state::path;
        for answer in
            [None, Some((Answer::Paid, true)), Some((Answer::Returned, true)), Some((Answer::Refused, true))]
        {
            for refund in [None, Some(Confirmed)] {
                let (to, _) = target(Legs { collect: Confirmed, handed_off: true, answer, refund });
                assert!(path(Status::Initiated, to).is_ok(), "{to}");
            }
        }
    }

    #[test]
    fn a_handed_off_payout_is_decided_by_the_bank_whatever_the_collect_says() {
        let late =
            Legs { collect: Failed, handed_off: true, answer: Some((Answer::Paid, true)), refund: None };
        assert_eq!(target(late), (Status::Completed, Need::Nothing));
    }

    #[test]
    fn a_refund_is_replaced_only_once_it_provably_cannot_land() {
        use TransferStatus::{Accepted, Confirmed, Dropped, Failed, Submitted};
        let last = |status, failure_code, signed| Some(LastRefund { status, failure_code, signed });
        let cases = [
            (Family::Evm, None, true),
            (Family::Evm, last(Dropped, None, true), true),
            (Family::Evm, last(Failed, Some("REVERTED"), true), true),
            (Family::Evm, last(Failed, Some("NOT_SUBMITTED"), false), true),
            (Family::Evm, last(Failed, Some("INVALID_TRANSFER"), false), true),
            (Family::Evm, last(Failed, Some("INVALID_TRANSFER"), true), false),
            (Family::Evm, last(Failed, Some("REJECTED_BY_NODE"), true), false),
            (Family::Solana, last(Failed, Some("REJECTED_BY_NODE"), true), true),
            (Family::Solana, last(Failed, Some("SIGNING_FAILED"), true), false),
            (Family::Solana, last(Submitted, None, true), false),
            (Family::Solana, last(Accepted, None, false), false),
            (Family::Solana, last(Confirmed, None, true), false),
        ];
        for (family, last, replaceable) in cases {
            assert_eq!(refund_replaceable(family, last), replaceable, "{family:?} {last:?}");
        }
    }

    #[test]
    fn refunds_back_off_to_an_hour() {
        assert_eq!(refund_backoff_micros(0), 10_000_000);
        assert_eq!(refund_backoff_micros(1), 20_000_000);
        assert_eq!(refund_backoff_micros(9), 3_600_000_000);
        assert_eq!(refund_backoff_micros(1_000), 3_600_000_000);
    }

    #[test]
    fn a_request_is_everything_it_asked() {
        let one = fingerprint("acct", "bank", 10_000, "USDC", "BASE", None);
        assert_eq!(one, fingerprint("acct", "bank", 10_000, "USDC", "BASE", None));
        assert_ne!(one, fingerprint("acct", "bank", 10_001, "USDC", "BASE", None));
        assert_ne!(one, fingerprint("acct", "bank", 10_000, "USDC", "BASE", Some("q")));
    }
}
