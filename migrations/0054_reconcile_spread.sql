-- A background reconciliation is spread over its period in slices: when
-- the pass began, how many slices it had, the period set
-- (`reconcile_every_secs`) and the period achieved (the time since the
-- pass before it began; none for the first one kept), which `health`
-- shows.
ALTER TABLE reconcile_runs ADD COLUMN started_at BIGINT;
ALTER TABLE reconcile_runs ADD COLUMN slices BIGINT NOT NULL DEFAULT 1;
ALTER TABLE reconcile_runs ADD COLUMN every_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE reconcile_runs ADD COLUMN period_ms BIGINT;
