-- How many events of each status a deposit has had: a later event's id is
-- derived from the deposit's dedup_key, the status it announces and that
-- count, so that a deposit found again after a restore announces what it
-- announced before under the same ids. Deposits stored before start at 0.
ALTER TABLE deposits ADD COLUMN events_pending BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deposits ADD COLUMN events_confirmed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deposits ADD COLUMN events_failed BIGINT NOT NULL DEFAULT 0;
