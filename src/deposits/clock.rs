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
/// it is made, so a short span would be read with a large error.
const MIN_SPAN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default)]
pub struct BlockClock {
    /// Each head advance seen: (when, head), oldest first.
    advances: VecDeque<(Duration, u64)>,
    /// The block time measured before (by an earlier run), until this run
    /// measures its own.
    earlier: Option<Duration>,
}

impl BlockClock {
    pub fn new(earlier: Option<Duration>) -> Self {
        Self { advances: VecDeque::new(), earlier }
    }

    /// Records the head seen at `at` (time since any fixed origin). A head
    /// that does not advance is no observation; one lower than seen (a
    /// backend behind) is ignored.
    pub fn observe(&mut self, at: Duration, head: u64) {
        if self.advances.back().is_some_and(|&(_, last)| head <= last) {
            return;
        }
        self.advances.push_back((at, head));
        while self.advances.len() > 2 && at.saturating_sub(self.advances[1].0) >= WINDOW {
            self.advances.pop_front();
        }
    }

    /// The measured block time, else the earlier run's, else `None`.
    pub fn block_time(&self) -> Option<Duration> {
        self.measured().or(self.earlier)
    }

    fn measured(&self) -> Option<Duration> {
        let (&(first_at, first), &(last_at, last)) = (self.advances.front()?, self.advances.back()?);
        let (blocks, span) = (last - first, last_at.saturating_sub(first_at));
        (blocks >= MIN_BLOCKS && span >= MIN_SPAN).then(|| span / u32::try_from(blocks).unwrap_or(u32::MAX))
    }
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
