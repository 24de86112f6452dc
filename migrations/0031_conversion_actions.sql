-- What operators did to a conversion by hand (a refund sent again), with
-- who and why: one row per action, never updated.
CREATE TABLE conversion_actions (
    id TEXT PRIMARY KEY,
    conversion_id TEXT NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX conversion_actions_by_conversion ON conversion_actions (conversion_id, created_at);
