-- The audit log made tamper-evident beyond its hash chain.
--
-- `detail`: what an entry records for machines (an operator's roles, a
-- key's id) as canonical JSON, never personal data; an entry with one is
-- hashed under the encoding's version 2 (see src/audit/chain.rs).
ALTER TABLE audit_log ADD COLUMN detail TEXT;

-- When the next signed checkpoint of the log is due: claimed by one
-- instance at a time with a conditional update.
CREATE TABLE audit_checkpoint_due (
    id INTEGER PRIMARY KEY,
    due_at BIGINT NOT NULL,
    owner TEXT
);
INSERT INTO audit_checkpoint_due (id, due_at, owner) VALUES (1, 0, NULL);

-- The triggers that keep `audit_log` append-only and `audit_head` moving
-- only forward onto the entry just appended are installed by `migrate`
-- itself (their language differs between SQLite and PostgreSQL): see
-- src/store/audit_guard.rs.
