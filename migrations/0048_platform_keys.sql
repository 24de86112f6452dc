-- The address of each platform key (the gas sponsor, the omnibus wallet,
-- the settlement wallet, the issuer) on each chain family, as first seen:
-- a service whose signer answers another address for one (a token or a KMS
-- alias replaced, keys made anew in an empty token) refuses to start
-- rather than send to or from it. Changed only by `keys init
-- --accept-new-keys`, an audited decision.
CREATE TABLE platform_keys (
    role TEXT NOT NULL,
    family TEXT NOT NULL,
    address TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (role, family)
);
