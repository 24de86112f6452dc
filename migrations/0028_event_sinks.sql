-- Event sinks: streams the outbox is published to besides webhooks (NATS
-- JetStream). One row per sink: `last_seq` is the last event it has taken
-- (every event up to it is acknowledged by the sink), so a sink that was
-- down catches up from there, in commit order. One instance publishes a
-- sink at a time: the one named by `lease_owner` until `lease_until`
-- (microseconds); its cursor moves only under that lease. The outbox purge
-- never removes an event past the lowest sink's `last_seq`.
CREATE TABLE event_sinks (
    name TEXT PRIMARY KEY,
    last_seq BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
