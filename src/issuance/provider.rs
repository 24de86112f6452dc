//! The bank that receives clients' wires. In `production` an operator
//! records each wire that arrived (`issuance wires record`): it has
//! settled. In `sandbox`, [`Sandbox`] decides what happens to a simulated
//! wire from its cents, so a client's test suite can provoke each outcome:
//!
//! | cents | outcome |
//! |---|---|
//! | `.66` | rejected at once: nothing credited, the mint `FAILED` `WIRE_REJECTED` |
//! | `.99` | credited, then returned by the sender's bank [`SANDBOX_DELAY`] later: `FAILED` `WIRE_RETURNED` |
//! | `.13` | settled [`SANDBOX_DELAY`] later |
//! | any other | settled at once |

use std::time::Duration;

/// How long the sandbox bank takes over delayed and returned wires.
pub const SANDBOX_DELAY: Duration = Duration::from_secs(5);

/// What the bank does with a wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Credited to the platform.
    Settle,
    /// Not credited.
    Reject,
    /// Taken back by the sender's bank.
    Return,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Settle => "SETTLE",
            Outcome::Reject => "REJECT",
            Outcome::Return => "RETURN",
        }
    }
}

impl std::str::FromStr for Outcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Outcome::Settle, Outcome::Reject, Outcome::Return]
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("unknown bank outcome {s:?}"))
    }
}

/// A wire's fate: what happens, and how long after it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    pub outcome: Outcome,
    pub after: Duration,
}

/// The bank receiving wires.
pub trait Bank: Send + Sync {
    /// What happens to a wire of `cents`.
    fn receive(&self, cents: i64) -> Settlement;
}

/// `production`: a wire an operator recorded has arrived.
pub struct Operators;

impl Bank for Operators {
    fn receive(&self, _cents: i64) -> Settlement {
        Settlement { outcome: Outcome::Settle, after: Duration::ZERO }
    }
}

/// `sandbox`: the outcome by the wire's cents (see the module's table).
pub struct Sandbox;

impl Bank for Sandbox {
    fn receive(&self, cents: i64) -> Settlement {
        let (outcome, after) = match cents % 100 {
            66 => (Outcome::Reject, Duration::ZERO),
            99 => (Outcome::Return, SANDBOX_DELAY),
            13 => (Outcome::Settle, SANDBOX_DELAY),
            _ => (Outcome::Settle, Duration::ZERO),
        };
        Settlement { outcome, after }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_decides_by_the_cents_and_operators_wires_have_settled() {
        let now = Duration::ZERO;
        for (cents, outcome, after) in [
            (25_000, Outcome::Settle, now),
            (25_066, Outcome::Reject, now),
            (25_099, Outcome::Return, SANDBOX_DELAY),
            (25_013, Outcome::Settle, SANDBOX_DELAY),
            (66, Outcome::Reject, now),
            (106_600, Outcome::Settle, now),
        ] {
            assert_eq!(Sandbox.receive(cents), Settlement { outcome, after }, "{cents}");
            assert_eq!(Operators.receive(cents), Settlement { outcome: Outcome::Settle, after: now });
        }
        for outcome in [Outcome::Settle, Outcome::Reject, Outcome::Return] {
            assert_eq!(outcome.as_str().parse(), Ok(outcome));
        }
    }
}
