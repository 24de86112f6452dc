-- From this release an enrol link works only when the audit entry that
-- made it records its hash (`detail.link_sha256`): a link row written with
-- plain SQL enrols no one. Links made before carry no such entry, and
-- some were shown to whoever invited: every unused one stops working, and
-- an admin (or the tenant's admin) sends a fresh one.
UPDATE console_enrolments SET expires_at = 0 WHERE used_at IS NULL;

-- Entries looked up by what they are about: a link's, a change's.
CREATE INDEX audit_log_target ON audit_log (target_id, seq);
