//! The mint state machine: a wire that arrived for a mint instruction, from
//! the bank's settlement to the stablecoin confirmed at the client's
//! address. [`apply`] takes a status and an event and answers the next
//! status or a [`Refusal`]; pure, so the flows ([`super::wires`],
//! [`super::onchain`]) call it inside the transaction that persists what it
//! answers and emits `mint_update`.
//!
//! | from | event | to |
//! |---|---|---|
//! | `RECEIVED` | the bank settled; the identity may not (gate) | `FAILED`, fiat to return |
//! | `RECEIVED` | the bank settled; approval needed | `AWAITING_APPROVAL` |
//! | `RECEIVED` | the bank settled | `MINTING` |
//! | `RECEIVED` | the bank rejected or returned the wire | `FAILED` (no fiat held) |
//! | `AWAITING_APPROVAL` | approved; the identity may not (gate) | `FAILED`, fiat to return |
//! | `AWAITING_APPROVAL` | approved | `MINTING` |
//! | `AWAITING_APPROVAL` | refused by an operator | `FAILED`, fiat to return |
//! | `MINTING` | the mint transaction is final | `MINTED` |
//! | `MINTING`, `MINTED` | its deposit is `CONFIRMED` | `COMPLETED` |
//! | `MINTING` | the mint transaction failed (nothing minted) | `FAILED`, fiat to return |
//! | `COMPLETED`, `FAILED` | anything | refused: terminal |
//!
//! Once `MINTING`, the identity's later states no longer matter: the
//! transaction may already be on its way, and stopping it would hold a
//! client's dollars with nothing to show for them.

use std::fmt;

use super::Gate;

/// Where a mint stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = MintStatus)]
pub enum Status {
    /// The wire is announced; the bank has not settled it yet.
    Received,
    /// Settled; a second operator must approve the mint (`production`, or
    /// above the chain's daily mint cap).
    AwaitingApproval,
    /// The mint transaction is being sent.
    Minting,
    /// The mint transaction is final on chain; its deposit is not yet `CONFIRMED`.
    Minted,
    /// The stablecoin is at the client's address, its deposit `CONFIRMED`.
    Completed,
    /// Nothing was minted; `failure_reason` says why.
    Failed,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Received,
        Status::AwaitingApproval,
        Status::Minting,
        Status::Minted,
        Status::Completed,
        Status::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Received => "RECEIVED",
            Status::AwaitingApproval => "AWAITING_APPROVAL",
            Status::Minting => "MINTING",
            Status::Minted => "MINTED",
            Status::Completed => "COMPLETED",
            Status::Failed => "FAILED",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Status::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| format!("unknown mint status {s:?}"))
    }
}

/// Why a mint failed: `failure_reason`'s code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// The identity was not `ACTIVE` when the mint would have started.
    AccountNotActive,
    /// The identity was not enabled for fiat operations then.
    FiatNotEnabled,
    /// The bank did not credit the wire.
    WireRejected,
    /// The sender's bank took the wire back before it was minted.
    WireReturned,
    /// An operator refused to approve the mint.
    ApprovalRefused,
    /// The mint transaction failed and minted nothing.
    MintTransactionFailed,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::AccountNotActive => "ACCOUNT_NOT_ACTIVE",
            Failure::FiatNotEnabled => "FIAT_NOT_ENABLED",
            Failure::WireRejected => "WIRE_REJECTED",
            Failure::WireReturned => "WIRE_RETURNED",
            Failure::ApprovalRefused => "APPROVAL_REFUSED",
            Failure::MintTransactionFailed => "MINT_TRANSACTION_FAILED",
        }
    }

    /// What the failure means, for a mint's `failure_reason`.
    pub fn explain(self) -> &'static str {
        match self {
            Failure::AccountNotActive => "the identity was not ACTIVE; the dollars are returned",
            Failure::FiatNotEnabled => {
                "the identity was not enabled for fiat operations; the dollars are returned"
            }
            Failure::WireRejected => "the bank did not credit the wire",
            Failure::WireReturned => "the sender's bank took the wire back",
            Failure::ApprovalRefused => "an operator refused the mint; the dollars are returned",
            Failure::MintTransactionFailed => {
                "the mint transaction failed; nothing was minted; the dollars are returned"
            }
        }
    }

    /// Whether the platform holds the client's dollars and owes them back:
    /// a wire the bank credited and nothing was minted for.
    pub fn returns_fiat(self) -> bool {
        !matches!(self, Failure::WireRejected | Failure::WireReturned)
    }

    fn of(gate: Gate) -> Self {
        match gate {
            Gate::NotActive(_) => Failure::AccountNotActive,
            Gate::FiatNotEnabled => Failure::FiatNotEnabled,
        }
    }
}

/// What can happen to a mint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The bank credited the wire. `gate` is the identity's entitlement
    /// now; `approval` whether a second operator must approve.
    Settled { gate: Result<(), Gate>, approval: bool },
    /// The bank did not credit the wire.
    Rejected,
    /// The sender's bank took the wire back.
    Returned,
    /// A second operator approved; `gate` is the identity's entitlement now.
    Approved { gate: Result<(), Gate> },
    /// An operator refused the mint.
    Refused,
    /// The mint transaction is final on chain.
    Final,
    /// The mint's deposit at the client's address is `CONFIRMED`.
    DepositConfirmed,
    /// The mint transaction failed; nothing was minted.
    TransactionFailed,
}

/// A status change [`apply`] accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: Status,
    pub to: Status,
    /// Set when `to` is `FAILED`.
    pub failure: Option<Failure>,
}

/// An event the mint's status does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {status} mint does not take {event:?}")]
pub struct Refusal {
    pub status: Status,
    pub event: Event,
}

/// The status `event` moves a `status` mint to.
pub fn apply(status: Status, event: Event) -> Result<Transition, Refusal> {
    use {Event as E, Status as S};
    let (to, failure) = match (status, event) {
        (S::Received, E::Settled { gate: Err(gate), .. })
        | (S::AwaitingApproval, E::Approved { gate: Err(gate) }) => (S::Failed, Some(Failure::of(gate))),
        (S::Received, E::Settled { gate: Ok(()), approval: true }) => (S::AwaitingApproval, None),
        (S::Received, E::Settled { gate: Ok(()), approval: false }) => (S::Minting, None),
        (S::AwaitingApproval, E::Approved { gate: Ok(()) }) => (S::Minting, None),
        (S::Received, E::Rejected) => (S::Failed, Some(Failure::WireRejected)),
        (S::Received, E::Returned) => (S::Failed, Some(Failure::WireReturned)),
        (S::AwaitingApproval, E::Refused) => (S::Failed, Some(Failure::ApprovalRefused)),
        (S::Minting, E::Final) => (S::Minted, None),
        (S::Minting | S::Minted, E::DepositConfirmed) => (S::Completed, None),
        (S::Minting, E::TransactionFailed) => (S::Failed, Some(Failure::MintTransactionFailed)),
        _ => return Err(Refusal { status, event }),
    };
    Ok(Transition { from: status, to, failure })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Status as Identity;

    const OK: Result<(), Gate> = Ok(());
    const SUSPENDED: Result<(), Gate> = Err(Gate::NotActive(Identity::Suspended));
    const NO_FIAT: Result<(), Gate> = Err(Gate::FiatNotEnabled);

    /// Every status against every event: the accepted ones as the table in
    /// the module's documentation, everything else refused.
    #[test]
    fn every_transition_accepted_or_refused_as_the_table_says() {
        use {Event as E, Failure as F, Status as S};
        let events = [
            E::Settled { gate: OK, approval: false },
            E::Settled { gate: OK, approval: true },
            E::Settled { gate: SUSPENDED, approval: false },
            E::Settled { gate: NO_FIAT, approval: true },
            E::Rejected,
            E::Returned,
            E::Approved { gate: OK },
            E::Approved { gate: SUSPENDED },
            E::Approved { gate: NO_FIAT },
            E::Refused,
            E::Final,
            E::DepositConfirmed,
            E::TransactionFailed,
        ];
        let accepted: &[(S, E, S, Option<F>)] = &[
            (S::Received, events[0], S::Minting, None),
            (S::Received, events[1], S::AwaitingApproval, None),
            (S::Received, events[2], S::Failed, Some(F::AccountNotActive)),
            (S::Received, events[3], S::Failed, Some(F::FiatNotEnabled)),
            (S::Received, E::Rejected, S::Failed, Some(F::WireRejected)),
            (S::Received, E::Returned, S::Failed, Some(F::WireReturned)),
            (S::AwaitingApproval, events[6], S::Minting, None),
            (S::AwaitingApproval, events[7], S::Failed, Some(F::AccountNotActive)),
            (S::AwaitingApproval, events[8], S::Failed, Some(F::FiatNotEnabled)),
            (S::AwaitingApproval, E::Refused, S::Failed, Some(F::ApprovalRefused)),
            (S::Minting, E::Final, S::Minted, None),
            (S::Minting, E::DepositConfirmed, S::Completed, None),
            (S::Minted, E::DepositConfirmed, S::Completed, None),
            (S::Minting, E::TransactionFailed, S::Failed, Some(F::MintTransactionFailed)),
        ];
        let mut seen = 0;
        for status in Status::ALL {
            for event in events {
                let expected = accepted.iter().find(|(s, e, _, _)| *s == status && *e == event);
                match (apply(status, event), expected) {
                    (Ok(t), Some((_, _, to, failure))) => {
                        assert_eq!((t.from, t.to, t.failure), (status, *to, *failure), "{status} {event:?}");
                        seen += 1;
                    }
                    (Err(refusal), None) => assert_eq!(refusal, Refusal { status, event }),
                    (answer, expected) => panic!("{status} {event:?}: {answer:?}, expected {expected:?}"),
                }
            }
        }
        assert_eq!(seen, accepted.len(), "every accepted row was reached");
    }

    #[test]
    fn terminal_statuses_take_nothing() {
        for status in [Status::Completed, Status::Failed] {
            assert!(status.is_terminal());
            assert!(apply(status, Event::DepositConfirmed).is_err());
            assert!(apply(status, Event::Settled { gate: OK, approval: false }).is_err());
        }
    }

    #[test]
    fn fiat_is_returned_only_when_the_bank_credited_it() {
        let returned: Vec<&str> = [
            Failure::AccountNotActive,
            Failure::FiatNotEnabled,
            Failure::WireRejected,
            Failure::WireReturned,
            Failure::ApprovalRefused,
            Failure::MintTransactionFailed,
        ]
        .into_iter()
        .filter(|f| f.returns_fiat())
        .map(Failure::as_str)
        .collect();
        assert_eq!(
            returned,
            ["ACCOUNT_NOT_ACTIVE", "FIAT_NOT_ENABLED", "APPROVAL_REFUSED", "MINT_TRANSACTION_FAILED"]
        );
    }

    #[test]
    fn statuses_read_back_from_their_names() {
        for status in Status::ALL {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
        }
        assert!("PENDING".parse::<Status>().is_err());
    }
}
