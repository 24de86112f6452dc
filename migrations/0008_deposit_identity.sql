-- Token deposits were keyed by the block-wide log index ('log:<index>'),
-- which changes when a reorg re-includes the transaction at another place:
-- the same transfer then became a second deposit. They are now keyed by
-- what the Transfer log moves and its occurrence among the identical
-- transfers of its transaction, both fixed by the transaction alone:
--     'log:<symbol>:<from>:<to>:<raw amount>:<occurrence>'
-- with lowercase addresses and occurrences from 0 in log order (see
-- `Position::Log`). Every stored token deposit is rewritten to the key the
-- decoder now computes, so a scan after the upgrade (a backfill, a reorg)
-- finds the rows stored before it instead of adding them again.
--
-- Identical transfers of a transaction are numbered by their old log index.
-- A transaction stored twice by an earlier reorg (the old key's defect) has
-- a live row and a FAILED or orphaned one: the live rows are numbered first,
-- so they take the keys a new scan produces and the stale one stays apart.
-- A staging table keeps the numbering independent of the rows being updated.
CREATE TABLE deposit_positions_0008 (
    id TEXT PRIMARY KEY,
    position TEXT NOT NULL
);
INSERT INTO deposit_positions_0008 (id, position)
SELECT id,
    'log:' || currency_symbol || ':' || LOWER(source_address) || ':' || LOWER(account_address) || ':'
        || amount_raw || ':' || CAST(occurrence - 1 AS TEXT)
FROM (
    SELECT id, currency_symbol, source_address, account_address, amount_raw,
        ROW_NUMBER() OVER (
            PARTITION BY chain, tx_hash, currency_symbol, LOWER(source_address), LOWER(account_address),
                amount_raw
            ORDER BY CASE WHEN status = 'FAILED' OR orphaned_at_block IS NOT NULL THEN 1 ELSE 0 END,
                block_number DESC, CAST(SUBSTR(position, 5) AS BIGINT)
        ) AS occurrence
    FROM deposits
    WHERE position LIKE 'log:%'
) numbered;
UPDATE deposits
SET position = (SELECT p.position FROM deposit_positions_0008 p WHERE p.id = deposits.id)
WHERE id IN (SELECT id FROM deposit_positions_0008);
DROP TABLE deposit_positions_0008;

-- A deposit names the sender's account only when it belongs to the
-- receiver's organization; one from another organization's account is an
-- ON_CHAIN deposit like any other. Rows stored before this rule are put right.
UPDATE deposits SET source_type = 'ON_CHAIN', source_account_id = NULL
WHERE source_account_id IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM accounts s, accounts r
      WHERE s.id = deposits.source_account_id AND r.id = deposits.account_id
        AND s.organization_id = r.organization_id
  );
