-- Transactions of a platform-held key that a restored store did not know,
-- found on chain by `transfers recover`: every one is listed here; one that
-- moved an account's money is also a transfer (request_id `recovered:` and
-- its hash), and the rest (a platform wallet's own: a top-up, a mint, a
-- deployment) belong to no organization. Reconciliation counts what those
-- moved and paid.
CREATE TABLE recovered_transactions (
    chain TEXT NOT NULL,
    hash TEXT NOT NULL,
    sender TEXT NOT NULL,
    nonce BIGINT NOT NULL,
    -- NULL for a contract creation.
    to_address TEXT,
    -- The native value it carried, in the smallest unit.
    value TEXT NOT NULL,
    -- The first four bytes of its call data, hex; NULL when it called nothing.
    selector TEXT,
    -- MINED or REVERTED, as its receipt says.
    state TEXT NOT NULL,
    block_number BIGINT NOT NULL,
    block_hash TEXT NOT NULL,
    fee_raw TEXT NOT NULL,
    -- The transfer recorded for it, if it moved an account's money.
    transfer_id TEXT,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (chain, hash)
);
CREATE INDEX recovered_transactions_by_sender ON recovered_transactions (chain, sender);
