-- A chain's block time as its watcher measured it (microseconds): the
-- settings written in seconds that count blocks (max_lag_secs,
-- dropped_after_secs, reorg_window_secs) convert through it, and a
-- restarted watcher starts from it until it has measured its own.
ALTER TABLE chain_health ADD COLUMN block_time_micros BIGINT;
