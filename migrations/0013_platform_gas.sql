-- The gas ledger also holds what the platform paid for itself: the fee of a
-- nonce filler (a zero-value self-transfer at a nonce nothing else used) is
-- an entry with no organization and no transfer, billed to nobody. The
-- table is rebuilt because SQLite cannot drop a NOT NULL constraint; its
-- rows are copied unchanged. Fillers included before this migration get
-- their entry from the next sender step, which reads their receipts again.
CREATE TABLE gas_ledger_v2 (
    id TEXT PRIMARY KEY,
    -- Both NULL for the platform's own cost, both set otherwise.
    organization_id TEXT REFERENCES organizations (id),
    transfer_id TEXT REFERENCES transfers (id),
    chain TEXT NOT NULL,
    transaction_hash TEXT NOT NULL,
    -- NETWORK_FEE (gasUsed × effectiveGasPrice, Solana fee), L1_DATA_FEE
    -- (OP-stack), RENT (Solana account creation).
    kind TEXT NOT NULL,
    amount_raw TEXT NOT NULL,
    decimals BIGINT NOT NULL,
    currency_symbol TEXT NOT NULL,
    usd_micros BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (transaction_hash, kind),
    CHECK ((organization_id IS NULL) = (transfer_id IS NULL))
);

INSERT INTO gas_ledger_v2 (id, organization_id, transfer_id, chain, transaction_hash, kind, amount_raw,
    decimals, currency_symbol, usd_micros, created_at)
SELECT id, organization_id, transfer_id, chain, transaction_hash, kind, amount_raw,
    decimals, currency_symbol, usd_micros, created_at
FROM gas_ledger;

DROP TABLE gas_ledger;
ALTER TABLE gas_ledger_v2 RENAME TO gas_ledger;
CREATE INDEX gas_ledger_by_organization ON gas_ledger (organization_id, created_at);
