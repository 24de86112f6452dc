-- Registered means watched: where each address's watch begins on its chain,
-- and how far the watchers have covered it.

-- When the address was registered (microseconds), or the time it should be
-- watched from: the watcher resolves it to a block (slot) by block time.
ALTER TABLE account_addresses ADD COLUMN registered_at BIGINT NOT NULL DEFAULT 0;
-- The first block (slot) whose deposits to the address are looked for: given
-- by `accounts add --from-block/--from-slot`, else resolved from registered_at.
-- NULL until resolved.
ALTER TABLE account_addresses ADD COLUMN watch_from BIGINT;
-- The first block of the first live scan that matched the address: from here
-- on the live watcher covers it. NULL until that scan commits.
ALTER TABLE account_addresses ADD COLUMN live_from BIGINT;
-- The gap [watch_from, live_from) is scanned for the address in the
-- background: every block below gap_next is done.
ALTER TABLE account_addresses ADD COLUMN gap_next BIGINT;
-- Addresses the live watcher has not matched yet (few, and looked up by
-- every live commit), and those still catching up (few, scanned in the
-- background): partial indexes, so a million covered addresses cost nothing.
CREATE INDEX account_addresses_not_live ON account_addresses (chain, version) WHERE live_from IS NULL;
CREATE INDEX account_addresses_catching_up ON account_addresses (chain, gap_next, live_from)
    WHERE live_from IS NOT NULL AND (watch_from IS NULL OR gap_next < live_from);

UPDATE account_addresses SET registered_at =
    (SELECT accounts.created_at FROM accounts WHERE accounts.id = account_addresses.account_id);
-- Addresses of chains already indexed were watched by the live cursor: no gap.
UPDATE account_addresses SET watch_from = 0, live_from = 0, gap_next = 0
    WHERE chain IN (SELECT chain FROM chain_cursors);

-- The address-set version the last live scan matched against: a scan that
-- matched an older set cannot move the cursor (it may have missed a newly
-- registered address).
ALTER TABLE chain_cursors ADD COLUMN watch_version BIGINT NOT NULL DEFAULT 0;
