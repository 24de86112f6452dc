//! Whether an instance holding the checkpoint key signs now. The store's
//! `audit_checkpoint_due` row only spares duplicates: whoever writes the
//! database can keep it from ever being due, but cannot make a signature
//! younger. So an instance also signs when the newest checkpoint whose
//! signature verifies (its own, the directory's, the NATS subject's) is
//! older than one period and its [`slack`], whatever the row says; two
//! checkpoints in one period are harmless. `health` allows twice the slack
//! ([`stale_after`]), which the rule keeps the age below while any instance
//! holds the key.

use std::time::Duration;

/// What an instance does about a checkpoint now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// Nothing: the row says not due, and the newest checkpoint is recent.
    Wait,
    /// The row says due, and this instance claimed the period.
    Due,
    /// The row says not due, yet the newest checkpoint is older than the
    /// period and its slack (or none verifies): signed all the same, with a
    /// warning naming the row.
    Overdue,
}

/// How late past one period a checkpoint may be before the row is
/// overruled: a minute, or the period itself when that is shorter.
pub fn slack(every: Duration) -> Duration {
    every.min(Duration::from_secs(60))
}

/// The age past which an instance signs whatever the row says.
pub fn overdue_after(every: Duration) -> Duration {
    every.saturating_add(slack(every))
}

/// The age past which `health` fails: one period and twice the slack.
pub fn stale_after(every: Duration) -> Duration {
    overdue_after(every).saturating_add(slack(every))
}

/// How often an instance looks: at most every `look`, and at least twice
/// within the slack, so that a checkpoint overdue is signed before the age
/// reaches [`stale_after`].
pub fn look_every(every: Duration, look: Duration) -> Duration {
    look.min(slack(every) / 2).max(Duration::from_millis(100))
}

/// The decision, from the age of the newest checkpoint whose signature
/// verifies (`None` when none does), the period, and whether this
/// instance's claim of the row succeeded.
pub fn sign(age: Option<Duration>, every: Duration, row_due: bool) -> Sign {
    if row_due {
        return Sign::Due;
    }
    match age {
        Some(age) if age <= overdue_after(every) => Sign::Wait,
        _ => Sign::Overdue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_signed_once_the_row_says_due_or_the_signatures_are_too_old() {
        let s = Duration::from_secs;
        let (hour, four) = (s(3600), s(4));
        let cases: [(&str, Option<Duration>, Duration, bool, Sign); 12] = [
            ("the row due, a fresh checkpoint", Some(s(10)), hour, true, Sign::Due),
            ("the row due, none known", None, hour, true, Sign::Due),
            ("the row due, an old one", Some(s(9000)), hour, true, Sign::Due),
            ("not due, a fresh checkpoint", Some(s(10)), hour, false, Sign::Wait),
            ("not due, one period old", Some(hour), hour, false, Sign::Wait),
            ("not due, a period and a minute old", Some(s(3660)), hour, false, Sign::Wait),
            ("not due, a second more", Some(s(3661)), hour, false, Sign::Overdue),
            ("not due, none verifies", None, hour, false, Sign::Overdue),
            ("a short period: its own slack", Some(s(8)), four, false, Sign::Wait),
            ("a short period, overdue", Some(s(9)), four, false, Sign::Overdue),
            ("a checkpoint from the future (a clock ahead)", Some(s(0)), four, false, Sign::Wait),
            ("a short period, the row due", Some(s(1)), four, true, Sign::Due),
        ];
        for (what, age, every, row_due, expected) in cases {
            assert_eq!(sign(age, every, row_due), expected, "{what}");
        }
    }

    #[test]
    fn the_slack_is_a_minute_or_the_period_and_health_allows_twice_it() {
        let s = Duration::from_secs;
        let cases =
            [(s(3600), s(60), s(3660), s(3720)), (s(60), s(60), s(120), s(180)), (s(4), s(4), s(8), s(12))];
        for (every, slack_is, overdue, stale) in cases {
            assert_eq!(slack(every), slack_is, "{every:?}");
            assert_eq!(overdue_after(every), overdue, "{every:?}");
            assert_eq!(stale_after(every), stale, "{every:?}");
        }
        assert_eq!(look_every(s(3600), s(5)), s(5));
        assert_eq!(look_every(s(4), s(5)), s(2));
        // Twice within the slack: overdue is seen before health's limit.
        for every in [s(1), s(4), s(30), s(3600)] {
            assert!(overdue_after(every) + look_every(every, s(5)) < stale_after(every), "{every:?}");
        }
    }
}
