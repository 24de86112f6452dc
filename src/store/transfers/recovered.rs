//! The rows `transfers recover` writes: each transaction of a platform-held
//! key a restored store did not know, and, for one that moved an account's
//! money, its transfer (`recovered:` and its hash) with its transaction.

use sqlx::Row;

use crate::{
    chain::Chain,
    store::{Store, StoreError, Tx, now_micros, to_i64},
};

/// One recovered transaction, as found on chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredTx {
    pub chain: Chain,
    pub hash: String,
    pub sender: String,
    pub nonce: u64,
    pub to: Option<String>,
    /// The native value it carried.
    pub value: String,
    pub selector: Option<String>,
    pub succeeded: bool,
    pub block_number: u64,
    pub block_hash: String,
    pub fee_raw: String,
    pub gas_limit: u64,
    /// The block's time, in microseconds.
    pub at: i64,
}

/// The account a recovered transfer is listed under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub organization: String,
    pub account_id: String,
    pub identity_id: String,
    /// `OMNIBUS` or `SEGREGATED`.
    pub kind: String,
    pub key_index: Option<u32>,
}

/// The transfer recorded for a recovered transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredTransfer {
    pub id: String,
    pub owner: Owner,
    pub source: String,
    pub destination: String,
    pub symbol: String,
    pub amount_raw: String,
    pub decimals: u8,
    pub route: &'static str,
    /// The transfer the store already holds unsent that this transaction
    /// paid (accepted before the backup, sent after it): settled by it,
    /// never sent again. `None`: a transfer of its own.
    pub settles: Option<String>,
}

impl Store {
    /// The newest block at which the store knows `address` (any case) on
    /// `chain`: its latest transaction recorded, or the block it is watched
    /// from; `None` when it knows none.
    pub async fn last_known_block(&self, chain: Chain, address: &str) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query(
            "SELECT MAX(b) AS b FROM (
                 SELECT MAX(block_number) AS b FROM transfer_transactions WHERE chain = $1 AND LOWER(sender) = $2
                 UNION ALL SELECT MAX(block_number) FROM nonce_fillers WHERE chain = $1 AND LOWER(sender) = $2
                 UNION ALL SELECT MAX(block_number) FROM recovered_transactions
                     WHERE chain = $1 AND LOWER(sender) = $2
                 UNION ALL SELECT MAX(watch_from) FROM account_addresses WHERE chain = $1 AND LOWER(address) = $2
             ) known",
        )
        .bind(chain.as_str())
        .bind(address.to_lowercase())
        .fetch_one(&self.pool)
        .await?;
        let block: Option<i64> = row.try_get("b")?;
        Ok(block.map(|b| b.max(0) as u64))
    }

    /// The account whose address `address` (any case) is on `chain`, when
    /// the service holds its keys (an omnibus account's are the omnibus
    /// wallet's).
    pub async fn keyed_owner(&self, chain: Chain, address: &str) -> Result<Option<Owner>, StoreError> {
        let row = sqlx::query(
            "SELECT a.organization_id, a.id, a.identity_id, a.type, k.key_index FROM account_addresses x
             JOIN accounts a ON a.id = x.account_id LEFT JOIN account_keys k ON k.account_id = a.id
             WHERE x.chain = $1 AND LOWER(x.address) = $2 AND (k.key_index IS NOT NULL OR a.type = 'OMNIBUS')",
        )
        .bind(chain.as_str())
        .bind(address.to_lowercase())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let index: Option<i64> = row.try_get("key_index")?;
        Ok(Some(Owner {
            organization: row.try_get("organization_id")?,
            account_id: row.try_get("id")?,
            identity_id: row.try_get("identity_id")?,
            kind: row.try_get("type")?,
            key_index: index.map(|i| i as u32),
        }))
    }

    /// The platform's EVM wallets that have no nonce counter on `chain`
    /// yet.
    pub async fn uncounted_platform_wallets(&self, chain: Chain) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT address FROM platform_keys k WHERE family = 'evm' AND NOT EXISTS (
                 SELECT 1 FROM sender_nonces n WHERE n.chain = $1 AND LOWER(n.address) = LOWER(k.address))
             ORDER BY address",
        )
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("address")?)).collect()
    }

    /// The transfers of `chain` the store holds unsent (`ACCEPTED`, or
    /// `SUBMITTED` with no transaction signed) that move `amount_raw` of
    /// `symbol` from `source` to `destination` (any case), oldest first.
    pub async fn unsent_like(
        &self,
        chain: Chain,
        (source, destination): (&str, &str),
        (symbol, amount_raw): (&str, &str),
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT t.id FROM transfers t WHERE t.chain = $1 AND LOWER(t.source_address) = $2
               AND LOWER(t.destination_address) = $3 AND t.currency_symbol = $4 AND t.amount_raw = $5
               AND t.status IN ('ACCEPTED', 'SUBMITTED')
               AND NOT EXISTS (SELECT 1 FROM transfer_transactions x WHERE x.transfer_id = t.id
                               AND x.role = 'TRANSFER' AND x.state IN ('SENT', 'MINED'))
             ORDER BY t.created_at, t.id",
        )
        .bind(chain.as_str())
        .bind(source.to_lowercase())
        .bind(destination.to_lowercase())
        .bind(symbol)
        .bind(amount_raw)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The recovered transactions of `chain`, by block: (hash, sender,
    /// nonce, state, transfer id).
    pub async fn recovered_transactions(
        &self,
        chain: Chain,
    ) -> Result<Vec<(String, String, u64, String, Option<String>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT hash, sender, nonce, state, transfer_id FROM recovered_transactions WHERE chain = $1
             ORDER BY block_number, sender, nonce",
        )
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let nonce: i64 = r.try_get("nonce")?;
                Ok((
                    r.try_get("hash")?,
                    r.try_get("sender")?,
                    nonce as u64,
                    r.try_get("state")?,
                    r.try_get("transfer_id")?,
                ))
            })
            .collect()
    }
}

/// Records `found` (and `transfer`, when it moved an account's money):
/// whether it was new (a transaction recovered before is left as it is).
pub async fn record(
    tx: &mut Tx,
    found: &RecoveredTx,
    transfer: Option<&RecoveredTransfer>,
) -> Result<bool, StoreError> {
    let state = if found.succeeded { "MINED" } else { "REVERTED" };
    let inserted = sqlx::query(
        "INSERT INTO recovered_transactions (chain, hash, sender, nonce, to_address, value, selector, state,
             block_number, block_hash, fee_raw, transfer_id, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (chain, hash) DO NOTHING",
    )
    .bind(found.chain.as_str())
    .bind(&found.hash)
    .bind(&found.sender)
    .bind(to_i64(found.nonce)?)
    .bind(&found.to)
    .bind(&found.value)
    .bind(&found.selector)
    .bind(state)
    .bind(to_i64(found.block_number)?)
    .bind(&found.block_hash)
    .bind(&found.fee_raw)
    .bind(transfer.map(|t| t.id.clone()))
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(false);
    }
    match transfer {
        Some(transfer) if transfer.settles.is_some() => {
            settle_transfer(tx, found, &transfer.id).await?;
            insert_transaction(tx, found, &transfer.id).await?;
            super::gas_ledger::announce_transfer(tx, &transfer.id, now_micros()).await?;
        }
        Some(transfer) => {
            insert_transfer(tx, found, transfer).await?;
            insert_transaction(tx, found, &transfer.id).await?;
        }
        None => {}
    }
    Ok(true)
}

/// Ends transfer `id`, which the store held unsent, as `found` paid it:
/// `CONFIRMED` or `FAILED`, its hash recorded. Refused when it moved on
/// meanwhile.
async fn settle_transfer(tx: &mut Tx, found: &RecoveredTx, id: &str) -> Result<(), StoreError> {
    let status = if found.succeeded { "CONFIRMED" } else { "FAILED" };
    let failure = (!found.succeeded).then_some("REVERTED");
    let settled = sqlx::query(
        "UPDATE transfers SET status = $2, transaction_hash = $3, failure_code = $4,
             submitted_at = COALESCE(submitted_at, $5), confirmed_at = $5, updated_at = $6
         WHERE id = $1 AND status IN ('ACCEPTED', 'SUBMITTED')",
    )
    .bind(id)
    .bind(status)
    .bind(&found.hash)
    .bind(failure)
    .bind(found.at)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    if settled.rows_affected() == 0 {
        return Err(StoreError::Raced(format!("transfer {id} moved on while its transaction was recovered")));
    }
    Ok(())
}

/// The transfer row of a recovered transaction: `CONFIRMED` or `FAILED`
/// as it was mined, its request id `recovered:` and its hash.
async fn insert_transfer(tx: &mut Tx, found: &RecoveredTx, t: &RecoveredTransfer) -> Result<(), StoreError> {
    let status = if found.succeeded { "CONFIRMED" } else { "FAILED" };
    let failure = (!found.succeeded).then_some("REVERTED");
    sqlx::query(
        "INSERT INTO transfers (id, organization_id, request_id, request_fingerprint, account_id, identity_id,
             chain, source_address, destination_address, currency_symbol, amount_raw, decimals, status, route,
             key_index, transaction_hash, failure_code, submitted_at, confirmed_at, created_at, updated_at,
             announced_status)
         VALUES ($1, $2, $3, 'recovered', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17, $17,
             $18, $12)",
    )
    .bind(&t.id)
    .bind(&t.owner.organization)
    .bind(format!("recovered:{}", found.hash))
    .bind(&t.owner.account_id)
    .bind(&t.owner.identity_id)
    .bind(found.chain.as_str())
    .bind(&t.source)
    .bind(&t.destination)
    .bind(&t.symbol)
    .bind(&t.amount_raw)
    .bind(i64::from(t.decimals))
    .bind(status)
    .bind(t.route)
    .bind(t.owner.key_index.map(i64::from))
    .bind(&found.hash)
    .bind(failure)
    .bind(found.at)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The transaction row of a recovered transfer, as mined: reconciliation
/// reads its value and fee from here.
async fn insert_transaction(tx: &mut Tx, found: &RecoveredTx, transfer_id: &str) -> Result<(), StoreError> {
    let state = if found.succeeded { "MINED" } else { "REVERTED" };
    sqlx::query(
        "INSERT INTO transfer_transactions (hash, transfer_id, chain, role, sender, nonce, gas_limit, value,
             max_fee_per_gas, max_priority_fee_per_gas, raw, state, block_number, block_hash, fee_raw, created_at)
         VALUES ($1, $2, $3, 'TRANSFER', $4, $5, $6, $7, '0', '0', '', $8, $9, $10, $11, $12)",
    )
    .bind(&found.hash)
    .bind(transfer_id)
    .bind(found.chain.as_str())
    .bind(&found.sender)
    .bind(to_i64(found.nonce)?)
    .bind(to_i64(found.gas_limit)?)
    .bind(&found.value)
    .bind(state)
    .bind(to_i64(found.block_number)?)
    .bind(&found.block_hash)
    .bind(&found.fee_raw)
    .bind(found.at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Moves `address`'s next nonce on `chain` up to `next` (making its
/// counter if it has none): what the chain has counted after a recovery.
pub async fn advance_nonce(tx: &mut Tx, chain: Chain, address: &str, next: u64) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO sender_nonces (chain, address, next_nonce) VALUES ($1, $2, $3)
         ON CONFLICT (chain, address) DO UPDATE SET next_nonce = excluded.next_nonce
         WHERE sender_nonces.next_nonce < excluded.next_nonce",
    )
    .bind(chain.as_str())
    .bind(address)
    .bind(to_i64(next)?)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
