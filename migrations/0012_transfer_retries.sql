-- A transfer whose step failed on an RPC or store error waits on its own:
-- the sender skips it until `retry_at` (microseconds) and doubles the wait
-- with each failure in a row (`retries`), while the chain's other
-- transfers move on. `last_error` says why, for operators.
ALTER TABLE transfers ADD COLUMN retry_at BIGINT;
ALTER TABLE transfers ADD COLUMN retries BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transfers ADD COLUMN last_error TEXT;

-- A nonce of a sending address left unused below transactions signed after
-- it blocks them all: a zero-value self-transfer fills it. Its fee is the
-- platform's own cost, kept here, not billed to an organization.
CREATE TABLE nonce_fillers (
    hash TEXT PRIMARY KEY,
    chain TEXT NOT NULL,
    sender TEXT NOT NULL,
    nonce BIGINT NOT NULL,
    raw TEXT NOT NULL,
    -- SENT, then MINED once included (with its fee), or SUPERSEDED when
    -- another transaction used its nonce at a final block.
    state TEXT NOT NULL,
    fee_raw TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (chain, sender, nonce)
);
