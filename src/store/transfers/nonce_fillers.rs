//! Zero-value self-transfers that fill a sending address's nonce gaps, at
//! the platform's own cost.

use alloy::primitives::U256;
use sqlx::Row;

use crate::chain::Chain;
use crate::store::{Store, StoreError, Tx, to_i64};

/// A filler not yet included: `(hash, sender, nonce, raw)`.
pub type PendingFiller = (String, String, u64, String);

impl Store {
    /// The nonces of `sender` from `from` up that a live transfer
    /// transaction or a filler holds, ascending.
    pub async fn held_nonces(&self, chain: Chain, sender: &str, from: u64) -> Result<Vec<u64>, StoreError> {
        let rows = sqlx::query(
            "SELECT nonce FROM transfer_transactions WHERE chain = $1 AND sender = $2 AND nonce >= $3
               AND state <> 'REJECTED'
             UNION SELECT nonce FROM nonce_fillers WHERE chain = $1 AND sender = $2 AND nonce >= $3
             ORDER BY nonce",
        )
        .bind(chain.as_str())
        .bind(sender)
        .bind(to_i64(from)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get::<i64, _>("nonce")? as u64)).collect()
    }

    /// Fillers of `chain` not yet included, and those included before the
    /// gas ledger held fillers' fees (their receipts are read again).
    pub async fn pending_fillers(&self, chain: Chain) -> Result<Vec<PendingFiller>, StoreError> {
        let rows = sqlx::query(
            "SELECT hash, sender, nonce, raw FROM nonce_fillers f WHERE chain = $1 AND (state = 'SENT'
               OR (state = 'MINED' AND NOT EXISTS (SELECT 1 FROM gas_ledger g WHERE g.transaction_hash = f.hash)))",
        )
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("hash")?,
                    r.try_get("sender")?,
                    r.try_get::<i64, _>("nonce")? as u64,
                    r.try_get("raw")?,
                ))
            })
            .collect()
    }
}

/// Inserts a signed filler, `SENT`, before it is broadcast; a nonce already
/// filled is [`StoreError::Raced`], and nothing is inserted.
pub(crate) async fn insert(
    tx: &mut Tx,
    chain: Chain,
    sender: &str,
    nonce: u64,
    hash: &str,
    raw: &str,
    created_at: i64,
) -> Result<(), StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO nonce_fillers (hash, chain, sender, nonce, raw, state, created_at)
         VALUES ($1, $2, $3, $4, $5, 'SENT', $6) ON CONFLICT (chain, sender, nonce) DO NOTHING",
    )
    .bind(hash)
    .bind(chain.as_str())
    .bind(sender)
    .bind(to_i64(nonce)?)
    .bind(raw)
    .bind(created_at)
    .execute(&mut **tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::Raced(format!("nonce {nonce} of {sender} on {chain} is filled already")));
    }
    Ok(())
}

/// Marks a filler `MINED` in `block`, having paid `fee`: its chain.
pub(crate) async fn mined(tx: &mut Tx, hash: &str, block: u64, fee: U256) -> Result<String, StoreError> {
    let row = sqlx::query(
        "UPDATE nonce_fillers SET state = 'MINED', fee_raw = $2, block_number = $3 WHERE hash = $1 RETURNING chain",
    )
    .bind(hash)
    .bind(fee.to_string())
    .bind(to_i64(block)?)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("nonce filler {hash}")))?;
    Ok(row.try_get("chain")?)
}

/// Marks a filler `SUPERSEDED`: another transaction used its nonce.
pub(crate) async fn superseded(tx: &mut Tx, hash: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE nonce_fillers SET state = 'SUPERSEDED' WHERE hash = $1")
        .bind(hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
