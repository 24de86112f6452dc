-- Operator keys expire in production (`expires_at`, microseconds; NULL:
-- never, as in sandbox) and remember the key that made them
-- (`parent_key_id`: revoking a key revokes the keys made with it). Keys
-- made before this release are given an expiry at a production start.
ALTER TABLE operator_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE operator_keys ADD COLUMN parent_key_id TEXT;
CREATE INDEX operator_keys_parent ON operator_keys (parent_key_id);

-- The second factor's secret an enrol page offered (sealed), which the
-- enrolment's code is checked against.
ALTER TABLE console_enrolments ADD COLUMN totp_secret TEXT;
