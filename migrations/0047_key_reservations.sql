-- The key number of each segregated account whose key the service holds,
-- taken before its keys are made and before its row is written (outside
-- the store's locks, as an HSM or a KMS may take a while): a retry of the
-- same creation finds the number, and with it the keys already made,
-- instead of making others. `account_keys` records the number once the
-- account exists; a number reserved by a creation that never finished is
-- never given to another account. A creation holds its reservation until
-- `claimed_until` (a lease, in microseconds), so two requests never make
-- one account's keys at once.
CREATE TABLE key_reservations (
    account_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    key_index BIGINT NOT NULL UNIQUE,
    reserved_at BIGINT NOT NULL,
    claimed_until BIGINT
);
INSERT INTO key_reservations (account_id, organization_id, key_index, reserved_at)
    SELECT k.account_id, a.organization_id, k.key_index, 0
    FROM account_keys k JOIN accounts a ON a.id = k.account_id;
