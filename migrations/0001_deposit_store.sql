-- Portable between SQLite and PostgreSQL: TEXT and BIGINT only.
-- Times are microseconds since the Unix epoch (UTC).

CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
INSERT INTO organizations (id, name, created_at) VALUES ('default', 'Default organization', 0);

CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    identity_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX accounts_by_organization ON accounts (organization_id, id);

-- An address is watched for one account per chain.
CREATE TABLE account_addresses (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    PRIMARY KEY (chain, address)
);
CREATE INDEX account_addresses_by_account ON account_addresses (account_id);

-- Counters the watchers poll to notice changes cheaply.
CREATE TABLE store_meta (
    key TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO store_meta (key, value) VALUES ('accounts_version', 0);

-- One row per transfer into a watched address. The natural key
-- (chain, tx_hash, position) makes every write idempotent: position is
-- 'native', 'log:<index>' or 'trace:<path>'.
CREATE TABLE deposits (
    id TEXT PRIMARY KEY,
    dedup_key TEXT NOT NULL UNIQUE,
    chain TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    position TEXT NOT NULL,
    account_id TEXT NOT NULL,
    account_address TEXT NOT NULL,
    source_address TEXT NOT NULL,
    source_type TEXT NOT NULL,
    source_account_id TEXT,
    currency_symbol TEXT NOT NULL,
    amount_raw TEXT NOT NULL,
    decimals BIGINT NOT NULL,
    status TEXT NOT NULL,
    block_number BIGINT NOT NULL,
    block_hash TEXT NOT NULL,
    -- The scanned height at which the deposit's block was reorged away; NULL
    -- while its block is canonical.
    orphaned_at_block BIGINT,
    created_at BIGINT NOT NULL,
    confirmed_at BIGINT,
    updated_at BIGINT NOT NULL,
    UNIQUE (chain, tx_hash, position)
);
CREATE INDEX deposits_by_account ON deposits (account_id, created_at, id);
CREATE INDEX deposits_by_chain_status ON deposits (chain, status, block_number);

-- The live watcher's position: every block below next_block is indexed.
CREATE TABLE chain_cursors (
    chain TEXT PRIMARY KEY,
    next_block BIGINT NOT NULL,
    head BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Hashes of recently indexed blocks, to detect reorgs and find the common ancestor.
CREATE TABLE chain_blocks (
    chain TEXT NOT NULL,
    number BIGINT NOT NULL,
    hash TEXT NOT NULL,
    parent_hash TEXT NOT NULL,
    PRIMARY KEY (chain, number)
);

CREATE TABLE reorgs (
    id TEXT PRIMARY KEY,
    chain TEXT NOT NULL,
    detected_at BIGINT NOT NULL,
    common_ancestor BIGINT NOT NULL,
    depth BIGINT NOT NULL,
    orphaned_deposits BIGINT NOT NULL,
    confirmed_deposits_affected BIGINT NOT NULL
);
CREATE INDEX reorgs_by_chain ON reorgs (chain, detected_at);
