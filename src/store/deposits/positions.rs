//! Rewrites the positions stored before they were compact (see migration
//! 0030 and [`compact_key`]): once, when a migrated store opens, in one
//! transaction that also records it is done, so a crash half-way leaves
//! every row as it was and the next open starts again.
//!
//! Every process of this version opens the store before it scans, so none
//! scans while the rewrite runs: instances opening at once take turns on
//! the flag's row (SQLite's write lock), and the later ones find it done.
//! A process of an older version would still write readable positions; it
//! must be stopped before the upgrade.

use sqlx::{Any, Row, Transaction};

use crate::deposits::resource::compact_key;
use crate::store::{
    Backend, Store, StoreError,
    arrays::{ColumnArrays, Kind, unnest},
    params::ARRAY_ROWS,
};

/// Positions in their readable form: a kind and at least two colons.
const READABLE: &str = "(position LIKE 'log:%:%' OR position LIKE 'spl:%:%')";

impl Store {
    /// Compacts the positions stored in their readable form, unless done.
    pub(in crate::store) async fn compact_positions(&self) -> Result<(), StoreError> {
        if done(&self.pool, "").await? {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        // PostgreSQL: another instance opening now waits on the row, then
        // finds it done. (SQLite's transaction holds the write lock already.)
        let lock = if self.backend == Backend::Postgres { " FOR UPDATE" } else { "" };
        if !done(&mut *tx, lock).await? {
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

/// Whether the rewrite is done. The flag is written by migration 0030, which
/// has run when this is asked: a store without it is not one this version
/// wrote.
async fn done<'e, E: sqlx::Executor<'e, Database = Any>>(db: E, lock: &str) -> Result<bool, StoreError> {
    let sql = format!("SELECT value FROM store_meta WHERE key = 'positions_compact'{lock}");
    let value: Option<i64> = sqlx::query_scalar(&sql).fetch_optional(db).await?;
    value.map(|v| v != 0).ok_or_else(|| StoreError::Corrupt("store_meta has no positions_compact row".into()))
}

/// A deposit's new position.
struct Rewrite {
    id: String,
    position: String,
}

/// Rewrites the deposits' readable positions, a page at a time in id order:
/// on PostgreSQL a page in one statement (its rows as column arrays), on
/// SQLite (or for a page the arrays cannot carry) a prepared statement per
/// row.
async fn compact_deposits(tx: &mut Transaction<'static, Any>) -> Result<u64, StoreError> {
    let postgres = Backend::of(tx) == Backend::Postgres;
    let select =
        format!("SELECT id, position FROM deposits WHERE id > $1 AND {READABLE} ORDER BY id LIMIT $2");
    let (mut after, mut count) = (String::new(), 0);
    loop {
        let rows = sqlx::query(&select).bind(&after).bind(ARRAY_ROWS as i64).fetch_all(&mut **tx).await?;
        let Some(last) = rows.last() else { return Ok(count) };
        after = last.try_get("id")?;
        let page = rows
            .iter()
            .map(|r| {
                Ok(Rewrite {
                    id: r.try_get("id")?,
                    position: compact_key(&r.try_get::<String, _>("position")?),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        count += page.len() as u64;
        if postgres {
            let mut arrays = ColumnArrays::new(2);
            page.iter().for_each(|row| _ = arrays.text(&row.id).text(&row.position));
            let from = unnest(&[("id", Kind::Text), ("position", Kind::Text)]);
            let sql =
                format!("UPDATE deposits SET position = r.position FROM {from} WHERE deposits.id = r.id");
            if let Some(query) = arrays.bind(sqlx::query(&sql)) {
                query.execute(&mut **tx).await?;
                continue;
            }
        }
        for row in page {
            sqlx::query("UPDATE deposits SET position = $1 WHERE id = $2")
                .bind(row.position)
                .bind(row.id)
                .execute(&mut **tx)
                .await?;
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
