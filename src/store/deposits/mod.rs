//! Deposits and the scans that produce them.

pub(in crate::store) mod chain_state;
pub(in crate::store) mod chain_stops;
pub(in crate::store) mod coverage;
pub(in crate::store) mod deposit_rows;
pub(in crate::store) mod disputes;
pub(in crate::store) mod health;
pub(in crate::store) mod own_transfers;
pub(in crate::store) mod positions;
pub(in crate::store) mod scan;
pub(in crate::store) mod upsert;

use sqlx::{Row, any::AnyRow};

use super::{
    Store, StoreError, Tx,
    events::{announce_changed, announce_deposits},
    now_micros, parse_column, to_i64,
};
use crate::{
    chain::Chain,
    deposits::resource::{Deposit, DepositStatus, split_own},
};
use deposit_rows::{ChangedDeposit, DEPOSIT_COLUMNS, changed_columns, deposit_from_row};
use own_transfers::{own_hashes, record_own};
use scan::{CursorMove, ScanCommit};
use upsert::upsert_deposits;

/// A deposit whose block was reorged away, awaiting its transaction's fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub id: String,
    pub tx_hash: String,
    pub orphaned_at_block: u64,
}

/// A page of an account's deposits, newest first (`created_at`, then `id`,
/// both descending), as the API lists them.
#[derive(Debug, Clone, Default)]
pub struct DepositPage {
    pub organization: String,
    pub account_id: String,
    pub chain: Option<Chain>,
    pub currency_symbol: Option<String>,
    /// Only deposits created at or after this time (microseconds).
    pub start: Option<i64>,
    /// Only deposits created before this time (microseconds).
    pub end: Option<i64>,
    /// Only deposits after this `(created_at, id)` in the order: the keyset of
    /// the previous page's last deposit, so pages neither repeat nor skip a
    /// deposit while new ones arrive.
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

impl Store {
    /// Deposits of an account, newest first.
    pub async fn deposits_of_account(&self, account_id: &str) -> Result<Vec<Deposit>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {DEPOSIT_COLUMNS} FROM deposits WHERE account_id = $1 ORDER BY created_at DESC, id DESC"
        ))
        .bind(account_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deposit_from_row).collect()
    }

    /// Every deposit on a chain, oldest block first (for audits and tests).
    pub async fn deposits_on_chain(&self, chain: Chain) -> Result<Vec<Deposit>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {DEPOSIT_COLUMNS} FROM deposits WHERE chain = $1 ORDER BY block_number, tx_hash, position"
        ))
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deposit_from_row).collect()
    }

    pub async fn deposit(&self, id: &str) -> Result<Deposit, StoreError> {
        let row = sqlx::query(&format!("SELECT {DEPOSIT_COLUMNS} FROM deposits WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("deposit {id}")))?;
        deposit_from_row(&row)
    }

    /// A page of deposits of one organization's account; see [`DepositPage`].
    pub async fn deposit_page(&self, page: &DepositPage) -> Result<Vec<Deposit>, StoreError> {
        let (after_time, after_id) = page.after.clone().unzip();
        let rows = sqlx::query(&format!(
            "SELECT {DEPOSIT_COLUMNS} FROM deposits
             WHERE account_id = $1
               AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = deposits.account_id AND a.organization_id = $2)
               AND ($3 IS NULL OR chain = $3)
               AND ($4 IS NULL OR currency_symbol = $4)
               AND ($5 IS NULL OR created_at >= $5)
               AND ($6 IS NULL OR created_at < $6)
               AND ($7 IS NULL OR created_at < $7 OR (created_at = $7 AND id < $8))
             ORDER BY created_at DESC, id DESC
             LIMIT $9"
        ))
        .bind(&page.account_id)
        .bind(&page.organization)
        .bind(page.chain.map(|c| c.as_str()))
        .bind(page.currency_symbol.as_deref())
        .bind(page.start)
        .bind(page.end)
        .bind(after_time)
        .bind(after_id)
        .bind(i64::from(page.limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deposit_from_row).collect()
    }

    /// The newest `limit` deposits of `organization`'s accounts, optionally
    /// of one account, chain and status.
    pub async fn organization_deposits(
        &self,
        organization: &str,
        account: Option<&str>,
        chain: Option<Chain>,
        status: Option<DepositStatus>,
        limit: i64,
    ) -> Result<Vec<Deposit>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {DEPOSIT_COLUMNS} FROM deposits
             WHERE account_id IN (SELECT a.id FROM accounts a WHERE a.organization_id = $1)
               AND ($2 IS NULL OR account_id = $2)
               AND ($3 IS NULL OR chain = $3)
               AND ($4 IS NULL OR status = $4)
             ORDER BY created_at DESC, id DESC
             LIMIT $5"
        ))
        .bind(organization)
        .bind(account)
        .bind(chain.map(|c| c.as_str()))
        .bind(status.map(|s| s.as_str()))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deposit_from_row).collect()
    }

    /// A deposit, if it belongs to an account of `organization`.
    pub async fn organization_deposit(&self, organization: &str, id: &str) -> Result<Deposit, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {DEPOSIT_COLUMNS} FROM deposits
             WHERE id = $1
               AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = deposits.account_id AND a.organization_id = $2)"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("deposit {id}")))?;
        deposit_from_row(&row)
    }

    /// Deposits whose block was reorged away and which were not seen again.
    pub async fn orphans(&self, chain: Chain) -> Result<Vec<Orphan>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, tx_hash, orphaned_at_block FROM deposits
             WHERE chain = $1 AND status = 'PENDING' AND orphaned_at_block IS NOT NULL ORDER BY id",
        )
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Orphan {
                    id: r.try_get("id")?,
                    tx_hash: r.try_get("tx_hash")?,
                    orphaned_at_block: r.try_get::<i64, _>("orphaned_at_block")? as u64,
                })
            })
            .collect()
    }

    /// Marks orphaned deposits `FAILED` in `tx`, closing a providers'
    /// dispute still open about one as `REORGED`; one seen again in the
    /// meantime is left alone. Returns the ids that failed.
    pub async fn fail_orphans(&self, tx: &mut Tx, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let now = now_micros();
        let mut failed = Vec::new();
        for id in ids {
            let row = sqlx::query(
                "UPDATE deposits SET status = 'FAILED', updated_at = $1
                 WHERE id = $2 AND status = 'PENDING' AND orphaned_at_block IS NOT NULL RETURNING id",
            )
            .bind(now)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
            if row.is_some() {
                sqlx::query(
                    "UPDATE provider_disputes SET outcome = 'REORGED', updated_at = $1
                     WHERE deposit_id = $2 AND outcome = 'OPEN'",
                )
                .bind(now)
                .bind(id)
                .execute(&mut **tx)
                .await?;
                failed.push(id.clone());
            }
        }
        announce_deposits(tx, failed.iter().map(String::as_str), now).await?;
        Ok(failed)
    }

    /// The newest signature processed for an address (Solana).
    pub async fn address_cursor(
        &self,
        chain: Chain,
        address: &str,
    ) -> Result<Option<(String, u64)>, StoreError> {
        let row = sqlx::query(
            "SELECT last_signature, last_slot FROM address_cursors WHERE chain = $1 AND address = $2",
        )
        .bind(chain.as_str())
        .bind(address)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some((row.try_get("last_signature")?, row.try_get::<i64, _>("last_slot")?.max(0) as u64)))
    }

    /// Pending deposits of blocks up to `through`: `(id, block number,
    /// transaction hash)`.
    pub async fn pending_through(
        &self,
        chain: Chain,
        through: u64,
    ) -> Result<Vec<(String, u64, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, block_number, tx_hash FROM deposits
             WHERE chain = $1 AND status = 'PENDING' AND block_number <= $2
             ORDER BY block_number, id",
        )
        .bind(chain.as_str())
        .bind(to_i64(through)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((r.try_get("id")?, r.try_get::<i64, _>("block_number")? as u64, r.try_get("tx_hash")?))
            })
            .collect()
    }

    /// Settles pending deposits at once in `tx`: `confirmed` become
    /// `CONFIRMED`, `failed` (their block never became final) `FAILED`.
    pub async fn settle(
        &self,
        tx: &mut Tx,
        confirmed: &[String],
        failed: &[String],
    ) -> Result<Vec<(String, DepositStatus)>, StoreError> {
        let unpinned = |ids: &[String]| ids.iter().map(|id| (id.clone(), None)).collect::<Vec<_>>();
        settle_rows(tx, &unpinned(confirmed), &unpinned(failed), now_micros()).await
    }

    /// Confirms, in `tx`, the pending deposits of blocks up to `through`
    /// outside a scan (when the finalized block moves while no new block
    /// arrives), each change announced.
    pub async fn confirm_through(
        &self,
        tx: &mut Tx,
        chain: Chain,
        through: u64,
    ) -> Result<Vec<(String, DepositStatus)>, StoreError> {
        let now = now_micros();
        let changed = confirm_through(tx, chain, through, now).await?;
        let statuses = changed.iter().map(|c| (c.deposit.id.clone(), c.deposit.status)).collect();
        announce_changed(tx, changed, now).await?;
        Ok(statuses)
    }
}

/// A scanned range written inside `tx`: its deposits upserted on their
/// natural key (in multi-row statements), its block hashes, what the
/// policy confirms, each change announced and the cursor moved. What the
/// platform's own recorded transactions (gas top-ups, cancellations, nonce
/// fillers) moved is no deposit: it is kept apart, unannounced. Returns
/// the deposits whose status it set or changed.
pub async fn scan_in(tx: &mut Tx, scan: &ScanCommit) -> Result<Vec<(String, DepositStatus)>, StoreError> {
    let now = now_micros();
    if let CursorMove::Live { expected, watch_version } = scan.cursor {
        coverage::move_live_cursor(tx, scan, expected, watch_version, now).await?;
        record_blocks(tx, scan).await?;
    }
    if let CursorMove::Address { address, expected, next, slot } = &scan.cursor {
        move_address_cursor(tx, scan.chain, address, expected.as_deref(), next, *slot, now).await?;
    }
    if let CursorMove::Gap { live_from, addresses } = &scan.cursor {
        coverage::move_gap_cursor(tx, scan, *live_from, addresses).await?;
    }
    let split = split_own(&scan.deposits, &own_hashes(tx, scan.chain, &scan.deposits).await?);
    record_own(tx, &split.own, now).await?;
    let mut changed = upsert_deposits(tx, scan, &split.deposits, now).await?;
    // Only the live watcher, which follows reorgs (EVM) and settles slots
    // (Solana) before it confirms, confirms the chain's other pending
    // deposits; a backfill or a gap scan records its own deposits alone.
    if let (Some(through), CursorMove::Live { .. }) = (scan.confirmed_through, &scan.cursor) {
        changed.extend(confirm_through(tx, scan.chain, through, now).await?);
    }
    let statuses = changed.iter().map(|c| (c.deposit.id.clone(), c.deposit.status)).collect();
    announce_changed(tx, changed, now).await?;
    Ok(statuses)
}

/// Keeps the scanned blocks' hashes (and only the recent ones).
async fn record_blocks(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    scan: &ScanCommit,
) -> Result<(), StoreError> {
    let chain = scan.chain.as_str();
    for block in &scan.blocks {
        sqlx::query(
            "INSERT INTO chain_blocks (chain, number, hash, parent_hash) VALUES ($1, $2, $3, $4)
             ON CONFLICT (chain, number) DO UPDATE SET hash = excluded.hash, parent_hash = excluded.parent_hash",
        )
        .bind(chain)
        .bind(to_i64(block.number)?)
        .bind(&block.hash)
        .bind(&block.parent_hash)
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query("DELETE FROM chain_blocks WHERE chain = $1 AND number < $2")
        .bind(chain)
        .bind(to_i64(scan.to.saturating_sub(scan.keep_blocks))?)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Compare-and-set of an address's signature cursor.
async fn move_address_cursor(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    chain: Chain,
    address: &str,
    expected: Option<&str>,
    next: &str,
    slot: u64,
    now: i64,
) -> Result<(), StoreError> {
    let moved = match expected {
        Some(expected) => {
            sqlx::query(
                "UPDATE address_cursors SET last_signature = $1, last_slot = $2, updated_at = $3
             WHERE chain = $4 AND address = $5 AND last_signature = $6",
            )
            .bind(next)
            .bind(to_i64(slot)?)
            .bind(now)
            .bind(chain.as_str())
            .bind(address)
            .bind(expected)
            .execute(&mut **tx)
            .await?
        }
        None => {
            sqlx::query(
                "INSERT INTO address_cursors (chain, address, last_signature, last_slot, updated_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (chain, address) DO NOTHING",
            )
            .bind(chain.as_str())
            .bind(address)
            .bind(next)
            .bind(to_i64(slot)?)
            .bind(now)
            .execute(&mut **tx)
            .await?
        }
    };
    if moved.rows_affected() != 1 {
        return Err(StoreError::Elsewhere(format!("the {chain} cursor of {address} moved under this scan")));
    }
    Ok(())
}

/// Confirms the pending, unorphaned deposits of blocks up to `through`.
async fn confirm_through(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    chain: Chain,
    through: u64,
    now: i64,
) -> Result<Vec<ChangedDeposit>, StoreError> {
    let rows = sqlx::query(&format!(
        "UPDATE deposits SET status = 'CONFIRMED', confirmed_at = $1, updated_at = $1
         WHERE chain = $2 AND status = 'PENDING' AND orphaned_at_block IS NULL AND block_number <= $3
         RETURNING {}",
        changed_columns()
    ))
    .bind(now)
    .bind(chain.as_str())
    .bind(to_i64(through)?)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|row| ChangedDeposit::from_row(row, false)).collect()
}

/// `confirmed` pending deposits `CONFIRMED` and `failed` ones `FAILED`,
/// each change announced; a deposit no longer pending, or, when its block
/// hash is given, no longer in that block, is left alone.
pub(super) async fn settle_rows(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    confirmed: &[(String, Option<String>)],
    failed: &[(String, Option<String>)],
    now: i64,
) -> Result<Vec<(String, DepositStatus)>, StoreError> {
    let mut changed = Vec::new();
    for (ids, status, confirmed_at) in
        [(confirmed, DepositStatus::Confirmed, Some(now)), (failed, DepositStatus::Failed, None)]
    {
        for (id, block_hash) in ids {
            let row = sqlx::query(
                "UPDATE deposits SET status = $1, confirmed_at = $2, updated_at = $3
                 WHERE id = $4 AND status = 'PENDING'
                   AND ($5 IS NULL OR (block_hash = $5 AND orphaned_at_block IS NULL))
                 RETURNING id, status",
            )
            .bind(status.as_str())
            .bind(confirmed_at)
            .bind(now)
            .bind(id)
            .bind(block_hash)
            .fetch_optional(&mut **tx)
            .await?;
            if let Some(row) = row {
                changed.push(changed_row(&row)?);
            }
        }
    }
    announce_deposits(tx, changed.iter().map(|(id, _)| id.as_str()), now).await?;
    Ok(changed)
}

fn changed_row(row: &AnyRow) -> Result<(String, DepositStatus), StoreError> {
    Ok((row.try_get("id")?, parse_column(&row.try_get::<String, _>("status")?, "deposits.status")?))
}
