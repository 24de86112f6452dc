-- In production a virtual account's number, recorded by one treasury
-- operator, waits for a second one's confirmation: the number proposed
-- and who recorded it (`operator:<id>`, as a mint's recorder).
ALTER TABLE virtual_accounts ADD COLUMN proposed_number TEXT;
ALTER TABLE virtual_accounts ADD COLUMN proposed_by TEXT;
