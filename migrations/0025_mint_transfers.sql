-- The transfer that sends a mint's transaction (route MINT), created once
-- per MINTING mint by the chain's sender.
ALTER TABLE mints ADD COLUMN transfer_id TEXT REFERENCES transfers (id);
CREATE UNIQUE INDEX mints_by_transfer ON mints (transfer_id);
CREATE INDEX mints_by_status ON mints (status, chain);
-- One return wire returns one mint's dollars.
CREATE UNIQUE INDEX mints_by_return_reference ON mints (return_reference);
-- When the bank settled the wire: a daily mint cap counts a mint on the UTC
-- day it settled (one that arrived before midnight and settled after it
-- counts on the later day). Mints settled before this column existed take
-- their last change.
ALTER TABLE mints ADD COLUMN settled_at BIGINT;
UPDATE mints SET settled_at = updated_at WHERE status <> 'RECEIVED';
CREATE INDEX mints_by_settlement ON mints (chain, stablecoin_symbol, settled_at);
