//! Per-chain indexing state: the live cursor, recent block hashes, reorgs.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::chain::Chain;
use crate::store::{BlockRef, Store, StoreError, Tx, now_micros, to_i64};

/// Where the live watcher of a chain stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainState {
    pub chain: Chain,
    /// Every block below this one is indexed.
    pub next_block: u64,
    /// The chain head at the last commit.
    pub head: u64,
    pub updated_at: DateTime<Utc>,
}

/// A reorg to undo: blocks above `common_ancestor` are no longer canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewind {
    pub chain: Chain,
    pub common_ancestor: u64,
    /// The cursor the watcher read; the rewind is refused if it moved.
    pub expected_next: u64,
    /// The height the watcher had scanned, used to age orphans.
    pub scanned_height: u64,
}

/// What a rewind changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewindOutcome {
    /// Pending deposits set aside until their transactions reappear or fail.
    pub orphaned: u64,
    /// Confirmed deposits in the reorged blocks: left untouched, reported.
    pub confirmed_affected: u64,
}

impl Store {
    pub async fn chain_state(&self, chain: Chain) -> Result<Option<ChainState>, StoreError> {
        let row = sqlx::query("SELECT next_block, head, updated_at FROM chain_cursors WHERE chain = $1")
            .bind(chain.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(ChainState {
                chain,
                next_block: r.try_get::<i64, _>("next_block")? as u64,
                head: r.try_get::<i64, _>("head")? as u64,
                updated_at: DateTime::from_timestamp_micros(r.try_get("updated_at")?).unwrap_or_default(),
            })
        })
        .transpose()
    }

    /// The stored blocks at or below `number`, highest first.
    pub async fn blocks_below(
        &self,
        chain: Chain,
        number: u64,
        limit: u64,
    ) -> Result<Vec<BlockRef>, StoreError> {
        let rows = sqlx::query(
            "SELECT number, hash, parent_hash FROM chain_blocks WHERE chain = $1 AND number <= $2
             ORDER BY number DESC LIMIT $3",
        )
        .bind(chain.as_str())
        .bind(to_i64(number)?)
        .bind(to_i64(limit)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(BlockRef {
                    number: r.try_get::<i64, _>("number")? as u64,
                    hash: r.try_get("hash")?,
                    parent_hash: r.try_get("parent_hash")?,
                })
            })
            .collect()
    }

    /// Undoes the blocks above the common ancestor in `tx`: their hashes are
    /// dropped, their pending deposits are set aside as orphans, the cursor
    /// moves back, and the reorg is recorded.
    pub async fn rewind(&self, tx: &mut Tx, rewind: Rewind) -> Result<RewindOutcome, StoreError> {
        let chain = rewind.chain.as_str();
        let ancestor = to_i64(rewind.common_ancestor)?;
        let moved = sqlx::query(
            "UPDATE chain_cursors SET next_block = $1, updated_at = $2 WHERE chain = $3 AND next_block = $4",
        )
        .bind(ancestor + 1)
        .bind(now_micros())
        .bind(chain)
        .bind(to_i64(rewind.expected_next)?)
        .execute(&mut **tx)
        .await?;
        if moved.rows_affected() != 1 {
            return Err(StoreError::Raced(format!("the {chain} cursor moved under this rewind")));
        }
        sqlx::query("DELETE FROM chain_blocks WHERE chain = $1 AND number > $2")
            .bind(chain)
            .bind(ancestor)
            .execute(&mut **tx)
            .await?;
        let orphaned = sqlx::query(
            "UPDATE deposits SET orphaned_at_block = $1, updated_at = $2
             WHERE chain = $3 AND status = 'PENDING' AND block_number > $4 AND orphaned_at_block IS NULL",
        )
        .bind(to_i64(rewind.scanned_height)?)
        .bind(now_micros())
        .bind(chain)
        .bind(ancestor)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        let confirmed_affected: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM deposits WHERE chain = $1 AND status = 'CONFIRMED' AND block_number > $2",
        )
        .bind(chain)
        .bind(ancestor)
        .fetch_one(&mut **tx)
        .await?
        .try_get("n")?;
        sqlx::query(
            "INSERT INTO reorgs (id, chain, detected_at, common_ancestor, depth, orphaned_deposits,
                confirmed_deposits_affected) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(chain)
        .bind(now_micros())
        .bind(ancestor)
        .bind(to_i64(rewind.expected_next.saturating_sub(rewind.common_ancestor + 1))?)
        .bind(to_i64(orphaned)?)
        .bind(confirmed_affected)
        .execute(&mut **tx)
        .await?;
        Ok(RewindOutcome { orphaned, confirmed_affected: confirmed_affected as u64 })
    }

    /// How many reorgs were recorded on a chain.
    pub async fn reorg_count(&self, chain: Chain) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM reorgs WHERE chain = $1")
            .bind(chain.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")? as u64)
    }
}
