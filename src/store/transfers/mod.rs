//! Transfers' rows as accepted and read: the account's lock, what its
//! transfers in flight hold, the insert of an accepted transfer, the
//! holder of a `request_id`, and the API's reads (the acceptance itself is
//! [`crate::transfers::hold`]).

pub(crate) mod gas_ledger;
pub(crate) mod limits;
pub(crate) mod nonce_fillers;
pub mod recovered;
pub(crate) mod transfer_lineage;
pub(crate) mod transfer_txs;

use std::collections::HashMap;

use alloy::primitives::U256;
use sqlx::{Any, Row, Transaction, any::AnyRow};

use super::{PLATFORM_ROUTES, Refusal, Store, StoreError, parse_column, time};
use crate::{
    account::AccountStatus,
    amount::Amount,
    chain::Chain,
    transfers::model::{Created, NewTransfer},
    transfers::resource::{FailureDetails, NetworkFee, Transfer, TransferStatus},
    transfers::rules::USD_DECIMALS,
};

/// A page of an organization's transfers, newest first.
#[derive(Debug, Clone, Default)]
pub struct TransferPage {
    pub organization: String,
    pub account_id: Option<String>,
    pub identity_id: Option<String>,
    pub status: Option<TransferStatus>,
    /// Keyset of the previous page's last transfer: `(created_at, id)`.
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

pub(super) const TRANSFER_COLUMNS: &str = "id, organization_id, request_id, account_id, identity_id, chain, source_address, \
    destination_address, currency_symbol, amount_raw, decimals, status, route, key_index, transaction_hash, \
    fee_amount, fee_currency_symbol, fee_usd_micros, failure_code, failure_message, authorization_nonce, window_ends_at, submitted_at, \
    confirmed_at, created_at, updated_at";

impl Store {
    /// The answer to a request whose `request_id` (canonical) is taken in
    /// the organization, if it is: the existing transfer while it is in
    /// flight, [`Refusal::Duplicate`] once it is terminal (processed), and
    /// [`Refusal::RequestReused`] when `fingerprint` differs.
    pub async fn repeated_request(
        &self,
        organization: &str,
        request_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Result<Created, Refusal>>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let found = find_request(&mut conn, organization, request_id).await?;
        // Given back before answering, which takes a connection of its own.
        drop(conn);
        match found {
            Some(found) => Ok(Some(self.answer_repeat(found, fingerprint).await)),
            None => Ok(None),
        }
    }

    /// The answer to a request whose `request_id` `found` holds (see
    /// [`Store::repeated_request`]).
    pub async fn answer_repeat(&self, found: FoundRequest, fingerprint: &str) -> Result<Created, Refusal> {
        if found.fingerprint != fingerprint {
            return Err(Refusal::RequestReused(found.id));
        }
        if found.status.is_terminal() {
            return Err(Refusal::Duplicate(found.id));
        }
        Ok(Created::Existing(self.transfer(&found.id).await?))
    }

    pub async fn transfer(&self, id: &str) -> Result<Transfer, StoreError> {
        let row = sqlx::query(&format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("transfer {id}")))?;
        transfer_from_row(&row)
    }

    /// A transfer, if it belongs to `organization`.
    pub async fn organization_transfer(&self, organization: &str, id: &str) -> Result<Transfer, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfers WHERE id = $1 AND organization_id = $2 AND route NOT IN {PLATFORM_ROUTES}"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("transfer {id}")))?;
        transfer_from_row(&row)
    }

    /// A page of transfers, newest first; see [`TransferPage`].
    pub async fn transfer_page(&self, page: &TransferPage) -> Result<Vec<Transfer>, StoreError> {
        let (after_time, after_id) = page.after.clone().map_or((None, None), |(t, id)| (Some(t), Some(id)));
        let rows = sqlx::query(&format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfers
             WHERE organization_id = $1 AND ($2 IS NULL OR account_id = $2) AND ($3 IS NULL OR identity_id = $3)
               AND ($4 IS NULL OR status = $4) AND route NOT IN {PLATFORM_ROUTES}
               AND ($5 IS NULL OR created_at < $5 OR (created_at = $5 AND id < $6))
             ORDER BY created_at DESC, id DESC LIMIT $7"
        ))
        .bind(&page.organization)
        .bind(page.account_id.as_deref())
        .bind(page.identity_id.as_deref())
        .bind(page.status.map(TransferStatus::as_str))
        .bind(after_time)
        .bind(after_id)
        .bind(i64::from(page.limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(transfer_from_row).collect()
    }

    /// Transfers by chain and status, for metrics.
    pub async fn transfer_counts(&self) -> Result<Vec<(Chain, TransferStatus, u64)>, StoreError> {
        let rows = sqlx::query("SELECT chain, status, COUNT(*) AS n FROM transfers GROUP BY chain, status")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    parse_column(&r.try_get::<String, _>("chain")?, "transfers.chain")?,
                    parse_column(&r.try_get::<String, _>("status")?, "transfers.status")?,
                    r.try_get::<i64, _>("n")? as u64,
                ))
            })
            .collect()
    }

    /// What transfers in flight hold of the account, by `(chain, symbol)`, in
    /// the smallest unit: `available` balances exclude it.
    pub async fn held_amounts(&self, account_id: &str) -> Result<HashMap<(Chain, String), U256>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT chain, currency_symbol, amount_raw FROM transfers
             WHERE account_id = $1 AND status IN ('ACCEPTED', 'SUBMITTED') AND route NOT IN {PLATFORM_ROUTES}"
        ))
        .bind(account_id)
        .fetch_all(&self.pool)
        .await?;
        let mut held: HashMap<(Chain, String), U256> = HashMap::new();
        for row in rows {
            let chain: Chain = parse_column(&row.try_get::<String, _>("chain")?, "transfers.chain")?;
            let amount: U256 =
                parse_column(&row.try_get::<String, _>("amount_raw")?, "transfers.amount_raw")?;
            *held.entry((chain, row.try_get("currency_symbol")?)).or_default() += amount;
        }
        Ok(held)
    }
}

/// The transfer holding a `request_id`.
pub struct FoundRequest {
    id: String,
    fingerprint: String,
    status: TransferStatus,
}

/// Takes the row lock of the account `new` sends from (PostgreSQL; SQLite's
/// write lock is already held), so transfers of one account are judged one
/// at a time: its status and identity.
pub async fn lock_account(
    tx: &mut Transaction<'static, Any>,
    new: &NewTransfer,
) -> Result<(AccountStatus, String), StoreError> {
    let account = sqlx::query(
        "UPDATE accounts SET status = status WHERE id = $1 AND organization_id = $2
         RETURNING status, identity_id",
    )
    .bind(&new.account_id)
    .bind(&new.organization)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("account {}", new.account_id)))?;
    let status: AccountStatus = parse_column(&account.try_get::<String, _>("status")?, "accounts.status")?;
    Ok((status, account.try_get("identity_id")?))
}

/// Inserts `new` as `ACCEPTED` with `id`, unless its `request_id` is
/// taken: whether it did.
pub async fn insert_accepted(
    tx: &mut Transaction<'static, Any>,
    (id, new): (&str, &NewTransfer),
    identity_id: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(&format!(
        "INSERT INTO transfers (id, organization_id, request_id, request_fingerprint, account_id, identity_id,
             chain, source_address, destination_address, currency_symbol, amount_raw, decimals, status, route,
             key_index, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, '{}', $13, $14, $15, $15)
         ON CONFLICT (organization_id, request_id) DO NOTHING",
        TransferStatus::Accepted
    ))
    .bind(id)
    .bind(&new.organization)
    .bind(&new.request_id)
    .bind(new.fingerprint())
    .bind(&new.account_id)
    .bind(identity_id)
    .bind(new.chain.as_str())
    .bind(&new.source_address)
    .bind(&new.destination_address)
    .bind(&new.currency_symbol)
    .bind(new.amount.raw().to_string())
    .bind(i64::from(new.amount.decimals()))
    .bind(new.route.as_str())
    .bind(new.key_index.map(i64::from))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// The transfer holding the organization's `request_id`, if one does.
pub async fn find_request(
    conn: &mut sqlx::AnyConnection,
    organization: &str,
    request_id: &str,
) -> Result<Option<FoundRequest>, StoreError> {
    let row = sqlx::query(
        "SELECT id, request_fingerprint, status FROM transfers WHERE organization_id = $1 AND request_id = $2",
    )
    .bind(organization)
    .bind(request_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(FoundRequest {
        id: row.try_get("id")?,
        fingerprint: row.try_get("request_fingerprint")?,
        status: parse_column(&row.try_get::<String, _>("status")?, "transfers.status")?,
    }))
}

/// What the account's transfers in flight hold of one asset on one chain.
pub async fn in_flight(
    tx: &mut Transaction<'static, Any>,
    account_id: &str,
    chain: Chain,
    symbol: &str,
) -> Result<U256, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT amount_raw FROM transfers WHERE account_id = $1 AND chain = $2 AND currency_symbol = $3
           AND status IN ('ACCEPTED', 'SUBMITTED') AND route NOT IN {PLATFORM_ROUTES}"
    ))
    .bind(account_id)
    .bind(chain.as_str())
    .bind(symbol)
    .fetch_all(&mut **tx)
    .await?;
    let mut held = U256::ZERO;
    for row in rows {
        held += parse_column::<U256>(&row.try_get::<String, _>("amount_raw")?, "transfers.amount_raw")?;
    }
    Ok(held)
}

pub(super) fn transfer_from_row(row: &AnyRow) -> Result<Transfer, StoreError> {
    let decimals = row.try_get::<i64, _>("decimals")? as u8;
    let amount: U256 = parse_column(&row.try_get::<String, _>("amount_raw")?, "transfers.amount_raw")?;
    let chain: Chain = parse_column(&row.try_get::<String, _>("chain")?, "transfers.chain")?;
    let fee_amount: Option<String> = row.try_get("fee_amount")?;
    let fee_symbol: Option<String> = row.try_get("fee_currency_symbol")?;
    let fee_usd: Option<i64> = row.try_get("fee_usd_micros")?;
    let code: Option<String> = row.try_get("failure_code")?;
    let message: Option<String> = row.try_get("failure_message")?;
    let optional_time = |column: &str| -> Result<_, StoreError> {
        row.try_get::<Option<i64>, _>(column)?.map(time).transpose()
    };
    let network_fee = match (fee_amount, fee_symbol, fee_usd) {
        (Some(amount), Some(currency_symbol), Some(usd)) => Some(NetworkFee {
            amount,
            currency_symbol,
            usd: Amount::from_raw(U256::from(usd.max(0)), USD_DECIMALS).to_string(),
        }),
        _ => None,
    };
    Ok(Transfer {
        id: row.try_get("id")?,
        request_id: row.try_get("request_id")?,
        account_id: row.try_get("account_id")?,
        source_address: row.try_get("source_address")?,
        destination_address: row.try_get("destination_address")?,
        destination_chain: chain,
        amount: Amount::from_raw(amount, decimals).to_string(),
        currency_symbol: row.try_get("currency_symbol")?,
        status: parse_column(&row.try_get::<String, _>("status")?, "transfers.status")?,
        transaction_hash: row.try_get("transaction_hash")?,
        network_fee,
        failure_details: code.map(|code| FailureDetails { code, message: message.unwrap_or_default() }),
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
        submitted_at: optional_time("submitted_at")?,
        confirmed_at: optional_time("confirmed_at")?,
    })
}
