-- Operators: the people who decide (compliance, treasury, admin), each
-- with keys the service authenticates (only a key's SHA-256 is kept).
CREATE TABLE operators (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    -- Comma-separated, sorted: `admin`, `compliance`, `treasury`.
    roles TEXT NOT NULL,
    disabled_at BIGINT,
    disabled_reason TEXT,
    created_at BIGINT NOT NULL
);

CREATE TABLE operator_keys (
    id TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES operators (id),
    secret_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    last_used_at BIGINT
);
CREATE INDEX operator_keys_operator ON operator_keys (operator_id);

-- The audit log: append-only, each entry's `hash` over its canonical
-- encoding with the previous entry's hash (see src/audit/chain.rs).
CREATE TABLE audit_log (
    seq BIGINT PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    actor_name TEXT,
    action TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    organization_id TEXT,
    reason TEXT,
    request_id TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_log_organization ON audit_log (organization_id, seq);

-- The chain's head: one row, locked by every append, so that appends on
-- several instances form one linear chain; it also finds a deleted last
-- entry.
CREATE TABLE audit_head (
    id INTEGER PRIMARY KEY,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
