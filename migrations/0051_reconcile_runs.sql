-- The last background reconciliation of each chain: when it ended and how
-- long it took, at which height, how many lines it compared, how many
-- differ, how many reads failed, and the differing lines and failed reads
-- as JSON (what `health` and `GET /operator/v1/reconciliation` show).
CREATE TABLE reconcile_runs (
    chain TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    at_block BIGINT NOT NULL,
    lines BIGINT NOT NULL,
    differ BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    skipped BIGINT NOT NULL,
    detail TEXT NOT NULL,
    took_ms BIGINT NOT NULL
);

-- Money that left a watched address without the platform: a block where
-- the address's balance fell more than its ledger explains. Alarmed once
-- (counted, logged, audited), never credited or hidden.
CREATE TABLE unexplained_debits (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    asset TEXT NOT NULL,
    block BIGINT NOT NULL,
    account_id TEXT,
    change TEXT NOT NULL,
    transactions TEXT NOT NULL,
    first_seen_at BIGINT NOT NULL,
    PRIMARY KEY (chain, address, asset, block)
);
