//! Zero-value self-transfers that fill a sending address's nonce gaps, at
//! the platform's own cost.

use alloy::primitives::U256;
use sqlx::Row;

use crate::store::{Store, StoreError, gas_ledger::record_platform_cost, now_micros, to_i64};
use crate::{chain::Chain, transfers::model::PlatformCost};

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

    /// Records a signed filler before it is broadcast; a nonce already
    /// filled is a conflict, and nothing is recorded. Fenced like
    /// [`crate::transfers::record::record`].
    pub async fn record_filler(
        &self,
        chain: Chain,
        sender: &str,
        nonce: u64,
        hash: &str,
        raw: &str,
        created_at: i64,
    ) -> Result<(), StoreError> {
        let inserted = self
            .execute_fenced(
                sqlx::query(
                    "INSERT INTO nonce_fillers (hash, chain, sender, nonce, raw, state, created_at)
                     VALUES ($1, $2, $3, $4, $5, 'SENT', $6) ON CONFLICT (chain, sender, nonce) DO NOTHING",
                )
                .bind(hash)
                .bind(chain.as_str())
                .bind(sender)
                .bind(to_i64(nonce)?)
                .bind(raw)
                .bind(created_at),
            )
            .await?;
        if inserted == 0 {
            return Err(StoreError::Raced(format!("nonce {nonce} of {sender} on {chain} is filled already")));
        }
        Ok(())
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

    /// A filler was included in `block`, at `cost`: `MINED`, and its fees
    /// into the gas ledger as the platform's own cost, in one transaction.
    /// Fenced like [`crate::transfers::record::record`].
    pub async fn filler_included(
        &self,
        hash: &str,
        block: u64,
        cost: &PlatformCost,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        self.check_own_fence(&mut tx).await?;
        let fee = cost.fees.iter().fold(U256::ZERO, |total, fee| total + fee.amount);
        let row = sqlx::query(
            "UPDATE nonce_fillers SET state = 'MINED', fee_raw = $2, block_number = $3 WHERE hash = $1 RETURNING chain",
        )
        .bind(hash)
        .bind(fee.to_string())
        .bind(to_i64(block)?)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("nonce filler {hash}")))?;
        let chain: String = row.try_get("chain")?;
        record_platform_cost(&mut tx, &chain, cost, now_micros()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A filler whose nonce another transaction used: it can never be included.
    pub async fn filler_superseded(&self, hash: &str) -> Result<(), StoreError> {
        self.execute_fenced(
            sqlx::query("UPDATE nonce_fillers SET state = 'SUPERSEDED' WHERE hash = $1").bind(hash),
        )
        .await?;
        Ok(())
    }
}
