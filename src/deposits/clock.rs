//! A chain's block time, measured while its watcher runs: the wall time
//! the head took to advance over the last ten minutes. Settings written
//! in seconds that count blocks (`max_lag_secs`, `dropped_after_secs`,
//! `reorg_window_secs`) convert through it, so a chain that starts making
//! blocks faster (Base's Denim upgrade: 2 s to 200 ms) is judged by what
//! it does now. Pure: the caller gives the time of each observation.

use std::{collections::VecDeque, time::Duration};

/// How far back observations count.
const WINDOW: Duration = Duration::from_secs(600);
/// A measure needs the head to have advanced this many blocks...
const MIN_BLOCKS: u64 = 5;
/// ...over at least this long: a head is seen up to a poll interval after
/// it is made, so a short span would be read with a large error...
const MIN_SPAN: Duration = Duration::from_secs(10);
/// ...in at least this many advances.
const MIN_INTERVALS: usize = 4;
/// An interval this many times slower or faster a block than the median
/// one is left out of the measure.
const OUTLIER: u128 = 4;
/// Faster than this (beyond a second's worth) the head moves at no chain's
/// pace: a node jumped (a local node mining many blocks at once, a backend
/// answering a wrong head), and the measure starts anew from it.
const MAX_BLOCKS_PER_SECOND: u64 = 100;
/// A head below the last one seen for this long says the last one was the
/// outlier: the measure starts anew from the current head.
const LOWER_FOR: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default)]
pub struct BlockClock {
    /// Each head advance seen: (when, head), oldest first.
    advances: VecDeque<(Duration, u64)>,
    /// The block time measured before (by an earlier run, or before the
    /// measure started anew), until it is measured again.
    earlier: Option<Duration>,
    /// Since when the heads seen are below the last advance.
    lower_since: Option<Duration>,
}

impl BlockClock {
    pub fn new(earlier: Option<Duration>) -> Self {
        Self { advances: VecDeque::new(), earlier, lower_since: None }
    }

    /// Records the head seen at `at` (time since any fixed origin). A head
    /// that does not advance is no observation; one lower than seen (a
    /// backend behind) is ignored, unless it stays lower for a minute.
    pub fn observe(&mut self, at: Duration, head: u64) {
        let Some(&(last_at, last)) = self.advances.back() else {
            return self.advances.push_back((at, head));
        };
        if head <= last {
            let since = *self.lower_since.get_or_insert(at);
            if head < last && at.saturating_sub(since) >= LOWER_FOR {
                self.restart(at, head);
            }
            if head == last {
                self.lower_since = None;
            }
            return;
        }
        self.lower_since = None;
        let elapsed_ms = u64::try_from(at.saturating_sub(last_at).as_millis()).unwrap_or(u64::MAX);
        let possible = MAX_BLOCKS_PER_SECOND.saturating_mul(elapsed_ms.saturating_add(1000)) / 1000;
        if head - last > possible {
            return self.restart(at, head);
        }
        self.advances.push_back((at, head));
        while self.advances.len() > 2 && at.saturating_sub(self.advances[1].0) >= WINDOW {
            self.advances.pop_front();
        }
    }

    /// Starts the measure anew from `head`, the last measure kept until a
    /// new one is made.
    fn restart(&mut self, at: Duration, head: u64) {
        self.earlier = self.measured().or(self.earlier);
        self.advances.clear();
        self.advances.push_back((at, head));
        self.lower_since = None;
    }

    /// The block time measured in this run, else the earlier one, else
    /// `None`: what `health` judges the lag by.
    pub fn block_time(&self) -> Option<Duration> {
        self.measured().or(self.earlier)
    }

    /// The block time measured in this run: the head's advances over the
    /// window, without the intervals between them more than [`OUTLIER`]
    /// times slower or faster a block than the median one, so that a halt
    /// (one long interval) or a head seen late does not sway it.
    pub fn measured(&self) -> Option<Duration> {
        let mut intervals: Vec<(u128, u128)> = self
            .advances
            .iter()
            .zip(self.advances.iter().skip(1))
            .map(|(&(from_at, from), &(to_at, to))| {
                (to_at.saturating_sub(from_at).as_nanos(), u128::from(to - from))
            })
            .collect();
        let (span, blocks) = pooled(&intervals);
        if blocks < u128::from(MIN_BLOCKS) || span < MIN_SPAN.as_nanos() || intervals.len() < MIN_INTERVALS {
            return None;
        }
        // By time per block, compared without dividing.
        intervals.sort_by(|(t1, b1), (t2, b2)| (t1 * b2).cmp(&(t2 * b1)));
        let (median_t, median_b) = intervals[intervals.len() / 2];
        let near = |&&(t, b): &&(u128, u128)| {
            t * median_b <= OUTLIER * median_t * b && OUTLIER * t * median_b >= median_t * b
        };
        let kept: Vec<(u128, u128)> = intervals.iter().filter(near).copied().collect();
        let (span, blocks) = pooled(&kept);
        let block = Duration::from_nanos(u64::try_from(span / blocks.max(1)).unwrap_or(u64::MAX));
        (block >= Duration::from_millis(1)).then_some(block)
    }
}

/// The nanoseconds and the blocks of `intervals` together.
fn pooled(intervals: &[(u128, u128)]) -> (u128, u128) {
    intervals.iter().fold((0, 0), |(t, b), (dt, db)| (t.saturating_add(*dt), b.saturating_add(*db)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observes a head advancing one block per `block` (ms), seen every
    /// `poll` (ms), for `seconds`; returns the clock.
    fn follow(clock: &mut BlockClock, from_ms: u64, block: u64, poll: u64, seconds: u64) -> u64 {
        let mut at = from_ms;
        while at < from_ms + seconds * 1000 {
            clock.observe(Duration::from_millis(at), at / block);
            at += poll;
        }
        at
    }

    /// (block ms, poll ms, seconds followed, earlier, expected, tolerance ms)
    type Case = (u64, u64, u64, Option<u64>, Option<u64>, u64);

    #[test]
    fn measures_the_block_time_from_head_advances() {
        let ms = Duration::from_millis;
        let cases: [Case; 7] = [
            // Base since Denim: 200 ms blocks, polled every second.
            (200, 1000, 60, None, Some(200), 5),
            // Ethereum: 12 s blocks polled every 4 s.
            (12_000, 4000, 120, None, Some(12_000), 500),
            // Solana's 400 ms slots.
            (400, 500, 30, None, Some(400), 20),
            // Too short to tell: nothing measured, nothing assumed.
            (200, 1000, 5, None, None, 0),
            // Too short, but an earlier run measured 2 s: that until now.
            (200, 1000, 5, Some(2000), Some(2000), 0),
            // Measured now, the earlier run's figure no longer counts.
            (200, 1000, 60, Some(2000), Some(200), 5),
            // A head that never moves measures nothing.
            (u64::MAX, 1000, 60, None, None, 0),
        ];
        for (block, poll, seconds, earlier, expected, tolerance) in cases {
            let mut clock = BlockClock::new(earlier.map(ms));
            follow(&mut clock, 1_000_000, block, poll, seconds);
            let got = clock.block_time().map(|d| d.as_millis() as u64);
            match (got, expected) {
                (Some(got), Some(expected)) => {
                    assert!(got.abs_diff(expected) <= tolerance, "{block} ms blocks read {got} ms")
                }
                (got, expected) => assert_eq!(got, expected, "{block} ms blocks"),
            }
        }
    }

    #[test]
    fn a_chain_that_speeds_up_is_measured_at_its_new_rate_within_the_window() {
        let mut clock = BlockClock::new(None);
        // Two-second blocks for an hour, then 200 ms ones (the head goes on
        // from where it was).
        let at = follow(&mut clock, 0, 2000, 1000, 3600);
        assert_eq!(clock.block_time(), Some(Duration::from_secs(2)));
        let head = at / 2000;
        let mut now = at;
        while now < at + 700_000 {
            clock.observe(Duration::from_millis(now), head + (now - at) / 200);
            now += 1000;
        }
        let got = clock.block_time().unwrap().as_millis();
        assert!((195..=205).contains(&got), "after ten minutes at 200 ms: {got} ms");
    }

    #[test]
    fn a_head_that_jumps_or_falls_back_for_good_starts_the_measure_anew() {
        let mut clock = BlockClock::new(None);
        let at = follow(&mut clock, 0, 200, 1000, 60);
        assert_eq!(clock.block_time(), Some(Duration::from_millis(200)));
        // A local node mines 3,000 blocks at once: not a 200 µs chain.
        let head = at / 200 + 3000;
        clock.observe(Duration::from_millis(at), head);
        assert_eq!(clock.block_time(), Some(Duration::from_millis(200)), "the last measure kept");
        for second in 1..=30 {
            clock.observe(Duration::from_millis(at + second * 1000), head + second * 5);
        }
        assert_eq!(clock.block_time(), Some(Duration::from_millis(200)), "measured anew from the jump");

        // A head far ahead once (at a pace a chain could keep), then the
        // real one, below it, for over a minute.
        let mut clock = BlockClock::new(None);
        clock.observe(Duration::ZERO, 1000);
        clock.observe(Duration::from_secs(10), 1750);
        assert_eq!(clock.block_time(), None, "too few advances to tell");
        for second in 11..=100 {
            clock.observe(Duration::from_secs(second), 1000 + second * 5);
        }
        assert_eq!(clock.block_time(), Some(Duration::from_millis(200)), "the outlier forgotten");
    }

    #[test]
    fn a_halt_is_not_a_slower_chain() {
        let mut clock = BlockClock::new(None);
        let at = follow(&mut clock, 0, 200, 1000, 120);
        // Twenty minutes without a block, then 200 ms blocks again.
        let (halted, head) = (at + 1_200_000, at / 200);
        let mut now = halted;
        for (second, measured) in [(0, false), (5, true), (60, true)] {
            while now <= halted + second * 1000 {
                clock.observe(Duration::from_millis(now), head + (now - halted) / 200);
                now += 1000;
            }
            let got = clock.measured().map(|t| t.as_millis());
            // Right after, the halt alone is no measure: nothing is assumed.
            assert_eq!(got.is_some(), measured, "{second} s after the halt: {got:?}");
            assert!(got.is_none_or(|ms| (190..=210).contains(&ms)), "{second} s after the halt: {got:?}");
        }
    }

    #[test]
    fn a_backend_behind_is_not_a_slower_chain() {
        let mut clock = BlockClock::new(None);
        for second in 0..60u64 {
            // Every other answer comes from a backend ten blocks behind.
            let head = second * 5 + 100;
            let head = if second % 2 == 1 { head - 10 } else { head };
            clock.observe(Duration::from_secs(second), head);
        }
        assert_eq!(clock.block_time(), Some(Duration::from_millis(200)));
    }
}
