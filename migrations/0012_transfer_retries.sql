-- A transfer whose step failed on an RPC or store error waits on its own:
-- the sender skips it until `retry_at` (microseconds) and doubles the wait
-- with each failure in a row (`retries`), while the chain's other
-- transfers move on. `last_error` says why, for operators.
ALTER TABLE transfers ADD COLUMN retry_at BIGINT;
ALTER TABLE transfers ADD COLUMN retries BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transfers ADD COLUMN last_error TEXT;
