-- Solana's signatures strategy: the newest signature processed per address.
CREATE TABLE address_cursors (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    last_signature TEXT NOT NULL,
    last_slot BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (chain, address)
);
