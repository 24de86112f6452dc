//! Settings that mean time. A chain file writes each either in seconds
//! (`*_secs`, fractional) or in the unit it always had (`*_ms`, `*_blocks`);
//! a file giving both for one setting is refused. A length of chain
//! history written in seconds ([`Span::Time`]) becomes a count of blocks
//! through the chain's block time as measured while the watcher runs
//! (`deposits::clock`), never through a constant: Base makes five blocks a
//! second since its Denim upgrade where it made one every two seconds.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A length of chain history: a count of blocks, or a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Blocks(u64),
    Time(Duration),
}

/// The most blocks a second any configured chain makes (Base: 5, Solana:
/// 2.5): until a chain's block time is measured, a span in seconds counts
/// this many, so that more history is kept and waits last longer, never
/// less.
const FASTEST_BLOCKS_PER_SECOND: u32 = 10;

impl Span {
    /// The blocks the span covers at `block_time` (rounded up); `None` for a
    /// time while the block time is not measured.
    pub fn blocks(self, block_time: Option<Duration>) -> Option<u64> {
        match self {
            Span::Blocks(n) => Some(n),
            Span::Time(time) => {
                let block = block_time.filter(|b| !b.is_zero())?.as_nanos();
                Some(u64::try_from(time.as_nanos().div_ceil(block)).unwrap_or(u64::MAX))
            }
        }
    }

    /// The blocks the span covers, a time not yet convertible counted at
    /// [`FASTEST_BLOCKS_PER_SECOND`]: for a window to keep or a wait to
    /// give, where more is safe.
    pub fn blocks_at_least(self, block_time: Option<Duration>) -> u64 {
        self.blocks(block_time).unwrap_or_else(|| match self {
            Span::Blocks(n) => n,
            Span::Time(time) => {
                let fastest = Duration::from_secs(1) / FASTEST_BLOCKS_PER_SECOND;
                Span::Time(time).blocks(Some(fastest)).unwrap_or(u64::MAX)
            }
        })
    }

    /// The span as a reader of the chain file wrote it: `256 blocks`, `300 s`.
    pub fn describe(self) -> String {
        match self {
            Span::Blocks(n) => format!("{n} blocks"),
            Span::Time(time) => format!("{} s", time.as_secs_f64()),
        }
    }
}

/// One setting written in at most one of its two forms: `old` (blocks or
/// milliseconds) or `secs`, named `old_key` and `secs_key` in errors.
pub(super) fn one_form<T>(
    old: Option<T>,
    secs: Option<f64>,
    old_key: &str,
    secs_key: &str,
) -> Result<Option<Either<T>>, String> {
    match (old, secs) {
        (Some(_), Some(_)) => Err(format!("{old_key} and {secs_key} give one setting twice: keep one")),
        (Some(old), None) => Ok(Some(Either::Old(old))),
        (None, Some(secs)) => seconds(secs, secs_key).map(|d| Some(Either::Secs(d))),
        (None, None) => Ok(None),
    }
}

/// A setting in its old unit or in seconds.
pub(super) enum Either<T> {
    Old(T),
    Secs(Duration),
}

/// The longest time a setting may give: a year.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// A positive number of seconds, at least a microsecond and at most a year.
pub(super) fn seconds(value: f64, key: &str) -> Result<Duration, String> {
    if value.is_nan() || value <= 0.0 {
        return Err(format!("{key} must be a positive number of seconds, not {value}"));
    }
    if value > MAX_SECONDS {
        return Err(format!("{key} is out of range: {value} (at most a year, {MAX_SECONDS})"));
    }
    let duration = Duration::from_secs_f64(value);
    if duration < Duration::from_micros(1) {
        return Err(format!("{key} is out of range: {value} (at least a microsecond)"));
    }
    Ok(duration)
}

/// Serde: a `*_secs` key of the `[transfers]` table, integer or fractional.
pub(super) fn secs<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let value = f64::deserialize(deserializer)?;
    seconds(value, "a time in seconds").map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_in_seconds_counts_blocks_at_the_measured_block_time() {
        let ms = Duration::from_millis;
        let cases: [(Span, Option<Duration>, Option<u64>, u64); 8] = [
            // (span, measured block time, blocks, blocks at least)
            (Span::Blocks(256), None, Some(256), 256),
            (Span::Blocks(256), Some(ms(200)), Some(256), 256),
            (Span::Time(Duration::from_secs(300)), Some(ms(200)), Some(1500), 1500),
            (Span::Time(Duration::from_secs(300)), Some(ms(2000)), Some(150), 150),
            (Span::Time(Duration::from_secs(300)), Some(ms(12_000)), Some(25), 25),
            // Rounded up: a window covers at least its time.
            (Span::Time(ms(500)), Some(ms(400)), Some(2), 2),
            // Not measured yet: ten blocks a second, more than any chain here.
            (Span::Time(Duration::from_secs(300)), None, None, 3000),
            (Span::Time(Duration::from_secs(300)), Some(Duration::ZERO), None, 3000),
        ];
        for (span, block_time, blocks, at_least) in cases {
            assert_eq!(span.blocks(block_time), blocks, "{span:?} at {block_time:?}");
            assert_eq!(span.blocks_at_least(block_time), at_least, "{span:?} at {block_time:?}");
        }
    }

    #[test]
    fn seconds_are_positive_and_finite() {
        assert_eq!(seconds(0.2, "k"), Ok(Duration::from_millis(200)));
        assert_eq!(seconds(300.0, "k"), Ok(Duration::from_secs(300)));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e30, 1e-10, 4e7] {
            assert!(seconds(bad, "poll_interval_secs").unwrap_err().contains("poll_interval_secs"), "{bad}");
        }
    }
}
