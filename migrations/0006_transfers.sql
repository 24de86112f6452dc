-- Gas-sponsored outbound transfers. Amounts are integers in the smallest
-- unit, as decimal TEXT (they exceed 64 bits); USD in micro-dollars.

-- The derivation index of each segregated account whose key the service
-- holds. Keys themselves are never stored.
CREATE TABLE account_keys (
    account_id TEXT PRIMARY KEY REFERENCES accounts (id),
    key_index BIGINT NOT NULL UNIQUE
);

CREATE TABLE transfers (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    -- The client's idempotency key, unique per organization: concurrent
    -- duplicates meet this constraint, not a read-then-write.
    request_id TEXT NOT NULL,
    -- A digest of the normalised request, to tell a retry from a reuse.
    request_fingerprint TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    identity_id TEXT NOT NULL,
    chain TEXT NOT NULL,
    source_address TEXT NOT NULL,
    destination_address TEXT NOT NULL,
    currency_symbol TEXT NOT NULL,
    amount_raw TEXT NOT NULL,
    decimals BIGINT NOT NULL,
    -- ACCEPTED, SUBMITTED, CONFIRMED, FAILED or DROPPED.
    status TEXT NOT NULL,
    -- How it is sent: OMNIBUS (the omnibus wallet pays its own gas),
    -- AUTHORIZATION (EIP-3009 signed by the account, sent by the sponsor),
    -- TOP_UP (the sponsor funds the account's gas first).
    route TEXT NOT NULL,
    -- The derivation index of the account key that signs (NULL: omnibus).
    key_index BIGINT,
    -- The transaction that settled it (or the latest sent).
    transaction_hash TEXT,
    -- What the platform paid: major unit of the native coin, and USD.
    fee_amount TEXT,
    fee_currency_symbol TEXT,
    fee_usd_micros BIGINT,
    failure_code TEXT,
    failure_message TEXT,
    -- EIP-3009 only: the authorization's random nonce and validBefore.
    authorization_nonce TEXT,
    window_ends_at BIGINT,
    submitted_at BIGINT,
    confirmed_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    -- The status the last transfer event announced (NULL: none yet).
    announced_status TEXT,
    UNIQUE (organization_id, request_id)
);
CREATE INDEX transfers_by_organization ON transfers (organization_id, created_at, id);
CREATE INDEX transfers_by_account ON transfers (account_id, created_at, id);
CREATE INDEX transfers_by_chain_status ON transfers (chain, status);

-- Every transaction signed for a transfer, persisted before it is broadcast:
-- after a crash it is sent again byte for byte, never re-signed at another
-- nonce.
CREATE TABLE transfer_transactions (
    hash TEXT PRIMARY KEY,
    transfer_id TEXT NOT NULL REFERENCES transfers (id),
    chain TEXT NOT NULL,
    -- TOP_UP, TRANSFER or CANCEL.
    role TEXT NOT NULL,
    sender TEXT NOT NULL,
    nonce BIGINT NOT NULL,
    gas_limit BIGINT NOT NULL,
    -- The native value it carries (a top-up's amount).
    value TEXT NOT NULL,
    max_fee_per_gas TEXT NOT NULL,
    max_priority_fee_per_gas TEXT NOT NULL,
    raw TEXT NOT NULL,
    -- SENT, then MINED or REVERTED when its receipt is read; REJECTED when the
    -- node refused it.
    state TEXT NOT NULL,
    block_number BIGINT,
    block_hash TEXT,
    fee_raw TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX transfer_transactions_by_transfer ON transfer_transactions (transfer_id, created_at);
CREATE INDEX transfer_transactions_by_sender ON transfer_transactions (chain, sender, nonce);

-- The next nonce of each sending address.
CREATE TABLE sender_nonces (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    next_nonce BIGINT NOT NULL,
    PRIMARY KEY (chain, address)
);

-- One instance at a time sends on each chain: the holder of its lease.
CREATE TABLE sender_leases (
    chain TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until BIGINT NOT NULL
);

-- What the platform paid on chain for each organization.
CREATE TABLE gas_ledger (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    transfer_id TEXT NOT NULL REFERENCES transfers (id),
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
    UNIQUE (transaction_hash, kind)
);
CREATE INDEX gas_ledger_by_organization ON gas_ledger (organization_id, created_at);

-- Transaction limits: per account or per identity, per asset.
CREATE TABLE transaction_limit_policies (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    account_id TEXT,
    identity_id TEXT,
    currency_symbol TEXT NOT NULL,
    -- Major-unit decimal strings; NULL: no such limit.
    max_per_transfer TEXT,
    max_rolling_24h TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX limit_policies_by_account ON transaction_limit_policies (account_id);
CREATE INDEX limit_policies_by_identity ON transaction_limit_policies (identity_id);
