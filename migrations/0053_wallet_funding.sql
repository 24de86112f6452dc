-- Money that reached a platform wallet (the gas sponsor, the omnibus, the
-- settlement wallet, the issuer) from outside the platform: an operator
-- funding the sponsor's gas, say. Reconciliation records each transfer it
-- located in the block where the wallet's balance rose unexplained, when
-- the watcher's decoder names exactly that rise, and counts it in the
-- wallet's ledger from then on. Never a deposit: no event, nobody credited.
CREATE TABLE wallet_funding (
    chain TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    -- As deposits.position: which transfer of the transaction.
    position TEXT NOT NULL,
    address TEXT NOT NULL,
    asset TEXT NOT NULL,
    amount_raw TEXT NOT NULL,
    block_number BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (chain, tx_hash, position)
);
CREATE INDEX wallet_funding_by_address ON wallet_funding (chain, address);

-- An unexplained debit of a platform wallet names its role.
ALTER TABLE unexplained_debits ADD COLUMN wallet TEXT;

-- `run` looks for newly watched addresses' baselines every few seconds.
CREATE INDEX account_addresses_by_watch_from ON account_addresses (chain, watch_from);
