//! The gas ledger: what the platform paid on chain. A transfer settles with
//! its fees, billed to its organization, and its event in one transaction;
//! an organization's usage is read against its credit. The platform's own
//! costs (nonce fillers) are entries with no organization, billed to nobody.

use std::collections::HashSet;

use alloy::primitives::U256;
use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::store::{
    Store, StoreError, TRANSFER_COLUMNS, events, now_micros, parse_column, transfer_from_row,
};
use crate::{
    amount::Amount,
    chain::Chain,
    transfers::model::{ChainGas, Fee, GasUsage, PlatformCost, Settlement},
    transfers::resource::{Route, TransferStatus},
    transfers::rules::{USD_DECIMALS, usd_micros},
};

impl Store {
    /// The organization's sponsored gas against `credit_usd_micros`.
    pub async fn gas_usage(
        &self,
        organization: &str,
        credit_usd_micros: i64,
    ) -> Result<GasUsage, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {SUM_COLUMNS} FROM gas_ledger WHERE organization_id = $1 ORDER BY chain"
        ))
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        let (by_chain, spent) = by_chain(&rows)?;
        Ok(GasUsage {
            organization_id: organization.to_string(),
            credit_usd: usd(credit_usd_micros),
            spent_usd: usd(spent),
            remaining_credit_usd: usd(credit_usd_micros - spent),
            billable_usd: usd(spent - credit_usd_micros),
            by_chain,
        })
    }

    /// What the platform paid for itself (nonce fillers), per chain: the
    /// ledger's entries billed to no organization.
    pub async fn platform_gas(&self) -> Result<Vec<ChainGas>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {SUM_COLUMNS} FROM gas_ledger WHERE organization_id IS NULL ORDER BY chain"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(by_chain(&rows)?.0)
    }

    /// The ledger's entries of one transfer: `(transaction hash, kind, amount)`.
    pub async fn gas_entries(&self, transfer_id: &str) -> Result<Vec<(String, String, U256)>, StoreError> {
        let rows = sqlx::query(
            "SELECT transaction_hash, kind, amount_raw FROM gas_ledger WHERE transfer_id = $1 ORDER BY created_at, kind",
        )
        .bind(transfer_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("transaction_hash")?,
                    r.try_get("kind")?,
                    parse_column(&r.try_get::<String, _>("amount_raw")?, "gas_ledger.amount_raw")?,
                ))
            })
            .collect()
    }
}

/// Ends a transfer inside `tx`: its terminal status, the fees into the gas
/// ledger and its event; a transfer already terminal is left alone (the
/// flow is [`crate::transfers::settle::settle_transfer`]).
pub async fn settle_in(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    settlement: &Settlement,
) -> Result<(), StoreError> {
    let now = now_micros();
    // Takes the transfer's row lock first, as recording a transaction does:
    // settlements and recordings of one transfer are judged one at a time.
    let row = sqlx::query(
        "UPDATE transfers SET updated_at = updated_at WHERE id = $1 RETURNING organization_id, chain, status, route",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    let status: TransferStatus = parse_column(&row.try_get::<String, _>("status")?, "transfers.status")?;
    if status.is_terminal() {
        return Ok(());
    }
    let organization: String = row.try_get("organization_id")?;
    let chain: String = row.try_get("chain")?;
    // A mint's or a refund's gas is the platform's own cost.
    let own =
        parse_column::<Route>(&row.try_get::<String, _>("route")?, "transfers.route")?.is_platform_own();
    let entries = Entries {
        billed: (!own).then_some((organization.as_str(), id)),
        chain: &chain,
        fees: &settlement.fees,
        symbol: &settlement.native_symbol,
        decimals: settlement.native_decimals,
        usd_micros_per_coin: settlement.usd_micros_per_coin,
    };
    let (total, total_usd) = entries.insert(tx, now).await?;
    let (code, message) =
        settlement.failure.as_ref().map_or((None, None), |f| (Some(&f.code), Some(&f.message)));
    sqlx::query(
            "UPDATE transfers SET status = $2, transaction_hash = COALESCE($3, transaction_hash), fee_amount = $4,
                 fee_usd_micros = $5, failure_code = $6, failure_message = $7, updated_at = $8,
                 confirmed_at = CASE WHEN $2 = 'CONFIRMED' THEN $8 ELSE NULL END, fee_currency_symbol = $9
             WHERE id = $1",
        )
        .bind(id)
        .bind(settlement.status.as_str())
        .bind(settlement.transaction_hash.as_deref())
        .bind(Amount::from_raw(total, settlement.native_decimals).to_string())
        .bind(total_usd)
        .bind(code)
        .bind(message)
        .bind(now)
        .bind(&settlement.native_symbol)
        .execute(&mut **tx)
        .await?;
    // The platform's own transfers are no client's: their wings follow
    // them (the issuance and conversions workers), and no event announces them.
    if own {
        return Ok(());
    }
    announce_transfer(tx, id, now).await
}

/// Records `cost` of a transaction on `chain` as the platform's own: entries
/// billed to no organization. Idempotent, as every entry of the ledger.
pub(crate) async fn record_platform_cost(
    tx: &mut Transaction<'static, Any>,
    chain: &str,
    cost: &PlatformCost,
    now: i64,
) -> Result<(), StoreError> {
    let entries = Entries {
        billed: None,
        chain,
        fees: &cost.fees,
        symbol: &cost.native_symbol,
        decimals: cost.native_decimals,
        usd_micros_per_coin: cost.usd_micros_per_coin,
    };
    entries.insert(tx, now).await?;
    Ok(())
}

/// Fees of one payer on one chain, valued at the chain's price.
struct Entries<'a> {
    /// `(organization, transfer)`; `None`: the platform's own cost.
    billed: Option<(&'a str, &'a str)>,
    chain: &'a str,
    fees: &'a [Fee],
    symbol: &'a str,
    decimals: u8,
    usd_micros_per_coin: u128,
}

impl Entries<'_> {
    /// Writes one entry per fee, idempotent on (transaction hash, kind);
    /// returns their total, in the native smallest unit and in micro-USD.
    async fn insert(&self, tx: &mut Transaction<'static, Any>, now: i64) -> Result<(U256, i64), StoreError> {
        let mut total = U256::ZERO;
        let mut total_usd: i64 = 0;
        for fee in self.fees {
            let usd = usd_micros(fee.amount, self.decimals, self.usd_micros_per_coin);
            total += fee.amount;
            total_usd += usd;
            sqlx::query(
                "INSERT INTO gas_ledger (id, organization_id, transfer_id, chain, transaction_hash, kind, amount_raw,
                     decimals, currency_symbol, usd_micros, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (transaction_hash, kind) DO NOTHING",
            )
            .bind(uuid::Uuid::new_v4().to_string())
            .bind(self.billed.map(|(organization, _)| organization))
            .bind(self.billed.map(|(_, transfer)| transfer))
            .bind(self.chain)
            .bind(&fee.transaction_hash)
            .bind(fee.kind)
            .bind(fee.amount.to_string())
            .bind(i64::from(self.decimals))
            .bind(self.symbol)
            .bind(usd)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
        Ok((total, total_usd))
    }
}

const SUM_COLUMNS: &str = "chain, currency_symbol, decimals, amount_raw, usd_micros, transaction_hash";

/// Ledger rows (of [`SUM_COLUMNS`], ordered by chain) summed per chain, and
/// their total in micro-USD.
fn by_chain(rows: &[AnyRow]) -> Result<(Vec<ChainGas>, i64), StoreError> {
    let mut sums: Vec<(Chain, String, u8, U256, i64, HashSet<String>)> = Vec::new();
    let mut spent: i64 = 0;
    for row in rows {
        let chain: Chain = parse_column(&row.try_get::<String, _>("chain")?, "gas_ledger.chain")?;
        let amount: U256 = parse_column(&row.try_get::<String, _>("amount_raw")?, "gas_ledger.amount_raw")?;
        let micros: i64 = row.try_get("usd_micros")?;
        spent += micros;
        if sums.last().is_none_or(|c| c.0 != chain) {
            let decimals = row.try_get::<i64, _>("decimals")? as u8;
            sums.push((chain, row.try_get("currency_symbol")?, decimals, U256::ZERO, 0, HashSet::new()));
        }
        let entry = sums.last_mut().expect("pushed above");
        entry.3 += amount;
        entry.4 += micros;
        entry.5.insert(row.try_get("transaction_hash")?);
    }
    let by_chain = sums
        .into_iter()
        .map(|(chain, symbol, decimals, amount, micros, txs)| ChainGas {
            chain,
            amount: Amount::from_raw(amount, decimals).to_string(),
            currency_symbol: symbol,
            usd: usd(micros),
            transactions: txs.len() as u64,
        })
        .collect();
    Ok((by_chain, spent))
}

/// Micro-dollars as a decimal USD string; a negative amount is zero.
fn usd(micros: i64) -> String {
    Amount::from_raw(U256::from(micros.max(0)), USD_DECIMALS).to_string()
}

/// Writes the transfer's event when its status differs from the last one
/// announced: `crypto_transfer_submitted`, `crypto_transfer_updated`, or
/// `crypto_transfer_failed` with `failure_details`.
pub(crate) async fn announce_transfer(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    now: i64,
) -> Result<(), StoreError> {
    let row =
        sqlx::query(&format!("SELECT {TRANSFER_COLUMNS}, announced_status FROM transfers WHERE id = $1"))
            .bind(id)
            .fetch_one(&mut **tx)
            .await?;
    let transfer = transfer_from_row(&row)?;
    let announced: Option<String> = row.try_get("announced_status")?;
    // A mint announces itself (`mint_update`), a refund its conversion:
    // never as a transfer.
    let own =
        parse_column::<Route>(&row.try_get::<String, _>("route")?, "transfers.route")?.is_platform_own();
    if own || announced.as_deref() == Some(transfer.status.as_str()) {
        return Ok(());
    }
    let Some(kind) = transfer.status.event_type() else { return Ok(()) };
    let organization: String = row.try_get("organization_id")?;
    let event_id = uuid::Uuid::new_v4().to_string();
    let event = events::NewEvent::new(&organization, kind, &transfer.id, event_id, &transfer)?;
    events::append(tx, std::slice::from_ref(&event), now).await?;
    sqlx::query("UPDATE transfers SET announced_status = status WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
