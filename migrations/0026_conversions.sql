-- Conversions: virtual accounts whose wires are delivered as stablecoins
-- (ON_RAMP), and the conversions themselves.

-- A bank account number opened for an identity. Its wires, quoting
-- `deposit_message`, mint `currency` on `chain` to `destination_address`,
-- the address of `account_id` on that chain when it was opened. `status` is
-- PENDING, ACTIVE or FAILED as the bank answered (INACTIVE is derived from
-- the identity when read). A sandbox bank answers `bank_outcome` (OPEN or
-- REFUSE, with `failure_reason`) at `opens_at`; a production one leaves
-- both NULL for an operator.
CREATE TABLE virtual_accounts (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    identity_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    account_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    chain TEXT NOT NULL,
    destination_address TEXT NOT NULL,
    banking_country TEXT NOT NULL,
    status TEXT NOT NULL,
    bank_outcome TEXT,
    failure_reason TEXT,
    opens_at BIGINT,
    deposit_message TEXT NOT NULL,
    bank_account_number TEXT NOT NULL,
    bank_details TEXT NOT NULL,
    fee_bps BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX virtual_accounts_by_request ON virtual_accounts (organization_id, request_id);
CREATE UNIQUE INDEX virtual_accounts_by_number ON virtual_accounts (bank_account_number);
CREATE UNIQUE INDEX virtual_accounts_by_message ON virtual_accounts (deposit_message);
CREATE INDEX virtual_accounts_by_identity ON virtual_accounts (organization_id, identity_id, id);
CREATE INDEX virtual_accounts_to_open ON virtual_accounts (status, opens_at);

-- A conversion. Amounts are cents of their currency (`source_cents`; the
-- `destination_cents` delivered, NULL until settlement; the `fee_cents`
-- kept). An ON_RAMP follows `mint_id`, the mint its wire started; its
-- `payment_instructions_id` is the virtual account.
CREATE TABLE conversions (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    account_id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    payment_instructions_id TEXT,
    request_id TEXT,
    quote_id TEXT,
    source_currency TEXT NOT NULL,
    source_cents BIGINT NOT NULL,
    source_chain TEXT,
    destination_currency TEXT NOT NULL,
    destination_cents BIGINT,
    fee_cents BIGINT NOT NULL,
    exchange_rate TEXT,
    mint_id TEXT,
    failure_reason TEXT,
    refund_details TEXT,
    completed_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX conversions_by_request ON conversions (organization_id, request_id);
CREATE UNIQUE INDEX conversions_by_mint ON conversions (mint_id);
CREATE INDEX conversions_by_status ON conversions (type, status);

-- The account a mint delivers to: its instruction's, or its virtual
-- account's (a mint started by an on-ramp names its virtual account in
-- `instruction_id`).
ALTER TABLE mints ADD COLUMN account_id TEXT;
-- The cents of the wire (`amount_cents`) the platform keeps as a fee: the
-- mint mints the rest. A fee is kept only once minted; a failed mint owes
-- the whole wire back.
ALTER TABLE mints ADD COLUMN fee_cents BIGINT NOT NULL DEFAULT 0;
UPDATE mints SET account_id = (
    SELECT i.account_id FROM mint_instructions i
    WHERE i.organization_id = mints.organization_id AND i.id = mints.instruction_id
);

-- A priced off-ramp, bound to one bank account of the organization
-- (`payment_instructions_id`): `source_cents` of the stablecoin paid out as
-- `destination_cents` at `rate` (an exact decimal), `fee_cents` of the
-- source kept. Usable once, until `expires_at`; `conversion_id` names the
-- conversion that used it.
CREATE TABLE quotes (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    payment_instructions_id TEXT NOT NULL,
    source_currency TEXT NOT NULL,
    source_cents BIGINT NOT NULL,
    destination_currency TEXT NOT NULL,
    destination_cents BIGINT NOT NULL,
    rate TEXT NOT NULL,
    fee_cents BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    conversion_id TEXT,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX quotes_by_conversion ON quotes (conversion_id);
