-- One row per singleton worker (a chain's live watcher, a chain's transfer
-- sender): the instance that runs it. `epoch` grows with every takeover and
-- the row is never deleted, so an epoch is never given twice; every write a
-- worker makes under its lease checks, in the write's own transaction, that
-- the row still names its owner and epoch. Replaces sender_leases, whose
-- holder was checked once per step only: stop every instance of the older
-- release before starting this one.
CREATE TABLE worker_leases (
    kind TEXT NOT NULL,
    chain TEXT NOT NULL,
    owner TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    -- Microseconds; the holder renews it while it works.
    until BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL,
    PRIMARY KEY (kind, chain)
);

DROP TABLE sender_leases;
