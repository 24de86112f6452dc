//! A mint's way on chain: the transfer (route `MINT`) that sends its
//! transaction, created once per `MINTING` mint; the mint's status
//! following that transfer's settlement in the same transaction; and its
//! completion once the deposit the mint made is `CONFIRMED`.

use alloy::primitives::U256;
use sqlx::{Any, Row, Transaction};

use super::{Store, StoreError, mints::change, now_micros, parse_column};
use crate::{
    chain::Chain,
    issuance::{
        mint::{Event, Status, apply},
        reconcile::MintRow,
    },
    transfers::resource::{Route, TransferStatus},
};

/// An issued stablecoin a chain's sender mints: its symbol and decimals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub symbol: String,
    pub decimals: u8,
}

impl Store {
    /// Creates the transfer of each `MINTING` mint on `chain` that has none
    /// yet: from `issuer` to the mint's destination, the mint's dollars in
    /// the stablecoin's smallest unit. Each is created with the mint's
    /// `transfer_id` in one transaction holding the mint's row, so two
    /// instances create it once. Returns how many it created.
    pub async fn start_mints(
        &self,
        chain: Chain,
        issuer: &str,
        issued: &[Issued],
    ) -> Result<usize, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM mints WHERE status = $1 AND chain = $2 AND transfer_id IS NULL ORDER BY created_at, id",
        )
        .bind(Status::Minting.as_str())
        .bind(chain.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut started = 0;
        for row in rows {
            let id: String = row.try_get("id")?;
            // One mint that cannot start (its stablecoin no longer issued
            // here) keeps the others, and the chain's transfers, moving.
            match self.start_mint(&id, issuer, issued).await {
                Ok(true) => started += 1,
                Ok(false) => {}
                Err(StoreError::Conflict(reason)) => {
                    tracing::error!(mint = %id, %chain, reason, "a mint cannot be sent: it waits");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(started)
    }

    async fn start_mint(&self, id: &str, issuer: &str, issued: &[Issued]) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let Some(mint) = sqlx::query(
            "UPDATE mints SET updated_at = updated_at WHERE id = $1 AND status = $2 AND transfer_id IS NULL
             RETURNING organization_id, account_id, identity_id, amount_cents - fee_cents AS minted_cents,
                 stablecoin_symbol, chain,
                 destination_address",
        )
        .bind(id)
        .bind(Status::Minting.as_str())
        .fetch_optional(&mut *tx)
        .await?
        else {
            return Ok(false);
        };
        let symbol: String = mint.try_get("stablecoin_symbol")?;
        let decimals = issued.iter().find(|i| i.symbol == symbol).map(|i| i.decimals).ok_or_else(|| {
            StoreError::Conflict(format!("mint {id}: {symbol} is not an issued asset here"))
        })?;
        let organization: String = mint.try_get("organization_id")?;
        let account: String = mint.try_get("account_id")?;
        let transfer = uuid::Uuid::new_v4().to_string();
        let now = now_micros();
        sqlx::query(&format!(
            "INSERT INTO transfers (id, organization_id, request_id, request_fingerprint, account_id, identity_id,
                 chain, source_address, destination_address, currency_symbol, amount_raw, decimals, status, route,
                 created_at, updated_at)
             VALUES ($1, $2, $3, 'mint', $4, $5, $6, $7, $8, $9, $10, $11, '{}', '{}', $12, $12)",
            TransferStatus::Accepted,
            Route::Mint.as_str()
        ))
        .bind(&transfer)
        .bind(&organization)
        .bind(format!("mint:{id}"))
        .bind(&account)
        .bind(mint.try_get::<String, _>("identity_id")?)
        .bind(mint.try_get::<String, _>("chain")?)
        .bind(issuer)
        .bind(mint.try_get::<String, _>("destination_address")?)
        .bind(&symbol)
        .bind(mint_amount(mint.try_get("minted_cents")?, decimals)?.to_string())
        .bind(i64::from(decimals))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE mints SET transfer_id = $2, updated_at = $3 WHERE id = $1")
            .bind(id)
            .bind(&transfer)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracing::info!(mint = id, %transfer, "mint transaction to send");
        Ok(true)
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

    /// Completes the mints whose deposit is `CONFIRMED`: the deposit of one
    /// of their transfer's transactions, to their account, of their asset
    /// and amount. Returns how many it completed.
    pub async fn complete_mints(&self) -> Result<usize, StoreError> {
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
        let mut completed = 0;
        for row in rows {
            let (id, deposit, hash): (String, String, String) =
                (row.try_get("id")?, row.try_get("deposit_id")?, row.try_get("tx_hash")?);
            let mut tx = self.begin().await?;
            let Some((_, status)) = lock_mint(&mut tx, "id", &id).await? else { continue };
            let Ok(transition) = apply(status, Event::DepositConfirmed) else { continue };
            sqlx::query("UPDATE mints SET deposit_id = $2, transaction_hash = COALESCE(transaction_hash, $3) WHERE id = $1")
                .bind(&id)
                .bind(&deposit)
                .bind(&hash)
                .execute(&mut *tx)
                .await?;
            change(&mut tx, &id, transition, None).await?;
            tx.commit().await?;
            completed += 1;
        }
        Ok(completed)
    }
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

/// The stablecoin's smallest units of `cents` dollars, at `decimals` (two or more).
fn mint_amount(cents: i64, decimals: u8) -> Result<U256, StoreError> {
    let cents =
        u64::try_from(cents).map_err(|_| StoreError::Corrupt(format!("negative mint amount {cents}")))?;
    let scale = decimals.checked_sub(2).ok_or_else(|| {
        StoreError::Conflict(format!("a stablecoin of {decimals} decimals cannot hold cents"))
    })?;
    Ok(U256::from(cents) * U256::from(10u8).pow(U256::from(scale)))
}

/// Inside a transfer's settlement: the mint it sends (if it is one) moves
/// on with it. `CONFIRMED` makes the mint `MINTED` with the transaction's
/// hash; `FAILED` or `DROPPED` (nothing minted) makes it `FAILED`, its
/// dollars owed back. A mint already `COMPLETED` (its deposit was seen
/// first) stays so.
pub(super) async fn follow_transfer(
    tx: &mut Transaction<'static, Any>,
    transfer: &str,
    status: TransferStatus,
    hash: Option<&str>,
) -> Result<(), StoreError> {
    let event = match status {
        TransferStatus::Confirmed => Event::Final,
        TransferStatus::Failed | TransferStatus::Dropped => Event::TransactionFailed,
        TransferStatus::Accepted | TransferStatus::Submitted => return Ok(()),
    };
    let Some((id, status)) = lock_mint(tx, "transfer_id", transfer).await? else { return Ok(()) };
    match apply(status, event) {
        Ok(transition) => {
            if let Some(hash) = hash.filter(|_| event == Event::Final) {
                sqlx::query("UPDATE mints SET transaction_hash = $2 WHERE id = $1")
                    .bind(&id)
                    .bind(hash)
                    .execute(&mut **tx)
                    .await?;
            }
            change(tx, &id, transition, None).await
        }
        Err(refusal) if status == Status::Completed && event == Event::Final => {
            tracing::debug!(mint = %id, %refusal, "the mint completed before its transfer settled");
            Ok(())
        }
        Err(refusal) => {
            tracing::error!(mint = %id, %transfer, %refusal, "a mint's transfer settled against its status");
            Ok(())
        }
    }
}

/// Takes the row lock of the mint whose `column` (`id` or `transfer_id`)
/// is `value`: its id and status.
async fn lock_mint(
    tx: &mut Transaction<'static, Any>,
    column: &str,
    value: &str,
) -> Result<Option<(String, Status)>, StoreError> {
    let row = sqlx::query(&format!(
        "UPDATE mints SET updated_at = updated_at WHERE {column} = $1 RETURNING id, status"
    ))
    .bind(value)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| Ok((r.try_get("id")?, parse_column(&r.try_get::<String, _>("status")?, "mints.status")?)))
        .transpose()
}
