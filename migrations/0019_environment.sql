-- The environment (`sandbox` or `production`) that `run` or `serve` first
-- started the store in: one row at most. A process of the other environment
-- refuses the store, so identities the sandbox approved never reach
-- production.
CREATE TABLE store_environment (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'production')),
    stamped_at BIGINT NOT NULL
);
