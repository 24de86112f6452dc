-- Spans in which the signer did not answer (its token gone, its KMS or
-- Transit server unreachable), by the signer they concern: while one is
-- open, and for as long as it lasted once closed, no accepted transfer's
-- submit window counts down. At most one open span per signer.
CREATE TABLE signer_outages (
    subject TEXT NOT NULL,
    since BIGINT NOT NULL,
    until BIGINT,
    message TEXT NOT NULL
);
CREATE UNIQUE INDEX signer_outages_open ON signer_outages (subject) WHERE until IS NULL;
CREATE INDEX signer_outages_until ON signer_outages (until);
