//! The platform's own operational transactions seen by a scan: recognised
//! by the hashes the sender recorded before broadcasting them, kept apart
//! from deposits for operators.

use std::collections::HashMap;

use sqlx::{Any, Row, Transaction};
use tracing::info;

use crate::store::{Store, StoreError, params::Params, parse_column, time, to_i64};
use crate::{
    amount::Amount,
    chain::Chain,
    deposits::resource::{Detected, OwnKind, OwnTransfer},
};

/// Which of `detected`'s transactions are the platform's own: a top-up or
/// a cancellation recorded as a transfer's transaction, or a nonce filler.
/// A transaction already holding a deposit is left out: that deposit was
/// announced (before the platform told its own transactions apart), and it
/// keeps its history, so every replay of the transaction gives one answer.
///
/// The sender commits a transaction's hash before it broadcasts it, so a
/// block holding the transaction is scanned after its hash is here.
pub(in crate::store) async fn own_hashes(
    tx: &mut Transaction<'static, Any>,
    chain: Chain,
    detected: &[Detected],
) -> Result<HashMap<String, OwnKind>, StoreError> {
    let mut hashes: Vec<&str> = detected.iter().map(|d| d.tx_hash.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    let mut own = HashMap::new();
    let mut params = Params::of(tx);
    // Each hash is bound twice, the chain once per half.
    for chunk in hashes.chunks(params.rows_per_statement(2).saturating_sub(1).max(1)) {
        let params = params.restart();
        let (chain_a, hashes_a) = (params.take(1), params.take(chunk.len()));
        let (chain_b, hashes_b) = (params.take(1), params.take(chunk.len()));
        let sql = format!(
            "SELECT hash, role AS kind FROM transfer_transactions x
             WHERE chain = {chain_a} AND role IN ('TOP_UP', 'CANCEL') AND hash IN ({hashes_a})
               AND NOT EXISTS (SELECT 1 FROM deposits d WHERE d.chain = x.chain AND d.tx_hash = x.hash)
             UNION ALL
             SELECT hash, 'NONCE_FILLER' AS kind FROM nonce_fillers f
             WHERE chain = {chain_b} AND hash IN ({hashes_b})
               AND NOT EXISTS (SELECT 1 FROM deposits d WHERE d.chain = f.chain AND d.tx_hash = f.hash)"
        );
        let mut query = sqlx::query(&sql).bind(chain.as_str());
        query = chunk.iter().fold(query, |q, hash| q.bind(*hash)).bind(chain.as_str());
        query = chunk.iter().fold(query, |q, hash| q.bind(*hash));
        for row in query.fetch_all(&mut **tx).await? {
            let kind = parse_column(&row.try_get::<String, _>("kind")?, "own transaction kind")?;
            own.insert(row.try_get("hash")?, kind);
        }
    }
    Ok(own)
}

/// Records what the platform's own transactions moved into watched
/// addresses. Idempotent on the deposit's natural key: a replay changes
/// nothing, a reorg that re-includes the transaction moves it to its new
/// block.
pub(in crate::store) async fn record_own(
    tx: &mut Transaction<'static, Any>,
    own: &[(&Detected, OwnKind)],
    now: i64,
) -> Result<(), StoreError> {
    for (d, kind) in own {
        let changed = sqlx::query(
            "INSERT INTO own_transfers (chain, tx_hash, position, kind, account_id, account_address,
                source_address, currency_symbol, amount_raw, decimals, block_number, block_hash,
                created_at, recorded_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
             ON CONFLICT (chain, tx_hash, position) DO UPDATE SET
                block_number = excluded.block_number, block_hash = excluded.block_hash,
                created_at = excluded.created_at
             WHERE own_transfers.block_hash <> excluded.block_hash
             RETURNING tx_hash",
        )
        .bind(d.chain.as_str())
        .bind(&d.tx_hash)
        .bind(d.position.key())
        .bind(kind.as_str())
        .bind(&d.account_id)
        .bind(&d.account_address)
        .bind(&d.source_address)
        .bind(&d.currency_symbol)
        .bind(d.amount.raw().to_string())
        .bind(i64::from(d.amount.decimals()))
        .bind(to_i64(d.block_number)?)
        .bind(&d.block_hash)
        .bind(to_i64(d.block_time_ms)?.saturating_mul(1_000))
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?;
        if changed.is_some() {
            info!(chain = %d.chain, hash = %d.tx_hash, kind = kind.as_str(), account = %d.account_id,
                amount = %d.amount, symbol = %d.currency_symbol, block = d.block_number,
                "the platform's own transaction to a watched address: recorded, not a deposit");
        }
    }
    Ok(())
}

impl Store {
    /// What the platform's own transactions moved into watched addresses
    /// (of one account, or all), newest block first: for operators, never
    /// served as deposits.
    pub async fn own_transfers(&self, account_id: Option<&str>) -> Result<Vec<OwnTransfer>, StoreError> {
        let rows = sqlx::query(
            "SELECT chain, tx_hash, kind, account_id, account_address, source_address, currency_symbol,
                amount_raw, decimals, block_number, created_at
             FROM own_transfers WHERE ($1 IS NULL OR account_id = $1)
             ORDER BY created_at DESC, tx_hash DESC, position",
        )
        .bind(account_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let raw = parse_column(&r.try_get::<String, _>("amount_raw")?, "own_transfers.amount_raw")?;
                let decimals = u8::try_from(r.try_get::<i64, _>("decimals")?)
                    .map_err(|_| StoreError::Corrupt("own_transfers.decimals".into()))?;
                Ok(OwnTransfer {
                    chain: parse_column(&r.try_get::<String, _>("chain")?, "own_transfers.chain")?,
                    transaction_hash: r.try_get("tx_hash")?,
                    kind: parse_column(&r.try_get::<String, _>("kind")?, "own_transfers.kind")?,
                    account_id: r.try_get("account_id")?,
                    account_address: r.try_get("account_address")?,
                    source_address: r.try_get("source_address")?,
                    currency_symbol: r.try_get("currency_symbol")?,
                    amount: Amount::from_raw(raw, decimals).to_string(),
                    block_number: r.try_get::<i64, _>("block_number")? as u64,
                    created_at: time(r.try_get("created_at")?)?,
                })
            })
            .collect()
    }
}
