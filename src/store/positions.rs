//! Rewrites the positions stored before they were compact (see migration
//! 0030 and [`compact_key`]): once, when a migrated store opens, in one
//! transaction that also records it is done, so a crash half-way leaves
//! every row as it was and the next open starts again. Writers wait: a
//! scan's upsert must never meet a row still holding its readable form, or
//! the same transfer would be stored twice.

use sqlx::{Any, Row, Transaction};

use super::{Backend, Store, StoreError};
use crate::deposit::compact_key;

/// Rows read a statement.
const PAGE: i64 = 1_000;

/// Positions in their readable form: a kind and at least two colons.
const READABLE: &str = "(position LIKE 'log:%:%' OR position LIKE 'spl:%:%')";

impl Store {
    /// Compacts the positions stored in their readable form, unless done.
    pub(super) async fn compact_positions(&self) -> Result<(), StoreError> {
        if done(&self.pool).await? {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        if self.backend == Backend::Postgres {
            // Another instance opening at the same time waits here, then
            // finds the work done; scans wait to write.
            sqlx::query("LOCK TABLE store_meta, deposits, own_transfers IN EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
        }
        if !done(&mut *tx).await? {
            let deposits = compact_deposits(&mut tx).await?;
            let own = compact_own_transfers(&mut tx).await?;
            sqlx::query("UPDATE store_meta SET value = 1 WHERE key = 'positions_compact'")
                .execute(&mut *tx)
                .await?;
            tracing::info!(deposits, own_transfers = own, "stored positions compacted");
        }
        tx.commit().await?;
        Ok(())
    }
}

async fn done<'e, E: sqlx::Executor<'e, Database = Any>>(db: E) -> Result<bool, StoreError> {
    let value: Option<i64> =
        sqlx::query_scalar("SELECT value FROM store_meta WHERE key = 'positions_compact'")
            .fetch_optional(db)
            .await?;
    // No flag: a store whose migrations are not applied (nothing to do yet).
    Ok(value.is_none_or(|v| v != 0))
}

/// Rewrites the deposits' readable positions, a page at a time in id order.
async fn compact_deposits(tx: &mut Transaction<'static, Any>) -> Result<u64, StoreError> {
    let (mut after, mut count) = (String::new(), 0);
    loop {
        let sql =
            format!("SELECT id, position FROM deposits WHERE id > $1 AND {READABLE} ORDER BY id LIMIT $2");
        let rows = sqlx::query(&sql).bind(&after).bind(PAGE).fetch_all(&mut **tx).await?;
        let Some(last) = rows.last() else { return Ok(count) };
        after = last.try_get("id")?;
        for row in &rows {
            let (id, position): (String, String) = (row.try_get("id")?, row.try_get("position")?);
            sqlx::query("UPDATE deposits SET position = $1 WHERE id = $2")
                .bind(compact_key(&position))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            count += 1;
        }
    }
}

/// Rewrites the platform's own transfers' readable positions (a small table,
/// read whole).
async fn compact_own_transfers(tx: &mut Transaction<'static, Any>) -> Result<u64, StoreError> {
    let sql = format!("SELECT chain, tx_hash, position FROM own_transfers WHERE {READABLE}");
    let rows = sqlx::query(&sql).fetch_all(&mut **tx).await?;
    for row in &rows {
        let (chain, hash, position): (String, String, String) =
            (row.try_get("chain")?, row.try_get("tx_hash")?, row.try_get("position")?);
        sqlx::query(
            "UPDATE own_transfers SET position = $1 WHERE chain = $2 AND tx_hash = $3 AND position = $4",
        )
        .bind(compact_key(&position))
        .bind(chain)
        .bind(hash)
        .bind(position)
        .execute(&mut **tx)
        .await?;
    }
    Ok(rows.len() as u64)
}
