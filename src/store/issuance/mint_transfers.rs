//! The rows of a mint's way on chain: the transfer (route `MINT`) that
//! sends its transaction, the mints whose transfer settled or whose deposit
//! is `CONFIRMED`, read and written by `crate::issuance::onchain`.

use alloy::primitives::U256;
use sqlx::{Any, Row, Transaction};

use crate::store::{Store, StoreError, Tx, now_micros, parse_column};
use crate::{
    chain::Chain,
    issuance::{
        rows::{MintRow, MintSteps},
        state::Status,
    },
    transfers::resource::{Route, TransferStatus},
};

/// A `MINTING` mint without a transfer, its row locked: what its transfer
/// is made of.
#[derive(Debug, Clone)]
pub struct Minting {
    pub organization: String,
    pub account: String,
    pub identity: String,
    /// The wire's cents less the fee kept.
    pub minted_cents: i64,
    pub symbol: String,
    pub chain: String,
    pub destination_address: String,
}

/// The transfer (route `MINT`) that sends mint `mint`'s transaction.
#[derive(Debug, Clone)]
pub struct NewMintTransfer<'a> {
    pub mint: &'a str,
    pub id: &'a str,
    pub issuer: &'a str,
    pub amount_raw: U256,
    pub decimals: u8,
}

impl Store {
    /// The `MINTING` mints of `chain` that have no transfer yet, oldest
    /// first.
    pub async fn mints_to_start(&self, chain: Chain) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM mints WHERE status = $1 AND chain = $2 AND transfer_id IS NULL ORDER BY created_at, id",
        )
        .bind(Status::Minting.as_str())
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The transfer sending mint `id`'s transaction, once it has one.
    pub async fn mint_transfer(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT transfer_id FROM mints WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("mint {id}")))?;
        Ok(row.try_get("transfer_id")?)
    }

    /// The `MINTING` mints whose transfer has settled: each mint's id, its
    /// transfer's status and transaction hash.
    pub async fn mints_sent(&self) -> Result<Vec<(String, TransferStatus, Option<String>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT m.id, t.status, t.transaction_hash FROM mints m JOIN transfers t ON t.id = m.transfer_id
             WHERE m.status = $1 AND t.status IN ($2, $3, $4) ORDER BY m.created_at, m.id",
        )
        .bind(Status::Minting.as_str())
        .bind(TransferStatus::Confirmed.as_str())
        .bind(TransferStatus::Failed.as_str())
        .bind(TransferStatus::Dropped.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let status = parse_column(&r.try_get::<String, _>("status")?, "transfers.status")?;
                Ok((r.try_get("id")?, status, r.try_get("transaction_hash")?))
            })
            .collect()
    }

    /// The mints (`MINTING` or `MINTED`) whose deposit is `CONFIRMED`: the
    /// deposit of one of their transfer's transactions, to their account, of
    /// their asset and amount. Each mint's id, the deposit's id and hash.
    pub async fn mints_deposited(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT m.id, d.id AS deposit_id, d.tx_hash FROM mints m
             JOIN transfers t ON t.id = m.transfer_id
             JOIN transfer_transactions x ON x.transfer_id = t.id AND x.role = 'TRANSFER'
             JOIN deposits d ON d.chain = t.chain AND d.tx_hash = x.hash AND d.account_id = t.account_id
                 AND d.currency_symbol = t.currency_symbol AND d.amount_raw = t.amount_raw
             WHERE m.status IN ($1, $2) AND d.status = 'CONFIRMED'
             ORDER BY m.created_at, m.id",
        )
        .bind(Status::Minting.as_str())
        .bind(Status::Minted.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("deposit_id")?, r.try_get("tx_hash")?))).collect()
    }
}

/// The `MINTING` mint `id` without a transfer, its row locked until commit.
pub async fn lock_minting(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<Option<Minting>, StoreError> {
    let row = sqlx::query(
        "UPDATE mints SET updated_at = updated_at WHERE id = $1 AND status = $2 AND transfer_id IS NULL
         RETURNING organization_id, account_id, identity_id, amount_cents - fee_cents AS minted_cents,
             stablecoin_symbol, chain, destination_address",
    )
    .bind(id)
    .bind(Status::Minting.as_str())
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(Minting {
        organization: row.try_get("organization_id")?,
        account: row.try_get("account_id")?,
        identity: row.try_get("identity_id")?,
        minted_cents: row.try_get("minted_cents")?,
        symbol: row.try_get("stablecoin_symbol")?,
        chain: row.try_get("chain")?,
        destination_address: row.try_get("destination_address")?,
    }))
}

/// Inserts the `ACCEPTED` transfer of `new` for `mint` and names it as
/// the mint's transfer.
pub async fn insert_transfer(
    tx: &mut Transaction<'static, Any>,
    mint: &Minting,
    new: &NewMintTransfer<'_>,
) -> Result<(), StoreError> {
    let now = now_micros();
    sqlx::query(&format!(
        "INSERT INTO transfers (id, organization_id, request_id, request_fingerprint, account_id, identity_id,
             chain, source_address, destination_address, currency_symbol, amount_raw, decimals, status, route,
             created_at, updated_at)
         VALUES ($1, $2, $3, 'mint', $4, $5, $6, $7, $8, $9, $10, $11, '{}', '{}', $12, $12)",
        TransferStatus::Accepted,
        Route::Mint.as_str()
    ))
    .bind(new.id)
    .bind(&mint.organization)
    .bind(format!("mint:{}", new.mint))
    .bind(&mint.account)
    .bind(&mint.identity)
    .bind(&mint.chain)
    .bind(new.issuer)
    .bind(&mint.destination_address)
    .bind(&mint.symbol)
    .bind(new.amount_raw.to_string())
    .bind(i64::from(new.decimals))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE mints SET transfer_id = $2, updated_at = $3 WHERE id = $1")
        .bind(new.mint)
        .bind(new.id)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Records the deposit that completes mint `id` (and its transaction's hash
/// if it had none).
pub async fn set_deposit(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    deposit: &str,
    hash: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE mints SET deposit_id = $2, transaction_hash = COALESCE(transaction_hash, $3) WHERE id = $1",
    )
    .bind(id)
    .bind(deposit)
    .bind(hash)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl Store {
    /// Every mint (of `chain`, if given) as the books see it: its status,
    /// and its transfer's amount once confirmed (or its deposit is) or
    /// while it is being sent.
    pub async fn mint_books(&self, chain: Option<Chain>) -> Result<Vec<MintRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT m.id, m.chain, m.stablecoin_symbol, m.amount_cents, m.fee_cents, m.status, m.fiat_return, m.deposit_id,
                 t.status AS transfer_status, t.amount_raw
             FROM mints m LEFT JOIN transfers t ON t.id = m.transfer_id
             WHERE ($1 IS NULL OR m.chain = $1) ORDER BY m.chain, m.stablecoin_symbol, m.created_at, m.id",
        )
        .bind(chain.map(Chain::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let transfer: Option<TransferStatus> = r
                    .try_get::<Option<String>, _>("transfer_status")?
                    .map(|s| parse_column(&s, "transfers.status"))
                    .transpose()?;
                let amount: Option<U256> = r
                    .try_get::<Option<String>, _>("amount_raw")?
                    .map(|a| parse_column(&a, "transfers.amount_raw"))
                    .transpose()?;
                let deposit = r.try_get::<Option<String>, _>("deposit_id")?.is_some();
                let confirmed = deposit || transfer == Some(TransferStatus::Confirmed);
                let sending = matches!(transfer, Some(TransferStatus::Accepted | TransferStatus::Submitted));
                Ok(MintRow {
                    id: r.try_get("id")?,
                    chain: parse_column(&r.try_get::<String, _>("chain")?, "mints.chain")?,
                    symbol: r.try_get("stablecoin_symbol")?,
                    cents: r.try_get("amount_cents")?,
                    fee_cents: r.try_get("fee_cents")?,
                    status: parse_column(&r.try_get::<String, _>("status")?, "mints.status")?,
                    fiat_owed: r.try_get::<Option<String>, _>("fiat_return")?.is_some(),
                    minted: amount.filter(|_| confirmed),
                    sending: amount.filter(|_| sending && !confirmed),
                })
            })
            .collect()
    }
}

/// Takes the row lock of mint `id`: its status, if it exists.
pub async fn lock_mint(tx: &mut Transaction<'static, Any>, id: &str) -> Result<Option<Status>, StoreError> {
    let row = sqlx::query("UPDATE mints SET updated_at = updated_at WHERE id = $1 RETURNING status")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| parse_column(&r.try_get::<String, _>("status")?, "mints.status")).transpose()
}

/// Every mint's steps as its row records them (of `chain`, if given).
/// The on-ramp conversion whose wire mint `mint_id` delivers, if any.
pub async fn conversion_of(tx: &mut Tx, mint_id: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT id FROM conversions WHERE mint_id = $1")
        .bind(mint_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(|r| r.try_get("id")).transpose()?)
}

pub async fn mint_steps(tx: &mut Tx, chain: Option<Chain>) -> Result<Vec<MintSteps>, StoreError> {
    let rows = sqlx::query(
        "SELECT m.id, m.chain, m.stablecoin_symbol, m.status, m.recorded_by, m.approved_by, c.id AS conversion_id
         FROM mints m LEFT JOIN conversions c ON c.mint_id = m.id
         WHERE ($1 IS NULL OR m.chain = $1) ORDER BY m.chain, m.stablecoin_symbol, m.created_at, m.id",
    )
    .bind(chain.map(Chain::as_str))
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(MintSteps {
                id: r.try_get("id")?,
                chain: parse_column(&r.try_get::<String, _>("chain")?, "mints.chain")?,
                symbol: r.try_get("stablecoin_symbol")?,
                status: parse_column(&r.try_get::<String, _>("status")?, "mints.status")?,
                recorded_by: r.try_get("recorded_by")?,
                approved_by: r.try_get("approved_by")?,
                conversion: r.try_get("conversion_id")?,
            })
        })
        .collect()
}
