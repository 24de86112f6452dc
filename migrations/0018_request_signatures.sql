-- Signed requests. An API key paired with a public key (SubjectPublicKeyInfo
-- PEM, checked on its curve when paired) must sign every request it makes;
-- a key without one works with its bearer secret alone.
ALTER TABLE api_keys ADD COLUMN public_key_pem TEXT;
-- `ES256` (P-256) or `EdDSA` (Ed25519): the only algorithm its tokens may use.
ALTER TABLE api_keys ADD COLUMN signature_algorithm TEXT;
-- Microseconds.
ALTER TABLE api_keys ADD COLUMN paired_at BIGINT;

-- Every accepted request token's `jti`, per key, until the token can no
-- longer be accepted anyway (its `exp` plus the tolerated clock skew): the
-- primary key refuses a replay on every instance sharing the store.
CREATE TABLE request_token_ids (
    api_key_id TEXT NOT NULL REFERENCES api_keys (id),
    jti TEXT NOT NULL,
    -- Seconds since the epoch; purged after.
    keep_until BIGINT NOT NULL,
    PRIMARY KEY (api_key_id, jti)
);
CREATE INDEX request_token_ids_by_expiry ON request_token_ids (keep_until);
