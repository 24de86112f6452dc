-- Repairs operators asked for through the service: the credits a
-- reconciliation found missed (as JSON, what the requester saw), their
-- worth in micro-dollars (NULL when the chain file gives no price), who
-- asked and why, and the decision. A repair worth more than the service's
-- --repair-second-operator-above waits for a second treasury operator;
-- the requester is always read from the audit log, never from this row.
CREATE TABLE reconcile_repairs (
    id TEXT PRIMARY KEY,
    chain TEXT NOT NULL,
    scope TEXT NOT NULL,
    credits TEXT NOT NULL,
    usd_micros BIGINT,
    status TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    reason TEXT NOT NULL,
    decided_by TEXT,
    deposits TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decided_at BIGINT
);
CREATE INDEX reconcile_repairs_by_time ON reconcile_repairs (created_at);
