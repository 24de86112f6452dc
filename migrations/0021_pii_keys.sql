-- Personal data (identities.label, compliance_submissions.data) is stored
-- sealed with the key of CUSTODY_INDEXER_PII_KEY (see src/pii.rs). The store
-- keeps that key's id, never the key, so that a process with another key is
-- refused instead of serving data it cannot open. One row at most.
CREATE TABLE pii_keys (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    key_id TEXT NOT NULL,
    -- The key itself (base64) only for a sandbox store started without
    -- CUSTODY_INDEXER_PII_KEY: sandbox data is not real. NULL otherwise.
    kept_key TEXT,
    created_at BIGINT NOT NULL
);
