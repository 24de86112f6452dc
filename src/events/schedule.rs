//! When a failed delivery is tried again: the schedule of waits, each
//! jittered, never sooner than the receiver's `Retry-After` (within
//! reason), until the schedule runs out. Pure.

use std::time::Duration;

/// Waits after each failed attempt: immediately, then 5 s, 5 min, 30 min,
/// 2 h, 5 h and 10 h six times, about 68 hours in all (12 attempts).
pub const DEFAULT_SCHEDULE: [Duration; 11] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
];

/// The longest a receiver's `Retry-After` postpones its next attempt: a
/// larger one (or a hostile one) is taken as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// How long after failed attempt number `attempts` (counted from 0) the
/// next one waits under `schedule`, `retry_after` being what the receiver
/// asked; `None` once the schedule has run out (the delivery is dead).
pub fn next_wait(schedule: &[Duration], attempts: u32, retry_after: Option<Duration>) -> Option<Duration> {
    let wait = schedule.get(attempts as usize)?;
    let asked = retry_after.unwrap_or_default().min(MAX_RETRY_AFTER);
    Some(jittered(*wait).max(asked))
}

/// ±20% so that receivers coming back are not hit by every retry at once.
fn jittered(wait: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    let factor = 0.8 + 0.4 * f64::from(byte[0]) / 255.0;
    wait.mul_f64(factor)
}

/// Parses a retry schedule such as `5s,5m,30m,2h` (units `ms`, `s`, `m`, `h`).
pub fn parse_schedule(text: &str) -> Result<Vec<Duration>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let (number, unit) = s.split_at(split);
            let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration such as 5s"))?;
            let (scale, millis) = match unit {
                "ms" => (1, true),
                "s" => (1, false),
                "m" => (60, false),
                "h" => (3_600, false),
                "d" => (86_400, false),
                _ => return Err(format!("{s:?}: the unit must be ms, s, m, h or d")),
            };
            let n = n.checked_mul(scale).ok_or_else(|| format!("{s:?} is too long"))?;
            Ok(if millis { Duration::from_millis(n) } else { Duration::from_secs(n) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schedule_spans_about_three_days() {
        let total: Duration = DEFAULT_SCHEDULE.iter().sum();
        assert!((60..=80).contains(&(total.as_secs() / 3600)), "{total:?}");
        assert_eq!(
            parse_schedule("0s, 5s,5m,2h,250ms").unwrap(),
            [
                Duration::ZERO,
                Duration::from_secs(5),
                Duration::from_secs(300),
                Duration::from_secs(7200),
                Duration::from_millis(250)
            ]
        );
        assert!(parse_schedule("5x").is_err());
        for _ in 0..100 {
            let wait = jittered(Duration::from_secs(100));
            assert!((80..=120).contains(&wait.as_secs()), "{wait:?}");
        }
    }

    #[test]
    fn a_receivers_retry_after_postpones_within_an_hour_and_the_schedule_ends() {
        let schedule = [Duration::from_secs(10), Duration::from_secs(100)];
        let secs = |w: Option<Duration>| w.map(|w| w.as_secs());
        for (attempts, retry_after, at_least, at_most) in [
            (0, None, 8, 12),
            (1, None, 80, 120),
            (0, Some(Duration::from_secs(60)), 60, 60),
            (0, Some(Duration::from_secs(5)), 8, 12),
            (0, Some(Duration::from_secs(86_400)), 3600, 3600),
        ] {
            let wait = secs(next_wait(&schedule, attempts, retry_after)).expect("a wait");
            assert!((at_least..=at_most).contains(&wait), "{attempts} {retry_after:?}: {wait}");
        }
        assert_eq!(next_wait(&schedule, 2, None), None);
        assert_eq!(next_wait(&[], 0, Some(Duration::from_secs(1))), None);
    }
}
