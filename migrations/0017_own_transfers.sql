-- Value the platform's own operational transactions (a gas top-up from the
-- sponsor, a cancellation, a nonce filler) moved into a watched address. The
-- sender records each such transaction's hash before broadcasting it, so a
-- scan finds it recorded and keeps the transfer here instead of as a
-- deposit: no deposit, no event, nothing in the API. Operators list them
-- with `deposits platform`. Deposits recorded before this table existed
-- stay deposits: they were announced.
CREATE TABLE own_transfers (
    chain TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    -- As deposits.position: which transfer of the transaction.
    position TEXT NOT NULL,
    -- TOP_UP, CANCEL or NONCE_FILLER.
    kind TEXT NOT NULL,
    account_id TEXT NOT NULL,
    account_address TEXT NOT NULL,
    source_address TEXT NOT NULL,
    currency_symbol TEXT NOT NULL,
    amount_raw TEXT NOT NULL,
    decimals BIGINT NOT NULL,
    -- The block it was last seen in, and that block's time (microseconds).
    block_number BIGINT NOT NULL,
    block_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (chain, tx_hash, position)
);
CREATE INDEX own_transfers_by_account ON own_transfers (account_id, created_at);
