//! The conversion state machine, exactly as the reference's table: [`apply`]
//! takes a status and an event and answers the next status or a
//! [`Refusal`]; pure, so the store calls it inside the transaction that
//! persists what it answers and emits `conversion_notification_update`.
//!
//! | from | event | to |
//! |---|---|---|
//! | `INITIATED` | processing: the source funds are committed | `PROCESSING` |
//! | `INITIATED` | failure: the conversion cannot complete | `FAILED` |
//! | `PROCESSING` | handoff: the outbound leg handed to the chain or the bank | `PAYOUT_INITIATED` |
//! | `PROCESSING` | failure | `FAILED` |
//! | `PAYOUT_INITIATED` | delivery: the chain or the bank delivering | `PAYOUT_IN_PROGRESS` |
//! | `PAYOUT_INITIATED` | failure: the payout never went out | `FAILED` |
//! | `PAYOUT_IN_PROGRESS` | delivered | `COMPLETED` |
//! | `PAYOUT_IN_PROGRESS` | sent back (a bank's rejection) | `RETURNED` |
//! | `COMPLETED`, `FAILED`, `RETURNED` | anything | refused: terminal |
//!
//! `FAILED` means no funds are in flight; `RETURNED` that funds went out
//! and came back.

use std::fmt;

/// Where a conversion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = ConversionStatus)]
pub enum Status {
    /// Known: a wire recognized at a virtual account, or an off-ramp accepted.
    Initiated,
    /// The source funds are committed.
    Processing,
    /// The outbound leg was handed to the chain or the bank.
    PayoutInitiated,
    /// The chain or the bank is delivering.
    PayoutInProgress,
    /// Delivered: `completed_at` is set.
    Completed,
    /// Nothing in flight: `failure_reason` says why.
    Failed,
    /// Funds went out and came back: `failure_reason` and `refund_details`.
    Returned,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Initiated,
        Status::Processing,
        Status::PayoutInitiated,
        Status::PayoutInProgress,
        Status::Completed,
        Status::Failed,
        Status::Returned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Initiated => "INITIATED",
            Status::Processing => "PROCESSING",
            Status::PayoutInitiated => "PAYOUT_INITIATED",
            Status::PayoutInProgress => "PAYOUT_IN_PROGRESS",
            Status::Completed => "COMPLETED",
            Status::Failed => "FAILED",
            Status::Returned => "RETURNED",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Returned)
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
        Status::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("unknown conversion status {s:?}"))
    }
}

/// What can happen to a conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The source funds are committed.
    Process,
    /// The outbound leg is handed to the chain or the bank.
    Handoff,
    /// The chain or the bank is delivering.
    Deliver,
    /// Delivered.
    Delivered,
    /// The conversion cannot complete; nothing is in flight.
    Fail,
    /// The payout came back.
    SentBack,
}

/// A status change [`apply`] accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: Status,
    pub to: Status,
}

/// An event the conversion's status does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {status} conversion does not take {event:?}")]
pub struct Refusal {
    pub status: Status,
    pub event: Event,
}

/// The status `event` moves a `status` conversion to.
pub fn apply(status: Status, event: Event) -> Result<Transition, Refusal> {
    use {Event as E, Status as S};
    let to = match (status, event) {
        (S::Initiated, E::Process) => S::Processing,
        (S::Processing, E::Handoff) => S::PayoutInitiated,
        (S::PayoutInitiated, E::Deliver) => S::PayoutInProgress,
        (S::PayoutInProgress, E::Delivered) => S::Completed,
        (S::PayoutInProgress, E::SentBack) => S::Returned,
        (S::Initiated | S::Processing | S::PayoutInitiated, E::Fail) => S::Failed,
        _ => return Err(Refusal { status, event }),
    };
    Ok(Transition { from: status, to })
}

/// The events that take a `from` conversion to `to`, in order, when the
/// table allows it: the forward steps between them, or one failure. Empty
/// when `from` is `to` or already past it (a follower that read an older
/// state); `Err` when the table has no way there (a terminal `from`, or a
/// failure after the payout went out). `RETURNED` is reached through
/// `PAYOUT_IN_PROGRESS`: a follower that saw the payout only once it came
/// back still announces it went out.
pub fn path(from: Status, to: Status) -> Result<Vec<Event>, Refusal> {
    const FORWARD: [(Status, Event); 4] = [
        (Status::Initiated, Event::Process),
        (Status::Processing, Event::Handoff),
        (Status::PayoutInitiated, Event::Deliver),
        (Status::PayoutInProgress, Event::Delivered),
    ];
    if from == to {
        return Ok(Vec::new());
    }
    if to == Status::Failed {
        apply(from, Event::Fail)?;
        return Ok(vec![Event::Fail]);
    }
    if to == Status::Returned {
        // Only a payout that went out comes back: through PAYOUT_IN_PROGRESS.
        let mut events = path(from, Status::PayoutInProgress)?;
        apply(Status::PayoutInProgress, Event::SentBack)?;
        events.push(Event::SentBack);
        return Ok(events);
    }
    if from.is_terminal() {
        return Err(Refusal { status: from, event: Event::Process });
    }
    if to < from {
        return Ok(Vec::new());
    }
    let mut events = Vec::new();
    let mut at = from;
    for (status, event) in FORWARD {
        if at == to {
            break;
        }
        if status == at {
            events.push(event);
            at = apply(at, event)?.to;
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTS: [Event; 6] =
        [Event::Process, Event::Handoff, Event::Deliver, Event::Delivered, Event::Fail, Event::SentBack];

    /// Every status against every event: the accepted ones exactly the
    /// rows of the reference's table, everything else refused.
    #[test]
    fn every_transition_accepted_or_refused_as_the_table_says() {
        use {Event as E, Status as S};
        let accepted: &[(S, E, S)] = &[
            (S::Initiated, E::Process, S::Processing),
            (S::Initiated, E::Fail, S::Failed),
            (S::Processing, E::Handoff, S::PayoutInitiated),
            (S::Processing, E::Fail, S::Failed),
            (S::PayoutInitiated, E::Deliver, S::PayoutInProgress),
            (S::PayoutInitiated, E::Fail, S::Failed),
            (S::PayoutInProgress, E::Delivered, S::Completed),
            (S::PayoutInProgress, E::SentBack, S::Returned),
        ];
        let mut seen = 0;
        for status in Status::ALL {
            for event in EVENTS {
                let expected = accepted.iter().find(|(s, e, _)| *s == status && *e == event);
                match (apply(status, event), expected) {
                    (Ok(t), Some((_, _, to))) => {
                        assert_eq!((t.from, t.to), (status, *to), "{status} {event:?}");
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
        for status in [Status::Completed, Status::Failed, Status::Returned] {
            assert!(status.is_terminal());
            for event in EVENTS {
                assert!(apply(status, event).is_err(), "{status} {event:?}");
            }
        }
        for status in
            [Status::Initiated, Status::Processing, Status::PayoutInitiated, Status::PayoutInProgress]
        {
            assert!(!status.is_terminal());
        }
    }

    #[test]
    fn a_path_takes_every_step_between_two_statuses_in_order() {
        use {Event as E, Status as S};
        for (from, to, events) in [
            (S::Initiated, S::Initiated, vec![]),
            (S::Initiated, S::Processing, vec![E::Process]),
            (S::Initiated, S::Completed, vec![E::Process, E::Handoff, E::Deliver, E::Delivered]),
            (S::Processing, S::PayoutInProgress, vec![E::Handoff, E::Deliver]),
            (S::PayoutInitiated, S::Completed, vec![E::Deliver, E::Delivered]),
            (S::Initiated, S::Failed, vec![E::Fail]),
            (S::PayoutInitiated, S::Failed, vec![E::Fail]),
            (S::PayoutInProgress, S::Returned, vec![E::SentBack]),
            // A payout seen only once it came back still went out first.
            (S::PayoutInitiated, S::Returned, vec![E::Deliver, E::SentBack]),
            (S::Initiated, S::Returned, vec![E::Process, E::Handoff, E::Deliver, E::SentBack]),
            // A follower that read an older state does nothing.
            (S::PayoutInProgress, S::Processing, vec![]),
            (S::Failed, S::Failed, vec![]),
        ] {
            assert_eq!(path(from, to), Ok(events), "{from} → {to}");
        }
        for (from, to) in [
            (S::PayoutInProgress, S::Failed),
            (S::Completed, S::Returned),
            (S::Completed, S::Failed),
            (S::Failed, S::Completed),
            (S::Returned, S::Processing),
        ] {
            assert!(path(from, to).is_err(), "{from} → {to}");
        }
    }

    #[test]
    fn statuses_read_back_from_their_names() {
        for status in Status::ALL {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
        }
        assert!("PENDING".parse::<Status>().is_err());
    }
}
