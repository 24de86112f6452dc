-- Identities own accounts; an account's status is derived from its
-- identity's (FROZEN while SUSPENDED, CLOSED once TERMINATED) and written
-- only in the transaction that changes the identity.
CREATE TABLE identities (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    -- The client's idempotency key (NULL for identities registered by an operator).
    request_id TEXT,
    type TEXT NOT NULL,
    label TEXT NOT NULL,
    status TEXT NOT NULL,
    -- NULL when there is none.
    sub_status TEXT,
    -- While an RFI is open during onboarding: the step its fulfilment returns to.
    rfi_step TEXT,
    fiat_operations_enabled BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX identities_by_request ON identities (organization_id, request_id);

-- KYC/KYB data as submitted (JSON), newest last; the provider reviews the
-- newest.
CREATE TABLE compliance_submissions (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX compliance_submissions_by_identity ON compliance_submissions (organization_id, identity_id, created_at);

CREATE TABLE id_verification_checks (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    -- The submission whose review asked for it.
    submission_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    -- NOT_STARTED, IN_PROGRESS, COMPLETED or EXPIRED.
    status TEXT NOT NULL,
    verification_url TEXT NOT NULL,
    redirect_url TEXT,
    labels TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX id_verification_checks_by_identity ON id_verification_checks (organization_id, identity_id, created_at);
CREATE INDEX id_verification_checks_open ON id_verification_checks (status, expires_at);

-- Every accepted lifecycle event: who (an operator, the compliance
-- provider, the client's submission), why, and the state before and after.
CREATE TABLE identity_actions (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    event TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT,
    previous_status TEXT NOT NULL,
    previous_sub_status TEXT,
    status TEXT NOT NULL,
    sub_status TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX identity_actions_by_identity ON identity_actions (organization_id, identity_id, created_at);

-- The client's idempotency key of accounts created through the API.
ALTER TABLE accounts ADD COLUMN request_id TEXT;
CREATE UNIQUE INDEX accounts_by_request ON accounts (organization_id, request_id);

-- Accounts registered before identities existed name identities that were
-- onboarded elsewhere: each becomes an identity of its organization, whose
-- status follows what its accounts were set to by hand (any CLOSED account:
-- TERMINATED; else any FROZEN: SUSPENDED; else ACTIVE). Their type is not
-- known and is recorded as INDIVIDUAL.
INSERT INTO identities (organization_id, id, request_id, type, label, status, sub_status, rfi_step,
    fiat_operations_enabled, created_at, updated_at)
SELECT organization_id, identity_id, NULL, 'INDIVIDUAL', identity_id,
    CASE
        WHEN SUM(CASE WHEN status = 'CLOSED' THEN 1 ELSE 0 END) > 0 THEN 'TERMINATED'
        WHEN SUM(CASE WHEN status = 'FROZEN' THEN 1 ELSE 0 END) > 0 THEN 'SUSPENDED'
        ELSE 'ACTIVE'
    END,
    NULL, NULL, 0, MIN(created_at), MIN(created_at)
FROM accounts GROUP BY organization_id, identity_id;

UPDATE accounts SET status = (
    SELECT CASE i.status WHEN 'SUSPENDED' THEN 'FROZEN' WHEN 'TERMINATED' THEN 'CLOSED' ELSE 'ACTIVE' END
    FROM identities i WHERE i.organization_id = accounts.organization_id AND i.id = accounts.identity_id
);
