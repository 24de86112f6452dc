-- API keys: only a SHA-256 of the secret is stored; the secret is shown once.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX api_keys_by_organization ON api_keys (organization_id, created_at);

-- What each chain's live watcher last reported, for health checks: the
-- head it saw, the highest block it indexed, and when; its last failure.
CREATE TABLE chain_health (
    chain TEXT PRIMARY KEY,
    head BIGINT,
    indexed BIGINT,
    checked_at BIGINT,
    last_error TEXT,
    last_error_kind TEXT,
    last_error_at BIGINT
);

CREATE INDEX accounts_by_identity ON accounts (organization_id, identity_id, id);
