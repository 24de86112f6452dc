-- Each entry of an identity's trail names the audit-log entry of the same
-- decision (`audit_log.seq`): the trail keeps the statuses before and
-- after, the log who decided and why. Entries written before the log
-- existed are linked (or appended to the log) by the service at start.
ALTER TABLE identity_actions ADD COLUMN audit_seq BIGINT;
CREATE INDEX identity_actions_audit_seq ON identity_actions (audit_seq);
-- The entries still to adopt: found without reading the whole trail.
CREATE INDEX identity_actions_unlinked ON identity_actions (created_at)
    WHERE audit_seq IS NULL AND actor <> 'client';
