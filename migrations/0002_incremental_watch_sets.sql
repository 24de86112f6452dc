-- The accounts_version at which each address was added, so that watchers load
-- only the addresses added since they last looked.
ALTER TABLE account_addresses ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX account_addresses_by_version ON account_addresses (chain, version);
