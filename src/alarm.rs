//! Conditions that persist (a watcher that cannot progress, an unfunded gas
//! sponsor, a webhook that never answers), logged so that a persistent one
//! is seen at the default level without flooding the log: a `WARN` line the
//! first time, then at most one a minute while it lasts, and one `INFO` line
//! when it clears.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use tracing::{info, warn};

/// How often a condition that lasts is logged again.
pub const REPEAT: Duration = Duration::from_secs(60);

/// The conditions one worker watches, each under a key of its own (a chain's
/// watcher has one; a delivery worker one per webhook).
#[derive(Debug, Default)]
pub struct Alarms {
    raised: HashMap<String, Raised>,
}

#[derive(Debug)]
struct Raised {
    since: Instant,
    logged_at: Instant,
    /// Occurrences since the last line.
    unlogged: u64,
    /// The condition's kind: a new kind under the same key is a new condition.
    kind: String,
}

/// What [`Alarms::raise`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raise {
    /// The condition is new: logged at once.
    New,
    /// It lasts and a minute passed: logged again.
    Repeated,
    /// It lasts and was logged less than a minute ago: nothing logged.
    Quiet,
}

impl Raise {
    /// Whether a line was logged (and so whether to record it again).
    pub fn logged(self) -> bool {
        self != Raise::Quiet
    }
}

impl Alarms {
    /// Notes an occurrence of condition `kind` under `key`, and logs it at
    /// `WARN` when new (or of a new kind) or last logged a minute ago.
    pub fn raise(&mut self, key: &str, kind: &str, message: &str) -> Raise {
        let now = Instant::now();
        match self.raised.get_mut(key) {
            Some(raised) if raised.kind == kind && now - raised.logged_at < REPEAT => {
                raised.unlogged += 1;
                Raise::Quiet
            }
            Some(raised) if raised.kind == kind => {
                let lasting = (now - raised.since).as_secs();
                warn!(
                    subject = key,
                    kind,
                    occurrences = raised.unlogged + 1,
                    lasting_s = lasting,
                    "{message} (still, for {lasting} s)"
                );
                raised.logged_at = now;
                raised.unlogged = 0;
                Raise::Repeated
            }
            _ => {
                warn!(subject = key, kind, "{message}");
                let raised = Raised { since: now, logged_at: now, unlogged: 0, kind: kind.to_string() };
                self.raised.insert(key.to_string(), raised);
                Raise::New
            }
        }
    }

    /// Ends the condition under `key`, with one `INFO` line when there was
    /// one; whether there was.
    pub fn clear(&mut self, key: &str, what: &str) -> bool {
        let Some(raised) = self.raised.remove(key) else { return false };
        let lasted = raised.since.elapsed().as_secs();
        info!(subject = key, kind = %raised.kind, lasted_s = lasted, "{what}: cleared after {lasted} s");
        true
    }

    /// Whether a condition is raised under `key`.
    pub fn is_raised(&self, key: &str) -> bool {
        self.raised.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_occurrence_then_stays_quiet_until_cleared() {
        let mut alarms = Alarms::default();
        assert_eq!(alarms.raise("a", "pruned", "node pruned"), Raise::New);
        assert_eq!(alarms.raise("a", "pruned", "node pruned"), Raise::Quiet);
        assert_eq!(alarms.raise("b", "pruned", "node pruned"), Raise::New, "keys are independent");
        assert_eq!(alarms.raise("a", "wrong_chain", "other"), Raise::New, "a new kind is a new condition");
        assert!(alarms.clear("a", "a"));
        assert!(!alarms.clear("a", "a"), "cleared once");
        assert!(!alarms.is_raised("a") && alarms.is_raised("b"));
        assert_eq!(alarms.raise("a", "pruned", "node pruned"), Raise::New);
    }
}
