-- Rows a database writer cannot make (see docs/operations.md, "What one
-- person can do alone"). Each new audit entry carries a MAC under a key
-- derived from the pepper the store never holds, written by the entry's
-- own insert (no entry is ever updated, so entries from before have none).
ALTER TABLE audit_log ADD COLUMN mac TEXT;

-- A session records the second-factor step that opened it (0: the
-- password alone; 1: the password and the second factor) and carries a
-- MAC over its user, that step and its creation time.
ALTER TABLE console_sessions ADD COLUMN factor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE console_sessions ADD COLUMN row_mac TEXT;

-- Every row that authenticates or authorizes carries a MAC over its table,
-- its id and the columns that grant (see src/store/sealed.rs): NULL on a
-- sandbox without a pepper, and on rows no process with the pepper wrote
-- until the log's authentication seals them as found.
ALTER TABLE console_users ADD COLUMN row_mac TEXT;
ALTER TABLE operators ADD COLUMN row_mac TEXT;
ALTER TABLE operator_keys ADD COLUMN row_mac TEXT;
ALTER TABLE api_keys ADD COLUMN row_mac TEXT;
