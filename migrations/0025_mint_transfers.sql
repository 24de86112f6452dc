-- The transfer that sends a mint's transaction (route MINT), created once
-- per MINTING mint by the chain's sender.
ALTER TABLE mints ADD COLUMN transfer_id TEXT REFERENCES transfers (id);
CREATE UNIQUE INDEX mints_by_transfer ON mints (transfer_id);
CREATE INDEX mints_by_status ON mints (status, chain);
-- One return wire returns one mint's dollars.
CREATE UNIQUE INDEX mints_by_return_reference ON mints (return_reference);
