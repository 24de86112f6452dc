-- People changes that wait for a second admin (production): a new
-- operator, roles added, an operator enabled. `proposal` is the change's
-- JSON (`{"name","email","roles"}`, `{"roles"}`, `{}`); `target` the
-- operator it changes (for a new operator, the id it will have).
CREATE TABLE operator_changes (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    proposed_by TEXT NOT NULL,
    target TEXT NOT NULL,
    proposal TEXT NOT NULL,
    reason TEXT,
    created_at BIGINT NOT NULL,
    decided_by TEXT,
    decided_at BIGINT,
    decision_reason TEXT
);
CREATE INDEX operator_changes_status ON operator_changes (status, created_at);

-- Latches that never open again once closed (`genesis_ended`: two admins
-- have enrolled, so an admin is only added by an approved change). Each
-- is also an audit entry; either one holds the latch.
CREATE TABLE operator_latches (
    name TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    detail TEXT
);
