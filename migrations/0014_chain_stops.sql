-- A chain whose live watcher met an error no retry can cure (a reorg deeper
-- than its reorg_window, a store error) is stopped: no instance runs its
-- watcher again until an operator resumes it (`chains resume`), while the
-- other chains, the senders and the API keep running. One row per stop; a
-- resumed stop keeps its row (resumed_at, resumed_by), so every stop and who
-- ended it stays on record.
CREATE TABLE chain_stops (
    id TEXT PRIMARY KEY,
    chain TEXT NOT NULL,
    -- The error's kind, as in chain_health.last_error_kind (reorg_too_deep, store, ...).
    kind TEXT NOT NULL,
    -- The error, free of secrets.
    reason TEXT NOT NULL,
    -- The instance whose watcher stopped (`host/pid/tag`).
    instance TEXT NOT NULL,
    -- Microseconds.
    stopped_at BIGINT NOT NULL,
    resumed_at BIGINT,
    resumed_by TEXT
);

-- At most one stop in force per chain.
CREATE UNIQUE INDEX chain_stops_in_force ON chain_stops (chain) WHERE resumed_at IS NULL;
