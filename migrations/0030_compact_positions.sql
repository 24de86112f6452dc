-- A token transfer's position ('log:<symbol>:<from>:<to>:<raw>:<occurrence>')
-- and an SPL balance rise's ('spl:<owner>:<mint>') are now stored as their
-- kind and a 128-bit digest of that readable form ('log:<22 characters>',
-- see `compact_key`): the unique (chain, tx_hash, position) index then holds
-- a short entry per deposit. SQL cannot compute the digest on SQLite, so the
-- store rewrites the positions stored before this change when it opens, in
-- one transaction that also sets this flag to 1 (see store/positions.rs).
INSERT INTO store_meta (key, value) VALUES ('positions_compact', 0);
