-- The outbox: every event, written in the transaction of the change that
-- causes it. `seq` is taken from store_meta's 'event_seq' row, whose lock is
-- held until commit, so seq order is commit order.
CREATE TABLE events (
    seq BIGINT PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    organization_id TEXT NOT NULL,
    type TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    -- The envelope as delivered: {"id", "type", "data"}.
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX events_by_organization ON events (organization_id, seq);
INSERT INTO store_meta (key, value) VALUES ('event_seq', 0);

-- The status the last event of each deposit announced (NULL: none yet).
ALTER TABLE deposits ADD COLUMN announced_status TEXT;

CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    url TEXT NOT NULL,
    label TEXT NOT NULL,
    -- ACTIVE, DISABLED (the receiver answered 410 Gone) or DELETED.
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    signing_key_id TEXT NOT NULL,
    signing_secret TEXT NOT NULL,
    signing_key_created_at BIGINT NOT NULL,
    -- The key before the last rotation, valid until previous_key_expires_at.
    previous_secret TEXT,
    previous_key_expires_at BIGINT
);
CREATE INDEX webhooks_by_organization ON webhooks (organization_id, status);

-- One delivery of one event to one webhook, retried until it succeeds or is
-- dead-lettered (FAILED). A worker owns a delivery while its lease lasts.
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    event_seq BIGINT NOT NULL,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id),
    resource_id TEXT NOT NULL,
    -- PENDING, DELIVERED or FAILED.
    state TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT,
    last_status BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (event_seq, webhook_id)
);
CREATE INDEX deliveries_due ON deliveries (state, next_attempt_at);
CREATE INDEX deliveries_in_order ON deliveries (webhook_id, resource_id, event_seq);

CREATE TABLE delivery_attempts (
    delivery_id TEXT NOT NULL REFERENCES deliveries (id),
    attempt BIGINT NOT NULL,
    at BIGINT NOT NULL,
    status_code BIGINT,
    error TEXT,
    duration_ms BIGINT NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);
