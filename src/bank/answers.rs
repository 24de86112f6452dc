//! What a bank answers: a wire's fate ([`Settlement`]), a virtual
//! account's ([`Opening`]) and a payout's ([`Answer`]).

use std::time::Duration;

/// What the bank does with a wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireOutcome {
    /// Credited to the platform.
    Settle,
    /// Not credited.
    Reject,
    /// Taken back by the sender's bank.
    Return,
}

impl WireOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            WireOutcome::Settle => "SETTLE",
            WireOutcome::Reject => "REJECT",
            WireOutcome::Return => "RETURN",
        }
    }
}

impl std::str::FromStr for WireOutcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [WireOutcome::Settle, WireOutcome::Reject, WireOutcome::Return]
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("unknown bank outcome {s:?}"))
    }
}

/// A wire's fate: what happens, and how long after it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    pub outcome: WireOutcome,
    pub after: Duration,
}

impl Settlement {
    /// Settled when it arrived: a wire the bank reported credited.
    pub const SETTLED: Settlement = Settlement { outcome: WireOutcome::Settle, after: Duration::ZERO };
}

/// What the bank does with a virtual account asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountOutcome {
    Open,
    /// Refused, and why.
    Refuse(String),
}

/// A virtual account's fate: what the bank answers and how long after it
/// was asked for; `None` when the answer comes later as an event.
pub type Opening = Option<(AccountOutcome, Duration)>;

/// What the bank made of a payout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The beneficiary was paid.
    Paid,
    /// The payment went out and came back (a beneficiary bank's return).
    Returned,
    /// The bank refused the payout before sending anything.
    Refused,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Paid => "PAID",
            Answer::Returned => "RETURNED",
            Answer::Refused => "REFUSED",
        }
    }
}

impl std::str::FromStr for Answer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Answer::Paid, Answer::Returned, Answer::Refused]
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown payout outcome {s:?} (expected PAID, RETURNED or REFUSED)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_answers_read_back_as_they_are_written() {
        for outcome in [WireOutcome::Settle, WireOutcome::Reject, WireOutcome::Return] {
            assert_eq!(outcome.as_str().parse(), Ok(outcome));
        }
        for answer in [Answer::Paid, Answer::Returned, Answer::Refused] {
            assert_eq!(answer.as_str().parse(), Ok(answer));
        }
        assert!("paid".parse::<Answer>().is_err());
        assert!("SETTLED".parse::<WireOutcome>().is_err());
    }
}
