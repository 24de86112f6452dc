//! The rows a reconciliation reads and keeps: watched addresses, each
//! address's ledger terms, baselines and checkpoints.

pub mod reconcile_repairs;
pub mod reconcile_runs;
pub mod reconcile_wallets;

use alloy::primitives::U256;
use sqlx::{Row, any::AnyRow};

use super::{Store, StoreError, Tx, now_micros, parse_column, to_i64};
use crate::{
    chain::Chain,
    reconcile::{Anchor, Baseline, Term, TermKind, Watched},
};

impl Store {
    /// Every watched address of `chain`, in address order, and whether its
    /// watch is still catching up (not yet covered by the live watcher, or a
    /// gap below it still being scanned).
    pub async fn reconcile_watched(&self, chain: Chain) -> Result<Vec<Watched>, StoreError> {
        let rows = sqlx::query(
            "SELECT address, account_id, watch_from,
                    CAST(CASE WHEN live_from IS NULL OR watch_from IS NULL OR gap_next < live_from
                         THEN 1 ELSE 0 END AS BIGINT) AS catching_up
             FROM account_addresses WHERE chain = $1 ORDER BY address",
        )
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| watched(r, r.try_get::<i64, _>("catching_up")? != 0)).collect()
    }

    /// The watched addresses of `chain` whose watch began at `since` or
    /// later, that the live watcher covers, with no baseline recorded in
    /// the native asset `native`.
    pub async fn unrecorded_baselines(
        &self,
        chain: Chain,
        native: &str,
        since: u64,
    ) -> Result<Vec<Watched>, StoreError> {
        let rows = sqlx::query(
            "SELECT address, account_id, watch_from FROM account_addresses a
             WHERE chain = $1 AND watch_from IS NOT NULL AND watch_from >= $2 AND live_from IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM reconcile_baselines b
                               WHERE b.chain = a.chain AND b.address = a.address AND b.asset = $3)
             ORDER BY address",
        )
        .bind(chain.as_str())
        .bind(to_i64(since)?)
        .bind(native)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| watched(r, false)).collect()
    }

    /// The addresses of `chain` with a deposit still `PENDING` in a block
    /// at or below `height` (not orphaned): the ledger does not hold it
    /// yet, while the chain's balance there does.
    pub async fn pending_addresses_through(
        &self,
        chain: Chain,
        height: u64,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT DISTINCT account_address FROM deposits
             WHERE chain = $1 AND status = 'PENDING' AND orphaned_at_block IS NULL AND block_number <= $2",
        )
        .bind(chain.as_str())
        .bind(to_i64(height)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| Ok(row.try_get("account_address")?)).collect()
    }

    /// Every term of `address`'s ledger on `chain` that is on chain (a block
    /// known), every asset: its confirmed deposits, the platform's own
    /// transfers into it, the native value and the fees of every
    /// transaction it sent (a filler's too), and the token amounts of
    /// transfers from it that were mined (whoever sent the transaction: an
    /// EIP-3009 authorization is sent by the sponsor). `native` is the
    /// chain's native symbol.
    pub async fn ledger_terms(
        &self,
        chain: Chain,
        address: &str,
        native: &str,
    ) -> Result<Vec<Term>, StoreError> {
        let credits = sqlx::query(
            "SELECT currency_symbol, amount_raw, block_number, 'D' AS kind FROM deposits
             WHERE chain = $1 AND account_address = $2 AND status = 'CONFIRMED'
             UNION ALL SELECT currency_symbol, amount_raw, block_number, 'O' AS kind FROM own_transfers
             WHERE chain = $1 AND account_address = $2",
        )
        .bind(chain.as_str())
        .bind(address)
        .fetch_all(&self.pool)
        .await?;
        let sent = sqlx::query(
            "SELECT value, fee_raw, block_number, state FROM transfer_transactions
             WHERE chain = $1 AND sender = $2 AND state IN ('MINED', 'REVERTED')
               AND block_number IS NOT NULL AND fee_raw IS NOT NULL
             UNION ALL SELECT '0' AS value, fee_raw, COALESCE(block_number, 0) AS block_number, state
             FROM nonce_fillers WHERE chain = $1 AND sender = $2 AND state = 'MINED' AND fee_raw IS NOT NULL
             UNION ALL SELECT value, fee_raw, block_number, state FROM recovered_transactions
             WHERE chain = $1 AND sender = $2 AND transfer_id IS NULL",
        )
        .bind(chain.as_str())
        .bind(address)
        .fetch_all(&self.pool)
        .await?;
        let tokens = sqlx::query(
            "SELECT t.currency_symbol, t.amount_raw, x.block_number FROM transfers t
             JOIN transfer_transactions x ON x.transfer_id = t.id
             WHERE t.chain = $1 AND t.source_address = $2 AND t.route <> 'MINT' AND t.currency_symbol <> $3
               AND x.role = 'TRANSFER' AND x.state = 'MINED' AND x.block_number IS NOT NULL",
        )
        .bind(chain.as_str())
        .bind(address)
        .bind(native)
        .fetch_all(&self.pool)
        .await?;
        let mut terms = Vec::with_capacity(credits.len() + 2 * sent.len() + tokens.len());
        for row in &credits {
            let kind =
                if row.try_get::<String, _>("kind")? == "D" { TermKind::Deposit } else { TermKind::Own };
            terms.push(term(row, "currency_symbol", "amount_raw", kind)?);
        }
        for row in &sent {
            let block = block_of(row)?;
            let fee = amount(row, "fee_raw")?;
            terms.push(Term { asset: native.to_string(), block, amount: fee, kind: TermKind::Fee });
            let value = amount(row, "value")?;
            if row.try_get::<String, _>("state")? == "MINED" && !value.is_zero() {
                terms.push(Term { asset: native.to_string(), block, amount: value, kind: TermKind::Sent });
            }
        }
        for row in &tokens {
            terms.push(term(row, "currency_symbol", "amount_raw", TermKind::Sent)?);
        }
        Ok(terms)
    }

    /// The native amounts of the transfers from `address` that were mined
    /// successfully, by their block: on Solana, where the fee payer's
    /// transaction carries no value of its own (`native` is the chain's
    /// native symbol).
    pub async fn native_sent_terms(
        &self,
        chain: Chain,
        address: &str,
        native: &str,
    ) -> Result<Vec<Term>, StoreError> {
        let rows = sqlx::query(
            "SELECT t.currency_symbol, t.amount_raw, x.block_number FROM transfers t
             JOIN transfer_transactions x ON x.transfer_id = t.id
             WHERE t.chain = $1 AND t.source_address = $2 AND t.currency_symbol = $3
               AND x.role = 'TRANSFER' AND x.state = 'MINED' AND x.block_number IS NOT NULL",
        )
        .bind(chain.as_str())
        .bind(address)
        .bind(native)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| term(row, "currency_symbol", "amount_raw", TermKind::Sent)).collect()
    }

    /// The baseline recorded for `address`'s `asset`, and where it came from.
    pub async fn reconcile_baseline(
        &self,
        chain: Chain,
        address: &str,
        asset: &str,
    ) -> Result<Option<(Anchor, Baseline)>, StoreError> {
        let row = sqlx::query(
            "SELECT block, balance_raw, source FROM reconcile_baselines WHERE chain = $1 AND address = $2 AND asset = $3",
        )
        .bind(chain.as_str())
        .bind(address)
        .bind(asset)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            let source: String = r.try_get("source")?;
            let source = Baseline::parse(&source)
                .ok_or_else(|| StoreError::Corrupt(format!("source = {source:?}")))?;
            Ok((anchor(&r)?, source))
        })
        .transpose()
    }

    /// The last height at which `address`'s `asset` agreed with the ledger.
    pub async fn reconcile_checkpoint(
        &self,
        chain: Chain,
        address: &str,
        asset: &str,
    ) -> Result<Option<Anchor>, StoreError> {
        let row = sqlx::query(
            "SELECT block, balance_raw FROM reconcile_checkpoints WHERE chain = $1 AND address = $2 AND asset = $3",
        )
        .bind(chain.as_str())
        .bind(address)
        .bind(asset)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| anchor(&r)).transpose()
    }
}

/// Inserts the baseline of `address`'s `asset` on `chain` unless one is
/// recorded.
pub(crate) async fn insert_baseline(
    tx: &mut Tx,
    (chain, address, asset): (Chain, &str, &str),
    at: Anchor,
    source: Baseline,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO reconcile_baselines (chain, address, asset, block, balance_raw, source, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (chain, address, asset) DO NOTHING",
    )
    .bind(chain.as_str())
    .bind(address)
    .bind(asset)
    .bind(to_i64(at.block)?)
    .bind(at.balance.to_string())
    .bind(source.as_str())
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Moves the checkpoint of `address`'s `asset` on `chain` up to `at`,
/// never down.
pub(crate) async fn raise_checkpoint(
    tx: &mut Tx,
    (chain, address, asset): (Chain, &str, &str),
    at: Anchor,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO reconcile_checkpoints (chain, address, asset, block, balance_raw, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (chain, address, asset) DO UPDATE
         SET block = EXCLUDED.block, balance_raw = EXCLUDED.balance_raw, recorded_at = EXCLUDED.recorded_at
         WHERE reconcile_checkpoints.block < EXCLUDED.block",
    )
    .bind(chain.as_str())
    .bind(address)
    .bind(asset)
    .bind(to_i64(at.block)?)
    .bind(at.balance.to_string())
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn amount(row: &AnyRow, column: &str) -> Result<U256, StoreError> {
    parse_column(&row.try_get::<String, _>(column)?, column)
}

fn block_of(row: &AnyRow) -> Result<u64, StoreError> {
    Ok(row.try_get::<i64, _>("block_number")? as u64)
}

/// An account's watched address from its row.
fn watched(row: &AnyRow, catching_up: bool) -> Result<Watched, StoreError> {
    Ok(Watched {
        address: row.try_get("address")?,
        account_id: row.try_get("account_id")?,
        wallet: None,
        watch_from: row.try_get::<Option<i64>, _>("watch_from")?.map(|b| b as u64),
        catching_up,
    })
}

/// A term from its row: `asset` and `raw` name the columns, the block is
/// `block_number`.
pub(super) fn term(row: &AnyRow, asset: &str, raw: &str, kind: TermKind) -> Result<Term, StoreError> {
    Ok(Term { asset: row.try_get(asset)?, block: block_of(row)?, amount: amount(row, raw)?, kind })
}

fn anchor(row: &AnyRow) -> Result<Anchor, StoreError> {
    Ok(Anchor { block: row.try_get::<i64, _>("block")? as u64, balance: amount(row, "balance_raw")? })
}
