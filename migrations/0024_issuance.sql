-- Issuance: the bank accounts clients register for their identities, and the
-- mint instructions that tell them where to wire dollars to have stablecoins
-- minted.

-- A client's bank account. `details` is the Bank account details object,
-- sealed (personal data).
CREATE TABLE bank_accounts (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    details TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX bank_accounts_by_request ON bank_accounts (organization_id, request_id);
CREATE INDEX bank_accounts_by_identity ON bank_accounts (organization_id, identity_id, id);

-- Where to wire and what a wire quoting `memo_id` mints: `stablecoin_symbol`
-- on `chain` to `destination_address`, the address of the account
-- `account_id` on that chain when the instruction was made. `bank_details` is
-- the platform's receiving bank as the instruction showed it (JSON).
CREATE TABLE mint_instructions (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    stablecoin_symbol TEXT NOT NULL,
    chain TEXT NOT NULL,
    account_id TEXT NOT NULL,
    destination_address TEXT NOT NULL,
    memo_id TEXT NOT NULL,
    bank_details TEXT NOT NULL,
    label TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX mint_instructions_by_request ON mint_instructions (organization_id, request_id);
CREATE UNIQUE INDEX mint_instructions_by_memo ON mint_instructions (memo_id);
CREATE INDEX mint_instructions_by_identity ON mint_instructions (organization_id, identity_id, id);

-- A wire that arrived for a mint instruction, and the mint it starts: the
-- instruction's stablecoin, on its chain, to its address, for `amount_cents`
-- dollars. `wire_reference` names the wire (an operator's bank reference, or
-- the simulation's own) and makes recording it again a no-op. A sandbox wire
-- settles at `settles_at` with `bank_outcome` (SETTLE, REJECT or RETURN); an
-- operator's wire has settled when it is recorded. `fiat_return` is PENDING
-- while the platform owes the dollars of a failed mint back, COMPLETED once
-- an operator (`return_by`, `return_reason`) sent them. Operators are
-- recorded as `operator:NAME`, NAME trimmed and in lower case.
CREATE TABLE mints (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    instruction_id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    memo_id TEXT NOT NULL,
    amount_cents BIGINT NOT NULL,
    stablecoin_symbol TEXT NOT NULL,
    chain TEXT NOT NULL,
    destination_address TEXT NOT NULL,
    status TEXT NOT NULL,
    failure_reason TEXT,
    wire_source TEXT NOT NULL,
    wire_reference TEXT NOT NULL,
    recorded_by TEXT,
    recorded_reason TEXT,
    approved_by TEXT,
    bank_outcome TEXT NOT NULL,
    settles_at BIGINT NOT NULL,
    transaction_hash TEXT,
    deposit_id TEXT,
    fiat_return TEXT,
    return_reference TEXT,
    return_by TEXT,
    return_reason TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX mints_by_wire ON mints (wire_reference);
CREATE INDEX mints_to_settle ON mints (status, settles_at);
CREATE INDEX mints_by_organization ON mints (organization_id, id);
CREATE INDEX mints_by_return ON mints (fiat_return);

-- A row per (chain, stablecoin) whose daily mint cap a settlement checks:
-- writing it serializes the settlements that count the day's mints.
CREATE TABLE issuance_locks (
    name TEXT PRIMARY KEY
);
