-- The console's people: a tenant's users (an organization and a role:
-- `admin`, `developer`, `viewer`) and operators' sign-ins (the operator
-- they are). Sign-in is by email, unique among present users of both,
-- compared lowercased (a removed user's email may be invited again).
CREATE TABLE console_users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL,
    email_key TEXT NOT NULL,
    organization_id TEXT,
    operator_id TEXT,
    role TEXT,
    -- An argon2id PHC string; NULL until the person enrols.
    password_hash TEXT,
    -- The TOTP secret (base32), sealed when the store seals personal data;
    -- NULL without a second factor.
    totp_secret TEXT,
    -- The last TOTP time step accepted: a code is accepted once.
    totp_last_step BIGINT,
    created_at BIGINT NOT NULL,
    removed_at BIGINT
);
CREATE INDEX console_users_organization ON console_users (organization_id);
CREATE UNIQUE INDEX console_users_email ON console_users (email_key) WHERE removed_at IS NULL;
CREATE INDEX console_users_operator ON console_users (operator_id);

-- One-time enrol links (only their SHA-256 is kept), valid 24 hours.
CREATE TABLE console_enrolments (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES console_users (id),
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX console_enrolments_user ON console_enrolments (user_id);

-- Sessions, shared by every instance (only the cookie's SHA-256 is kept);
-- the CSRF token each state-changing request must carry.
CREATE TABLE console_sessions (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES console_users (id),
    csrf TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    ended_at BIGINT
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);

-- Failed sign-ins by email (known or not), for the doubling delay.
CREATE TABLE console_sign_in_failures (
    email_key TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    last_failed_at BIGINT NOT NULL
);

-- When each API key last authenticated a request (to the minute).
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
