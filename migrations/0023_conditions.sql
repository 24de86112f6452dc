-- Conditions a worker cannot cure by waiting, raised while they last so that
-- `health` and `/readyz` (other processes) can name them: an unfunded gas
-- sponsor, a webhook endpoint that fails every attempt. One row per
-- condition; cleared conditions are deleted. `chain` is '' for a condition
-- of no chain (a webhook).
CREATE TABLE conditions (
    chain TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,
    since BIGINT NOT NULL,
    seen_at BIGINT NOT NULL,
    PRIMARY KEY (chain, kind, subject)
);
