-- What `reconcile` compares the chain with, per watched address and asset.
--
-- The baseline: the address's balance just before its watch began (the end
-- of block `block`, `watch_from - 1`), from which its confirmed deposits and
-- what the platform sent count. `source` says how it was obtained: read
-- from an archive node (`archive`), or, when no node could read that far
-- back, the balance the first reconciliation found (`first_reconciliation`,
-- which then agrees by construction and says so).
CREATE TABLE reconcile_baselines (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    asset TEXT NOT NULL,
    block BIGINT NOT NULL,
    balance_raw TEXT NOT NULL,
    source TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (chain, address, asset)
);

-- The last height at which the address's balance of the asset agreed with
-- the ledger: a later difference is located between it and the height
-- reconciled, never from the watch start again.
CREATE TABLE reconcile_checkpoints (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    asset TEXT NOT NULL,
    block BIGINT NOT NULL,
    balance_raw TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (chain, address, asset)
);

-- The block a nonce filler was included in, from its receipt: its fee is a
-- term of its sender's ledger from that block on. Fillers included before
-- this column existed keep NULL: no block is known, so their fee is no term
-- and shows as a difference of their sender until explained.
ALTER TABLE nonce_fillers ADD COLUMN block_number BIGINT;
