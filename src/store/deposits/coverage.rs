//! Registered means watched: where each address's watch begins, the live
//! cursor's first position, and the gaps scanned in the background for
//! addresses registered after the live cursor passed their watch start.
//!
//! Per address and chain the store keeps `watch_from` (the first block whose
//! deposits count), `live_from` (the first block the live watcher scanned
//! with the address in its set) and `gap_next` (every block of the gap
//! `[watch_from, live_from)` below it has been scanned for the address).
//! `live_from` is set in the transaction that moves the live cursor, so it is
//! exact: every block from it on is covered by live scans that knew the address.

use std::collections::HashMap;

use sqlx::{Any, Row, Transaction};

/// The rows still catching up, spelled as the partial index
/// `account_addresses_catching_up` is, so every query below can use it.
const CATCHING_UP: &str = "live_from IS NOT NULL AND (watch_from IS NULL OR gap_next < live_from)";

use crate::chain::Chain;
use crate::store::{
    ScanCommit, Store, StoreError, Tx, now_micros,
    params::{CHUNK, placeholders},
    to_i64,
};

/// Where a chain's first live scan may begin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchStart {
    /// The lowest explicit `--from-block`/`--from-slot` of an address not yet
    /// covered by the live watcher.
    pub earliest_block: Option<u64>,
    /// The earliest registration time (microseconds) of such an address whose
    /// block is not known yet: the watcher resolves it by block time.
    pub earliest_time: Option<i64>,
}

/// A gap to scan: the addresses that share `gap_next == from` and `live_from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub from: u64,
    pub live_from: u64,
    /// `(address, account_id)`.
    pub addresses: Vec<(String, String)>,
}

/// Addresses whose watch is not yet fully covered, for health reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Addresses with a gap still to scan or a watch start still to resolve.
    pub catching_up: u64,
    /// The lowest block of a gap still to scan.
    pub lowest_gap_block: Option<u64>,
}

impl Store {
    /// Where the first live scan of `chain` may begin, from the addresses the
    /// live watcher has not covered yet.
    pub async fn watch_start(&self, chain: Chain) -> Result<WatchStart, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(watch_from) AS block,
                    MIN(CASE WHEN watch_from IS NULL THEN registered_at END) AS registered
             FROM account_addresses WHERE chain = $1 AND live_from IS NULL",
        )
        .bind(chain.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(WatchStart {
            earliest_block: row.try_get::<Option<i64>, _>("block")?.map(|b| b as u64),
            earliest_time: row.try_get::<Option<i64>, _>("registered")?,
        })
    }

    /// Creates a chain's cursor at `start` in `tx` (unless another process
    /// created one first) and stamps the addresses of versions up to `seen`
    /// registered so far without a block with it.
    pub async fn start_cursor(
        &self,
        tx: &mut Tx,
        chain: Chain,
        start: u64,
        head: u64,
        seen: i64,
    ) -> Result<(), StoreError> {
        let created = sqlx::query(
            "INSERT INTO chain_cursors (chain, next_block, head, updated_at, watch_version)
             VALUES ($1, $2, $3, $4, 0) ON CONFLICT (chain) DO NOTHING",
        )
        .bind(chain.as_str())
        .bind(to_i64(start)?)
        .bind(to_i64(head)?)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
        if created.rows_affected() == 1 {
            sqlx::query(
                "UPDATE account_addresses SET watch_from = $1, gap_next = $1
                 WHERE chain = $2 AND watch_from IS NULL AND live_from IS NULL AND version <= $3",
            )
            .bind(to_i64(start)?)
            .bind(chain.as_str())
            .bind(seen)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// Registration times (microseconds) of covered-live addresses whose
    /// watch start is not resolved to a block yet, oldest first.
    pub async fn unresolved_registrations(&self, chain: Chain, limit: u32) -> Result<Vec<i64>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT DISTINCT registered_at FROM account_addresses
             WHERE chain = $1 AND {CATCHING_UP} AND watch_from IS NULL ORDER BY registered_at LIMIT $2"
        ))
        .bind(chain.as_str())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get::<i64, _>("registered_at")?)).collect()
    }

    /// Records in `tx` that addresses registered at `registered_at` are
    /// watched from `block`.
    pub async fn resolve_watch_start(
        &self,
        tx: &mut Tx,
        chain: Chain,
        registered_at: i64,
        block: u64,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE account_addresses SET watch_from = $1, gap_next = $1
             WHERE chain = $2 AND {CATCHING_UP} AND registered_at = $3 AND watch_from IS NULL"
        ))
        .bind(to_i64(block)?)
        .bind(chain.as_str())
        .bind(registered_at)
        .execute(&mut **tx)
        .await?;
        Ok(done.rows_affected())
    }

    /// The lowest gap still to scan, with every address that shares it.
    pub async fn next_gap(&self, chain: Chain) -> Result<Option<Gap>, StoreError> {
        let first = sqlx::query(&format!(
            "SELECT gap_next, live_from FROM account_addresses
             WHERE chain = $1 AND {CATCHING_UP} AND gap_next < live_from ORDER BY gap_next, live_from LIMIT 1"
        ))
        .bind(chain.as_str())
        .fetch_optional(&self.pool)
        .await?;
        let Some(first) = first else { return Ok(None) };
        let (from, live_from): (i64, i64) = (first.try_get("gap_next")?, first.try_get("live_from")?);
        let rows = sqlx::query(&format!(
            "SELECT address, account_id FROM account_addresses
             WHERE chain = $1 AND {CATCHING_UP} AND gap_next = $2 AND live_from = $3"
        ))
        .bind(chain.as_str())
        .bind(from)
        .bind(live_from)
        .fetch_all(&self.pool)
        .await?;
        let addresses = rows
            .iter()
            .map(|r| Ok((r.try_get("address")?, r.try_get("account_id")?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Some(Gap { from: from as u64, live_from: live_from as u64, addresses }))
    }

    /// The accounts that watch the given addresses on `chain`:
    /// `address → account_id`, for those that are watched.
    pub async fn accounts_at(
        &self,
        chain: Chain,
        addresses: &[String],
    ) -> Result<HashMap<String, String>, StoreError> {
        let mut out = HashMap::new();
        for chunk in addresses.chunks(CHUNK - 1) {
            let sql = format!(
                "SELECT address, account_id FROM account_addresses WHERE chain = $1 AND address IN ({})",
                placeholders(2, chunk.len())
            );
            let query = chunk.iter().fold(sqlx::query(&sql).bind(chain.as_str()), |q, a| q.bind(a));
            for row in query.fetch_all(&self.pool).await? {
                out.insert(row.try_get("address")?, row.try_get("account_id")?);
            }
        }
        Ok(out)
    }

    /// How many addresses of `chain` are still catching up.
    pub async fn coverage(&self, chain: Chain) -> Result<Coverage, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT COUNT(*) AS n, MIN(CASE WHEN gap_next < live_from THEN gap_next END) AS lowest
             FROM account_addresses WHERE chain = $1 AND {CATCHING_UP}"
        ))
        .bind(chain.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(Coverage {
            catching_up: row.try_get::<i64, _>("n")? as u64,
            lowest_gap_block: row.try_get::<Option<i64>, _>("lowest")?.map(|b| b as u64),
        })
    }
}

/// Compare-and-set of the live cursor, in the scan's transaction: it must
/// still be at `expected`, and the cursor's last scan must not have matched a
/// newer address set than this one (a scan with an older set may have missed
/// an address registered since). The addresses of this set that no live scan
/// covered yet are covered from this scan's first block on.
pub(in crate::store) async fn move_live_cursor(
    tx: &mut Transaction<'static, Any>,
    scan: &ScanCommit,
    expected: Option<u64>,
    watch_version: i64,
    now: i64,
) -> Result<(), StoreError> {
    let chain = scan.chain.as_str();
    let next = to_i64(scan.to + 1)?;
    let moved = match expected {
        Some(expected) => {
            sqlx::query(
                "UPDATE chain_cursors SET next_block = $1, head = $2, updated_at = $3, watch_version = $4
                 WHERE chain = $5 AND next_block = $6 AND watch_version <= $4",
            )
            .bind(next)
            .bind(to_i64(scan.head)?)
            .bind(now)
            .bind(watch_version)
            .bind(chain)
            .bind(to_i64(expected)?)
            .execute(&mut **tx)
            .await?
        }
        None => {
            sqlx::query(
                "INSERT INTO chain_cursors (chain, next_block, head, updated_at, watch_version)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (chain) DO NOTHING",
            )
            .bind(chain)
            .bind(next)
            .bind(to_i64(scan.head)?)
            .bind(now)
            .bind(watch_version)
            .execute(&mut **tx)
            .await?
        }
    };
    if moved.rows_affected() != 1 {
        return Err(StoreError::Elsewhere(format!(
            "the {chain} cursor moved under this scan, or was moved by a scan that knew more addresses \
             (another instance is indexing it)"
        )));
    }
    sqlx::query(
        "UPDATE account_addresses SET live_from = $1
         WHERE chain = $2 AND live_from IS NULL AND version <= $3",
    )
    .bind(to_i64(scan.from)?)
    .bind(chain)
    .bind(watch_version)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Moves a gap's progress, in the transaction of the deposits found in it:
/// the addresses at `gap_next == scan.from` sharing `live_from` are done
/// through `scan.to`. Another process having moved them first is a conflict.
pub(in crate::store) async fn move_gap_cursor(
    tx: &mut Transaction<'static, Any>,
    scan: &ScanCommit,
    live_from: u64,
    addresses: &[String],
) -> Result<(), StoreError> {
    let next = (scan.to + 1).min(live_from);
    let mut moved = 0;
    // Only the addresses scanned: another one may have joined this gap's
    // position (resolved meanwhile) without its blocks being read.
    for chunk in addresses.chunks(CHUNK - 4) {
        let sql = format!(
            "UPDATE account_addresses SET gap_next = $1
             WHERE chain = $2 AND {CATCHING_UP} AND gap_next = $3 AND live_from = $4 AND address IN ({})",
            placeholders(5, chunk.len())
        );
        let query = sqlx::query(&sql)
            .bind(to_i64(next)?)
            .bind(scan.chain.as_str())
            .bind(to_i64(scan.from)?)
            .bind(to_i64(live_from)?);
        let query = chunk.iter().fold(query, |q, address| q.bind(address));
        moved += query.execute(&mut **tx).await?.rows_affected();
    }
    if moved != addresses.len() as u64 {
        return Err(StoreError::Elsewhere(format!(
            "the {} gap at block {} was scanned by another process",
            scan.chain, scan.from
        )));
    }
    Ok(())
}
