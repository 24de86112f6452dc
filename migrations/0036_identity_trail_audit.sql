-- Each entry of an identity's trail names the audit-log entry of the same
-- decision (`audit_log.seq`): the trail keeps the statuses before and
-- after, the log who decided and why. Entries written before the log
-- existed are linked (or appended to the log) by the service at start.
ALTER TABLE identity_actions ADD COLUMN audit_seq BIGINT;
