use std::time::Duration;

use super::*;

fn state(head: u64, indexed: u64, seconds_ago: i64, now: DateTime<Utc>) -> ChainHealth {
    ChainHealth {
        chain: Chain::BaseSepolia,
        head: Some(head),
        indexed: Some(indexed),
        checked_at: Some(now - chrono::Duration::seconds(seconds_ago)),
        last_error: None,
        last_error_kind: None,
        last_error_at: None,
        block_time: None,
    }
}

#[test]
fn judges_lag_staleness_and_absence() {
    let now = Utc::now();
    let limit = Duration::from_secs(60);
    let fresh = assess(Chain::BaseSepolia, Some(&state(1000, 990, 5, now)), Span::Blocks(100), limit, now);
    assert!(fresh.healthy, "{:?}", fresh.problems);
    assert_eq!(fresh.lag, Some(10));

    let lagging = assess(Chain::BaseSepolia, Some(&state(1000, 800, 5, now)), Span::Blocks(100), limit, now);
    assert!(!lagging.healthy);
    assert_eq!(lagging.problems, ["indexing trails the head by 200 blocks (limit 100)"]);

    let mut stale = state(1000, 1000, 120, now);
    stale.last_error = Some("rpc eth_blockNumber failed on BASE_SEPOLIA: connection refused".into());
    stale.last_error_at = Some(now - chrono::Duration::seconds(1));
    let stale = assess(Chain::BaseSepolia, Some(&stale), Span::Blocks(100), limit, now);
    assert!(!stale.healthy);
    assert_eq!(stale.problems[0], "last successful scan 120s ago (limit 60s)");
    assert!(stale.problems[1].contains("connection refused"), "{:?}", stale.problems);

    let never = assess(Chain::BaseSepolia, None, Span::Blocks(100), limit, now);
    assert_eq!(never.problems, ["no successful scan recorded"]);
}

#[test]
fn a_lag_limit_in_seconds_is_judged_at_the_measured_block_time() {
    let now = Utc::now();
    let limit = Duration::from_secs(60);
    let five_minutes = Span::Time(Duration::from_secs(300));
    let ms = Duration::from_millis;
    // (lag in blocks, measured block time, healthy, the lag limit in blocks)
    let cases = [
        // Base since Denim: 1,000 blocks are 200 s, within five minutes,
        // where the 2 s block time of before would read 2,000 s.
        (1000, Some(ms(200)), true, Some(1500)),
        (1600, Some(ms(200)), false, Some(1500)),
        (100, Some(ms(2000)), true, Some(150)),
        (151, Some(ms(2000)), false, Some(150)),
        (20, Some(ms(12_000)), true, Some(25)),
        // Not measured: not judged, and said.
        (1_000_000, None, true, None),
    ];
    for (lag, block_time, healthy, limit_blocks) in cases {
        let mut recorded = state(10_000_000, 10_000_000 - lag, 5, now);
        recorded.block_time = block_time;
        let report = assess(Chain::BaseMainnet, Some(&recorded), five_minutes, limit, now);
        assert_eq!(report.healthy, healthy, "{lag} blocks at {block_time:?}: {:?}", report.problems);
        assert_eq!(report.max_lag_blocks, limit_blocks);
        assert_eq!(report.max_lag_seconds, Some(300.0));
        assert_eq!(report.block_time_ms, block_time.map(|t| t.as_millis() as u64));
        assert_eq!(report.warnings.len(), usize::from(block_time.is_none()), "{:?}", report.warnings);
    }
    let mut slow = state(10_000, 8_400, 5, now);
    slow.block_time = Some(ms(200));
    let report = assess(Chain::BaseMainnet, Some(&slow), five_minutes, limit, now);
    assert_eq!(
        report.problems,
        ["indexing trails the head by 1600 blocks, 320.0 s at 200 ms a block (limit 300 s)"]
    );
}

#[test]
fn a_setup_error_is_a_problem_at_once_and_a_transient_one_a_warning() {
    let now = Utc::now();
    let limit = Duration::from_secs(60);
    let failing = |kind: &str, message: &str| {
        let mut failing = state(1000, 1000, 5, now);
        failing.last_error = Some(message.into());
        failing.last_error_kind = Some(kind.into());
        failing.last_error_at = Some(now - chrono::Duration::seconds(1));
        failing
    };
    let pruned = failing("pruned", "slot 5 is below slot 9, the first the RPC node still holds");
    let pruned = assess(Chain::BaseSepolia, Some(&pruned), Span::Blocks(100), limit, now);
    assert!(!pruned.healthy);
    assert_eq!(
        pruned.problems,
        ["the watcher cannot progress: slot 5 is below slot 9, the first the RPC node still holds"]
    );

    let timeout =
        assess(Chain::BaseSepolia, Some(&failing("timeout", "timed out")), Span::Blocks(100), limit, now);
    assert!(timeout.healthy, "retried until stale: {:?}", timeout.problems);
    assert_eq!(timeout.warnings, ["the watcher's last step failed (timeout), retrying: timed out"]);

    // An error older than the last success is over.
    let mut over = failing("pruned", "pruned");
    over.last_error_at = Some(now - chrono::Duration::seconds(10));
    let over = assess(Chain::BaseSepolia, Some(&over), Span::Blocks(100), limit, now);
    assert!(over.healthy && over.warnings.is_empty());
}
