-- Deposits the RPC URLs of a chain with `confirm_quorum` above 1 disagreed
-- about: which URL answered what (URLs without their secrets, as JSON),
-- and how it ended (`OPEN`, `CONFIRMED`, `NOT_ON_QUORUM`). One row per
-- deposit, rewritten with the latest answers until it ends.
CREATE TABLE provider_disputes (
    deposit_id TEXT PRIMARY KEY,
    chain TEXT NOT NULL,
    account_id TEXT NOT NULL,
    address TEXT NOT NULL,
    asset TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    block_number BIGINT NOT NULL,
    block_hash TEXT NOT NULL,
    answers TEXT NOT NULL,
    outcome TEXT NOT NULL,
    first_seen_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX provider_disputes_by_time ON provider_disputes (first_seen_at, deposit_id);
