//! The signed transactions of transfers, persisted before broadcast, and the
//! per-sender nonce counters they draw from.

use std::collections::HashMap;

use alloy::primitives::U256;
use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::store::{Store, StoreError, TRANSFER_COLUMNS, Tx, now_micros, parse_column};
use crate::{
    chain::Chain,
    transfers::model::{Outgoing, SentTransaction, TxRole, TxState},
};

const TX_COLUMNS: &str = "hash, transfer_id, role, sender, nonce, gas_limit, value, max_fee_per_gas, \
    max_priority_fee_per_gas, raw, state, block_number, block_hash, fee_raw, created_at";

impl Store {
    /// Every transfer of `chain` still `ACCEPTED` or `SUBMITTED`, oldest first,
    /// with its transactions.
    pub async fn outgoing(&self, chain: Chain) -> Result<Vec<Outgoing>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TRANSFER_COLUMNS}, retries, retry_at FROM transfers
             WHERE chain = $1 AND status IN ('ACCEPTED', 'SUBMITTED') ORDER BY created_at, id"
        ))
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        // Every transaction of those transfers in one query, grouped below.
        let txs = sqlx::query(&format!(
            "SELECT {TX_COLUMNS} FROM transfer_transactions
             WHERE transfer_id IN (SELECT id FROM transfers WHERE chain = $1 AND status IN ('ACCEPTED', 'SUBMITTED'))
             ORDER BY created_at, hash"
        ))
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut by_transfer: HashMap<String, Vec<SentTransaction>> = HashMap::new();
        for row in &txs {
            by_transfer.entry(row.try_get("transfer_id")?).or_default().push(tx_from_row(row)?);
        }
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.try_get("id")?;
            out.push(Outgoing {
                organization: row.try_get("organization_id")?,
                account_id: row.try_get("account_id")?,
                chain,
                source_address: row.try_get("source_address")?,
                destination_address: row.try_get("destination_address")?,
                currency_symbol: row.try_get("currency_symbol")?,
                amount: parse_column(&row.try_get::<String, _>("amount_raw")?, "transfers.amount_raw")?,
                decimals: row.try_get::<i64, _>("decimals")? as u8,
                status: parse_column(&row.try_get::<String, _>("status")?, "transfers.status")?,
                route: parse_column(&row.try_get::<String, _>("route")?, "transfers.route")?,
                key_index: row.try_get::<Option<i64>, _>("key_index")?.map(|i| i as u32),
                authorization_nonce: row.try_get("authorization_nonce")?,
                window_ends_at: row.try_get("window_ends_at")?,
                created_at: row.try_get("created_at")?,
                retries: u32::try_from(row.try_get::<i64, _>("retries")?).unwrap_or(u32::MAX),
                retry_at: row.try_get("retry_at")?,
                transactions: by_transfer.remove(&id).unwrap_or_default(),
                id,
            });
        }
        Ok(out)
    }

    /// Sponsor money still at a topped-up address: the top-ups it received
    /// less the fees its own transactions paid, nonce fillers included. The
    /// next top-up only adds what this lacks, and the account's available
    /// native balance excludes it.
    pub async fn sponsored_gas_left(&self, chain: Chain, address: &str) -> Result<U256, StoreError> {
        let received = sqlx::query(
            "SELECT x.value FROM transfer_transactions x JOIN transfers t ON t.id = x.transfer_id
             WHERE t.chain = $1 AND t.source_address = $2 AND x.role = 'TOP_UP' AND x.state = 'MINED'",
        )
        .bind(chain.as_str())
        .bind(address)
        .fetch_all(&self.pool)
        .await?;
        let spent = sqlx::query(
            "SELECT fee_raw FROM transfer_transactions
             WHERE chain = $1 AND sender = $2 AND state IN ('MINED', 'REVERTED') AND fee_raw IS NOT NULL
             UNION ALL SELECT fee_raw FROM nonce_fillers
             WHERE chain = $1 AND sender = $2 AND state = 'MINED' AND fee_raw IS NOT NULL",
        )
        .bind(chain.as_str())
        .bind(address)
        .fetch_all(&self.pool)
        .await?;
        let sum = |rows: Vec<AnyRow>, column: &str| -> Result<U256, StoreError> {
            rows.iter().try_fold(U256::ZERO, |total, row| {
                Ok(total + parse_column::<U256>(&row.try_get::<String, _>(column)?, column)?)
            })
        };
        Ok(sum(received, "value")?.saturating_sub(sum(spent, "fee_raw")?))
    }

    /// The next nonce the store has for a sender, if it ever sent.
    pub async fn stored_nonce(&self, chain: Chain, address: &str) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query("SELECT next_nonce FROM sender_nonces WHERE chain = $1 AND address = $2")
            .bind(chain.as_str())
            .bind(address)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<i64, _>("next_nonce")).transpose()?.map(|n| n as u64))
    }

    /// Every EVM address of a platform-held key on `chain`, lowercase,
    /// with the store's next nonce for it (`None`: it never sent through
    /// the store): the senders' counters (the platform's wallets among
    /// them, once they sent), and the accounts whose keys the service holds.
    pub async fn held_evm_addresses(&self, chain: Chain) -> Result<Vec<(String, Option<u64>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT LOWER(address) AS address, MAX(next_nonce) AS next_nonce FROM (
                 SELECT address, next_nonce FROM sender_nonces WHERE chain = $1
                 UNION ALL SELECT a.address, CAST(NULL AS BIGINT) FROM account_keys k
                     JOIN account_addresses a ON a.account_id = k.account_id WHERE a.chain = $1
             ) held GROUP BY LOWER(address) ORDER BY LOWER(address)",
        )
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let next: Option<i64> = r.try_get("next_nonce")?;
                Ok((r.try_get("address")?, next.map(|n| n.max(0) as u64)))
            })
            .collect()
    }

    /// Every transaction signed for a transfer, in signing order.
    pub async fn transfer_transactions(&self, transfer_id: &str) -> Result<Vec<SentTransaction>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TX_COLUMNS} FROM transfer_transactions WHERE transfer_id = $1 ORDER BY created_at, hash"
        ))
        .bind(transfer_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(tx_from_row).collect()
    }
}

/// Moves a sender's next nonce up to `chain_next`, what the chain has
/// counted, never down: whether it moved.
pub(crate) async fn resync_nonce(
    tx: &mut Tx,
    chain: Chain,
    address: &str,
    chain_next: u64,
) -> Result<bool, StoreError> {
    let moved = sqlx::query(
        "UPDATE sender_nonces SET next_nonce = $3
         WHERE chain = $1 AND address = $2 AND next_nonce < $3",
    )
    .bind(chain.as_str())
    .bind(address)
    .bind(crate::store::to_i64(chain_next)?)
    .execute(&mut **tx)
    .await?;
    Ok(moved.rows_affected() > 0)
}

/// Keeps a transfer's failed step: `retries` counted, `error`, not tried
/// again before `retry_at` (microseconds).
pub(crate) async fn defer(
    tx: &mut Tx,
    transfer_id: &str,
    retries: u32,
    retry_at: i64,
    error: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE transfers SET retries = $2, retry_at = $3, last_error = $4 WHERE id = $1")
        .bind(transfer_id)
        .bind(i64::from(retries))
        .bind(retry_at)
        .bind(error)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Clears a transfer's retries, wait and last error.
pub(crate) async fn clear_retries(tx: &mut Tx, transfer_id: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE transfers SET retries = 0, retry_at = NULL, last_error = NULL WHERE id = $1")
        .bind(transfer_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Marks a transfer still `ACCEPTED` `SUBMITTED` at `now`.
pub(crate) async fn mark_submitted(tx: &mut Tx, transfer_id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE transfers SET status = 'SUBMITTED', submitted_at = $2, updated_at = $2
         WHERE id = $1 AND status = 'ACCEPTED'",
    )
    .bind(transfer_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Sets a transaction's `state`, its block `(number, hash)` and its fee.
pub(crate) async fn update_state(
    tx: &mut Tx,
    hash: &str,
    state: TxState,
    block: Option<(u64, &str)>,
    fee: Option<U256>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE transfer_transactions SET state = $2, block_number = $3, block_hash = $4, fee_raw = $5
         WHERE hash = $1",
    )
    .bind(hash)
    .bind(state_str(state))
    .bind(block.map(|(n, _)| crate::store::to_i64(n)).transpose()?)
    .bind(block.map(|(_, h)| h))
    .bind(fee.map(|f| f.to_string()))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Marks a transaction `REJECTED`.
pub(crate) async fn reject(tx: &mut Tx, hash: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE transfer_transactions SET state = 'REJECTED' WHERE hash = $1")
        .bind(hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// How many transactions not `REJECTED` hold `nonce` of `sender` on `chain`.
pub(crate) async fn nonce_users(
    tx: &mut Tx,
    chain: Chain,
    sender: &str,
    nonce: u64,
) -> Result<i64, StoreError> {
    Ok(sqlx::query(
        "SELECT COUNT(*) AS n FROM transfer_transactions
         WHERE chain = $1 AND sender = $2 AND nonce = $3 AND state <> 'REJECTED'",
    )
    .bind(chain.as_str())
    .bind(sender)
    .bind(crate::store::to_i64(nonce)?)
    .fetch_one(&mut **tx)
    .await?
    .try_get("n")?)
}

/// Gives `nonce` of `sender` back to its counter if the counter is just
/// past it (nothing took a later one).
pub(crate) async fn give_back_nonce(
    tx: &mut Tx,
    chain: Chain,
    sender: &str,
    nonce: u64,
) -> Result<(), StoreError> {
    let nonce = crate::store::to_i64(nonce)?;
    sqlx::query(
        "UPDATE sender_nonces SET next_nonce = $3 WHERE chain = $1 AND address = $2 AND next_nonce = $4",
    )
    .bind(chain.as_str())
    .bind(sender)
    .bind(nonce)
    .bind(nonce + 1)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn tx_from_row(row: &AnyRow) -> Result<SentTransaction, StoreError> {
    let u128_column = |column: &str| -> Result<u128, StoreError> {
        parse_column(&row.try_get::<String, _>(column)?, column)
    };
    Ok(SentTransaction {
        hash: row.try_get("hash")?,
        role: match row.try_get::<String, _>("role")?.as_str() {
            "TOP_UP" => TxRole::TopUp,
            "TRANSFER" => TxRole::Transfer,
            "CANCEL" => TxRole::Cancel,
            other => return Err(StoreError::Corrupt(format!("transfer_transactions.role = {other:?}"))),
        },
        sender: row.try_get("sender")?,
        nonce: row.try_get::<i64, _>("nonce")? as u64,
        gas_limit: row.try_get::<i64, _>("gas_limit")? as u64,
        value: parse_column(&row.try_get::<String, _>("value")?, "transfer_transactions.value")?,
        max_fee_per_gas: u128_column("max_fee_per_gas")?,
        max_priority_fee_per_gas: u128_column("max_priority_fee_per_gas")?,
        raw: row.try_get("raw")?,
        state: match row.try_get::<String, _>("state")?.as_str() {
            "SENT" => TxState::Sent,
            "MINED" => TxState::Mined,
            "REVERTED" => TxState::Reverted,
            "REJECTED" => TxState::Rejected,
            other => return Err(StoreError::Corrupt(format!("transfer_transactions.state = {other:?}"))),
        },
        block_number: row.try_get::<Option<i64>, _>("block_number")?.map(|n| n as u64),
        block_hash: row.try_get("block_hash")?,
        fee: row
            .try_get::<Option<String>, _>("fee_raw")?
            .map(|f| parse_column(&f, "transfer_transactions.fee_raw"))
            .transpose()?,
        created_at: row.try_get("created_at")?,
    })
}

fn role_str(role: TxRole) -> &'static str {
    match role {
        TxRole::TopUp => "TOP_UP",
        TxRole::Transfer => "TRANSFER",
        TxRole::Cancel => "CANCEL",
    }
}

fn state_str(state: TxState) -> &'static str {
    match state {
        TxState::Sent => "SENT",
        TxState::Mined => "MINED",
        TxState::Reverted => "REVERTED",
        TxState::Rejected => "REJECTED",
    }
}

/// Inserts `sent` for transfer `transfer_id`, `SENT`; the same bytes signed
/// again (same nonce, fees and call) after every node refused them make the
/// refused row live again. Whether it was written (not when it is recorded
/// already).
pub(crate) async fn insert(
    tx: &mut Transaction<'static, Any>,
    transfer_id: &str,
    chain: Chain,
    sent: &SentTransaction,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(&format!(
        "INSERT INTO transfer_transactions ({TX_COLUMNS}, chain)
         VALUES ($1, $2, $3, $4, $5, $6, $12, $7, $8, $9, 'SENT', NULL, NULL, NULL, $10, $11)
         ON CONFLICT (hash) DO UPDATE SET state = 'SENT', created_at = excluded.created_at
         WHERE transfer_transactions.state = 'REJECTED'
           AND transfer_transactions.transfer_id = excluded.transfer_id"
    ))
    .bind(&sent.hash)
    .bind(transfer_id)
    .bind(role_str(sent.role))
    .bind(&sent.sender)
    .bind(crate::store::to_i64(sent.nonce)?)
    .bind(crate::store::to_i64(sent.gas_limit)?)
    .bind(sent.max_fee_per_gas.to_string())
    .bind(sent.max_priority_fee_per_gas.to_string())
    .bind(&sent.raw)
    .bind(sent.created_at)
    .bind(chain.as_str())
    .bind(sent.value.to_string())
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() > 0)
}

/// Takes `nonce` of `sender` on `chain` for a new lineage: refused when
/// another sender took it meanwhile.
pub(crate) async fn take_nonce(
    tx: &mut Transaction<'static, Any>,
    chain: Chain,
    sender: &str,
    nonce: u64,
) -> Result<(), StoreError> {
    let nonce = crate::store::to_i64(nonce)?;
    let taken = sqlx::query(
        "INSERT INTO sender_nonces (chain, address, next_nonce) VALUES ($1, $2, $4)
         ON CONFLICT (chain, address) DO UPDATE SET next_nonce = excluded.next_nonce
         WHERE sender_nonces.next_nonce = $3",
    )
    .bind(chain.as_str())
    .bind(sender)
    .bind(nonce)
    .bind(nonce + 1)
    .execute(&mut **tx)
    .await?;
    if taken.rows_affected() == 0 {
        return Err(StoreError::Raced(format!("nonce {nonce} of {sender} on {chain} was taken meanwhile")));
    }
    Ok(())
}

/// What the transfer keeps of a transaction recorded for it: the
/// authorization's nonce, the hash (not of a top-up), the window's end
/// (set once).
pub(crate) async fn mark_transfer(
    tx: &mut Transaction<'static, Any>,
    transfer_id: &str,
    sent: &SentTransaction,
    window_ends_at: Option<i64>,
    authorization_nonce: Option<&str>,
) -> Result<(), StoreError> {
    if let Some(nonce) = authorization_nonce {
        sqlx::query(
            "UPDATE transfers SET authorization_nonce = $2 WHERE id = $1 AND authorization_nonce IS NULL",
        )
        .bind(transfer_id)
        .bind(nonce)
        .execute(&mut **tx)
        .await?;
    }
    if sent.role != TxRole::TopUp {
        sqlx::query("UPDATE transfers SET transaction_hash = $2, updated_at = $3 WHERE id = $1")
            .bind(transfer_id)
            .bind(&sent.hash)
            .bind(now_micros())
            .execute(&mut **tx)
            .await?;
    }
    if let Some(ends) = window_ends_at {
        sqlx::query("UPDATE transfers SET window_ends_at = $2 WHERE id = $1 AND window_ends_at IS NULL")
            .bind(transfer_id)
            .bind(ends)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}
