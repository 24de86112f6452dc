//! Outbound transfers: idempotent creation under balance and limit checks,
//! the signed transactions of each transfer (persisted before broadcast),
//! per-sender nonces, the gas ledger and transaction-limit policies.

use std::collections::HashMap;

use alloy::primitives::U256;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::{Any, Row, Transaction, any::AnyRow};
use utoipa::ToSchema;

use super::{Store, StoreError, events, now_micros, parse_column, time};
use crate::{
    account::AccountStatus,
    amount::Amount,
    chain::Chain,
    deposit::rfc3339,
    transfer::{FailureDetails, NetworkFee, Route, Transfer, TransferStatus},
};

/// A validated transfer request, amounts in the smallest unit.
#[derive(Debug, Clone)]
pub struct NewTransfer {
    pub organization: String,
    pub request_id: String,
    pub account_id: String,
    pub chain: Chain,
    pub source_address: String,
    pub destination_address: String,
    pub currency_symbol: String,
    pub amount: Amount,
    pub route: Route,
    /// The signing account key's derivation index; `None` for the omnibus wallet.
    pub key_index: Option<u32>,
}

impl NewTransfer {
    /// What makes two requests with one `request_id` the same request.
    pub fn fingerprint(&self) -> String {
        fingerprint(
            &self.account_id,
            self.chain,
            &self.destination_address,
            &self.currency_symbol,
            &self.amount,
        )
    }
}

/// What makes two requests with one `request_id` the same request: the
/// account, the chain, the normalised destination, the asset and the amount
/// in the smallest unit (so `"1.50"` and `"1.5"` are the same request).
pub fn fingerprint(
    account_id: &str,
    chain: Chain,
    destination: &str,
    symbol: &str,
    amount: &Amount,
) -> String {
    let text = format!("{account_id}\n{chain}\n{destination}\n{symbol}\n{}", amount.raw());
    hex(&Sha256::digest(text.as_bytes()))
}

/// Why a transfer request was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("transfer {0} with this request_id was already processed")]
    Duplicate(String),
    #[error("request_id was already used by transfer {0} with a different request")]
    RequestReused(String),
    #[error("account {0} is {1}; only ACTIVE accounts can send")]
    NotActive(String, AccountStatus),
    #[error("insufficient available balance: {available} {symbol} available, {requested} requested")]
    Insufficient { available: String, requested: String, symbol: String },
    #[error("transaction limit policy {policy}: {message}")]
    Limit { policy: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for Refusal {
    fn from(error: sqlx::Error) -> Self {
        Refusal::Store(error.into())
    }
}

/// What creating a transfer did.
#[derive(Debug)]
pub enum Created {
    New(Transfer),
    /// The same request again while the first is in flight (`ACCEPTED` or
    /// `SUBMITTED`), whatever it holds.
    Existing(Transfer),
}

/// Where a new transaction stands in its transfer's one lineage. A transfer
/// has at most one live lineage of transfer transactions (the transfer
/// transaction, its fee bumps and its cancellation, all at one nonce; on
/// Solana its re-signings after a provable expiry), and a top-up only while
/// no other top-up is pending and no transfer transaction lives: recording
/// checks this against the transfer's locked row, so two senders racing on
/// one transfer cannot both sign it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lineage<'a> {
    /// A new lineage: the transfer is still `ACCEPTED`, no transfer or
    /// cancellation transaction of it lives (every one was `REJECTED`) and no
    /// top-up is pending. On EVM it takes a new nonce from the counter.
    Start,
    /// Continues the lineage whose newest live transaction of the same kind
    /// (top-up, or transfer and cancellation) is this hash, in a transfer
    /// not yet terminal: a replacement at the same nonce on EVM, a
    /// re-signing with a fresh blockhash on Solana.
    After(&'a str),
}

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

/// A transfer not yet terminal, with what the sender needs to move it on.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub id: String,
    pub organization: String,
    pub account_id: String,
    pub chain: Chain,
    pub source_address: String,
    pub destination_address: String,
    pub currency_symbol: String,
    pub amount: U256,
    pub decimals: u8,
    pub status: TransferStatus,
    pub route: Route,
    pub key_index: Option<u32>,
    pub authorization_nonce: Option<String>,
    pub window_ends_at: Option<i64>,
    pub created_at: i64,
    pub transactions: Vec<SentTransaction>,
}

/// A transaction's purpose within its transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxRole {
    TopUp,
    Transfer,
    Cancel,
}

/// Where a signed transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    Sent,
    Mined,
    Reverted,
    Rejected,
}

/// A signed transaction of a transfer.
#[derive(Debug, Clone)]
pub struct SentTransaction {
    pub hash: String,
    pub role: TxRole,
    pub sender: String,
    pub nonce: u64,
    pub gas_limit: u64,
    /// The native value it carries.
    pub value: U256,
    pub max_fee_per_gas: u128,
    pub max_priority_fee_per_gas: u128,
    /// The signed bytes, hex: what is broadcast, again and again if need be.
    pub raw: String,
    pub state: TxState,
    pub block_number: Option<u64>,
    pub block_hash: Option<String>,
    /// What it cost in the native smallest unit, once mined.
    pub fee: Option<U256>,
    pub created_at: i64,
}

/// One fee the platform paid, for the gas ledger.
#[derive(Debug, Clone)]
pub struct Fee {
    pub transaction_hash: String,
    /// `NETWORK_FEE`, `L1_DATA_FEE` or `RENT`.
    pub kind: &'static str,
    pub amount: U256,
}

/// A terminal outcome.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub status: TransferStatus,
    /// The transaction that decided it.
    pub transaction_hash: Option<String>,
    pub failure: Option<FailureDetails>,
    /// Every fee paid for the transfer, valued at `usd_micros_per_coin`.
    pub fees: Vec<Fee>,
    pub native_symbol: String,
    pub native_decimals: u8,
    pub usd_micros_per_coin: u128,
}

/// A transaction limit on an account or an identity, for one asset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LimitPolicy {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_id: Option<String>,
    pub currency_symbol: String,
    /// The most one transfer may send, major unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_per_transfer: Option<String>,
    /// The most all transfers of the scope may send in any 24 hours, major unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rolling_24h: Option<String>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// An organization's sponsored gas: what was spent against its credit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct GasUsage {
    pub organization_id: String,
    /// USD, decimal strings.
    pub credit_usd: String,
    pub spent_usd: String,
    pub remaining_credit_usd: String,
    /// What is billed beyond the credit.
    pub billable_usd: String,
    pub by_chain: Vec<ChainGas>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ChainGas {
    pub chain: Chain,
    /// The fees in the chain's native coin, major unit.
    pub amount: String,
    pub currency_symbol: String,
    pub usd: String,
    pub transactions: u64,
}

/// Decimal places of USD amounts inside: micro-dollars.
pub const USD_DECIMALS: u8 = 6;

const TRANSFER_COLUMNS: &str = "id, organization_id, request_id, account_id, identity_id, chain, source_address, \
    destination_address, currency_symbol, amount_raw, decimals, status, route, key_index, transaction_hash, \
    fee_amount, fee_currency_symbol, fee_usd_micros, failure_code, failure_message, authorization_nonce, window_ends_at, submitted_at, \
    confirmed_at, created_at, updated_at";

const TX_COLUMNS: &str = "hash, transfer_id, role, sender, nonce, gas_limit, value, max_fee_per_gas, \
    max_priority_fee_per_gas, raw, state, block_number, block_hash, fee_raw, created_at";

/// The scale every amount is brought to before amounts of one symbol with
/// different decimals (one per chain) are added up.
const COMMON_DECIMALS: u32 = 36;

impl Store {
    /// Accepts a transfer exactly once per `(organization, request_id)`:
    /// checks, in one transaction holding the account's row, that the account
    /// is `ACTIVE`, that `balance` (what the chain holds for the source, in
    /// the smallest unit) covers the amount beside the other transfers in
    /// flight, and that every matching limit policy allows it. Concurrent
    /// duplicates meet the unique `(organization_id, request_id)` constraint:
    /// one inserts, the others find its row.
    ///
    /// A request whose `request_id` is taken is answered from the transfer
    /// holding it (see [`Store::repeated_request`]) before anything is
    /// checked, and again once the account's row is held: a duplicate that
    /// waited for the first request's commit finds its transfer, never a
    /// balance or a limit its own hold exhausted.
    pub async fn create_transfer(&self, new: &NewTransfer, balance: U256) -> Result<Created, Refusal> {
        let fingerprint = new.fingerprint();
        if let Some(answer) = self.repeated_request(&new.organization, &new.request_id, &fingerprint).await? {
            return answer;
        }
        let mut tx = self.begin().await?;
        let now = now_micros();
        // Locks the account's row until commit (PostgreSQL); SQLite's write
        // lock is already held. Transfers of one account are checked one at a time.
        let account = sqlx::query(
            "UPDATE accounts SET status = status WHERE id = $1 AND organization_id = $2
             RETURNING status, identity_id",
        )
        .bind(&new.account_id)
        .bind(&new.organization)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("account {}", new.account_id)))?;
        let status: AccountStatus =
            parse_column(&account.try_get::<String, _>("status")?, "accounts.status")?;
        if status != AccountStatus::Active {
            return Err(Refusal::NotActive(new.account_id.clone(), status));
        }
        let identity_id: String = account.try_get("identity_id")?;
        if let Some(found) = find_request(&mut tx, &new.organization, &new.request_id).await? {
            drop(tx);
            return self.answer_repeat(found, &fingerprint).await;
        }

        let held = in_flight(&mut tx, &new.account_id, new.chain, &new.currency_symbol).await?;
        let decimals = new.amount.decimals();
        let available = balance.saturating_sub(held);
        if new.amount.raw() > available {
            return Err(Refusal::Insufficient {
                available: Amount::from_raw(available, decimals).to_string(),
                requested: new.amount.to_string(),
                symbol: new.currency_symbol.clone(),
            });
        }
        check_limits(&mut tx, new, &identity_id, now).await?;

        let id = uuid::Uuid::new_v4().to_string();
        let inserted = sqlx::query(&format!(
            "INSERT INTO transfers (id, organization_id, request_id, request_fingerprint, account_id, identity_id,
                 chain, source_address, destination_address, currency_symbol, amount_raw, decimals, status, route,
                 key_index, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, '{}', $13, $14, $15, $15)
             ON CONFLICT (organization_id, request_id) DO NOTHING",
            TransferStatus::Accepted
        ))
        .bind(&id)
        .bind(&new.organization)
        .bind(&new.request_id)
        .bind(&fingerprint)
        .bind(&new.account_id)
        .bind(&identity_id)
        .bind(new.chain.as_str())
        .bind(&new.source_address)
        .bind(&new.destination_address)
        .bind(&new.currency_symbol)
        .bind(new.amount.raw().to_string())
        .bind(i64::from(decimals))
        .bind(new.route.as_str())
        .bind(new.key_index.map(i64::from))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            // A concurrent request with this request_id committed first.
            drop(tx);
            return match self.repeated_request(&new.organization, &new.request_id, &fingerprint).await? {
                Some(answer) => answer,
                None => Err(StoreError::Corrupt("request_id conflict without a row".into()).into()),
            };
        }
        tx.commit().await?;
        Ok(Created::New(self.transfer(&id).await?))
    }

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

    async fn answer_repeat(&self, found: FoundRequest, fingerprint: &str) -> Result<Created, Refusal> {
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
            "SELECT {TRANSFER_COLUMNS} FROM transfers WHERE id = $1 AND organization_id = $2"
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
               AND ($4 IS NULL OR status = $4)
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
        let rows = sqlx::query(
            "SELECT chain, currency_symbol, amount_raw FROM transfers
             WHERE account_id = $1 AND status IN ('ACCEPTED', 'SUBMITTED')",
        )
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

    /// Every transfer of `chain` still `ACCEPTED` or `SUBMITTED`, oldest first,
    /// with its transactions.
    pub async fn outgoing(&self, chain: Chain) -> Result<Vec<Outgoing>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfers
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
                transactions: by_transfer.remove(&id).unwrap_or_default(),
                id,
            });
        }
        Ok(out)
    }

    /// Sponsor money still at a topped-up address: the top-ups it received
    /// less the fees its own transactions paid. The next top-up only adds what
    /// this lacks, and the account's available native balance excludes it.
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
             WHERE chain = $1 AND sender = $2 AND state IN ('MINED', 'REVERTED') AND fee_raw IS NOT NULL",
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

    /// Moves a sender's next nonce up to what the chain has counted (someone
    /// else sent from the address): never down.
    pub async fn resync_nonce(
        &self,
        chain: Chain,
        address: &str,
        chain_next: u64,
    ) -> Result<bool, StoreError> {
        let moved = sqlx::query(
            "UPDATE sender_nonces SET next_nonce = $3 WHERE chain = $1 AND address = $2 AND next_nonce < $3",
        )
        .bind(chain.as_str())
        .bind(address)
        .bind(super::to_i64(chain_next)?)
        .execute(&self.pool)
        .await?;
        Ok(moved.rows_affected() > 0)
    }

    /// Persists a signed transaction before it is broadcast, if `lineage`
    /// still holds for the transfer (checked in the same transaction, under
    /// the transfer's row lock); otherwise [`StoreError::Conflict`] and
    /// nothing is recorded, so the transaction must not be broadcast. An EVM
    /// transaction that starts a lineage takes a new nonce from the sender's
    /// counter by compare-and-set (the counter must still be at `nonce`, or
    /// absent), so a nonce is never given twice nor skipped; a replacement
    /// reuses its predecessor's nonce. `window_ends_at` (microseconds) is
    /// kept if the transfer has none yet. Nothing is recorded either unless
    /// `fence`, the chain's sender lease, is still held.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_transaction(
        &self,
        transfer_id: &str,
        chain: Chain,
        sent: &SentTransaction,
        lineage: Lineage<'_>,
        window_ends_at: Option<i64>,
        authorization_nonce: Option<&str>,
        fence: &super::Fence,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        self.check_fence(&mut tx, fence).await?;
        let evm = chain.family() == crate::chain::Family::Evm;
        super::transfer_lineage::check(&mut tx, transfer_id, sent, lineage, evm).await?;
        let nonce = super::to_i64(sent.nonce)?;
        if lineage == Lineage::Start && evm {
            let taken = sqlx::query(
                "INSERT INTO sender_nonces (chain, address, next_nonce) VALUES ($1, $2, $4)
                 ON CONFLICT (chain, address) DO UPDATE SET next_nonce = excluded.next_nonce
                 WHERE sender_nonces.next_nonce = $3",
            )
            .bind(chain.as_str())
            .bind(&sent.sender)
            .bind(nonce)
            .bind(nonce + 1)
            .execute(&mut *tx)
            .await?;
            if taken.rows_affected() == 0 {
                return Err(StoreError::Conflict(format!(
                    "nonce {nonce} of {} on {chain} was taken meanwhile",
                    sent.sender
                )));
            }
        }
        sqlx::query(&format!(
            "INSERT INTO transfer_transactions ({TX_COLUMNS}, chain)
             VALUES ($1, $2, $3, $4, $5, $6, $12, $7, $8, $9, 'SENT', NULL, NULL, NULL, $10, $11)"
        ))
        .bind(&sent.hash)
        .bind(transfer_id)
        .bind(role_str(sent.role))
        .bind(&sent.sender)
        .bind(nonce)
        .bind(super::to_i64(sent.gas_limit)?)
        .bind(sent.max_fee_per_gas.to_string())
        .bind(sent.max_priority_fee_per_gas.to_string())
        .bind(&sent.raw)
        .bind(sent.created_at)
        .bind(chain.as_str())
        .bind(sent.value.to_string())
        .execute(&mut *tx)
        .await?;
        let now = now_micros();
        if let Some(nonce) = authorization_nonce {
            sqlx::query(
                "UPDATE transfers SET authorization_nonce = $2 WHERE id = $1 AND authorization_nonce IS NULL",
            )
            .bind(transfer_id)
            .bind(nonce)
            .execute(&mut *tx)
            .await?;
        }
        if sent.role != TxRole::TopUp {
            sqlx::query("UPDATE transfers SET transaction_hash = $2, updated_at = $3 WHERE id = $1")
                .bind(transfer_id)
                .bind(&sent.hash)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(ends) = window_ends_at {
            sqlx::query("UPDATE transfers SET window_ends_at = $2 WHERE id = $1 AND window_ends_at IS NULL")
                .bind(transfer_id)
                .bind(ends)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A node accepted the transfer's transaction: `SUBMITTED`, announced.
    pub async fn mark_submitted(&self, transfer_id: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let now = now_micros();
        sqlx::query(
            "UPDATE transfers SET status = 'SUBMITTED', submitted_at = $2, updated_at = $2
             WHERE id = $1 AND status = 'ACCEPTED'",
        )
        .bind(transfer_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        announce_transfer(&mut tx, transfer_id, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records what the chain says of a transaction: included (`MINED`,
    /// `REVERTED`, with its block and fee) or back to `SENT` after a reorg.
    pub async fn update_transaction(
        &self,
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
        .bind(block.map(|(n, _)| super::to_i64(n)).transpose()?)
        .bind(block.map(|(_, h)| h))
        .bind(fee.map(|f| f.to_string()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A transaction the node refused: it is `REJECTED`, and when it held a
    /// new nonce that nothing else uses, the nonce is given back.
    pub async fn reject_transaction(&self, chain: Chain, sent: &SentTransaction) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE transfer_transactions SET state = 'REJECTED' WHERE hash = $1")
            .bind(&sent.hash)
            .execute(&mut *tx)
            .await?;
        let nonce = super::to_i64(sent.nonce)?;
        let others: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM transfer_transactions
             WHERE chain = $1 AND sender = $2 AND nonce = $3 AND state <> 'REJECTED'",
        )
        .bind(chain.as_str())
        .bind(&sent.sender)
        .bind(nonce)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if others == 0 {
            sqlx::query(
                "UPDATE sender_nonces SET next_nonce = $3 WHERE chain = $1 AND address = $2 AND next_nonce = $4",
            )
            .bind(chain.as_str())
            .bind(&sent.sender)
            .bind(nonce)
            .bind(nonce + 1)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Ends a transfer: its terminal status, the fees into the gas ledger and
    /// its event, in one transaction. A transfer already terminal is left alone.
    pub async fn settle_transfer(&self, id: &str, settlement: &Settlement) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        settle_in(&mut tx, id, settlement).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The organization's sponsored gas against `credit_usd_micros`.
    pub async fn gas_usage(
        &self,
        organization: &str,
        credit_usd_micros: i64,
    ) -> Result<GasUsage, StoreError> {
        let rows = sqlx::query(
            "SELECT chain, currency_symbol, decimals, amount_raw, usd_micros, transaction_hash FROM gas_ledger
             WHERE organization_id = $1 ORDER BY chain",
        )
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        let mut by_chain: Vec<(Chain, String, u8, U256, i64, std::collections::HashSet<String>)> = Vec::new();
        let mut spent: i64 = 0;
        for row in rows {
            let chain: Chain = parse_column(&row.try_get::<String, _>("chain")?, "gas_ledger.chain")?;
            let amount: U256 =
                parse_column(&row.try_get::<String, _>("amount_raw")?, "gas_ledger.amount_raw")?;
            let usd: i64 = row.try_get("usd_micros")?;
            spent += usd;
            if by_chain.last().is_none_or(|c| c.0 != chain) {
                by_chain.push((
                    chain,
                    row.try_get("currency_symbol")?,
                    row.try_get::<i64, _>("decimals")? as u8,
                    U256::ZERO,
                    0,
                    Default::default(),
                ));
            }
            let entry = by_chain.last_mut().expect("pushed above");
            entry.3 += amount;
            entry.4 += usd;
            entry.5.insert(row.try_get("transaction_hash")?);
        }
        let usd = |micros: i64| Amount::from_raw(U256::from(micros.max(0)), USD_DECIMALS).to_string();
        Ok(GasUsage {
            organization_id: organization.to_string(),
            credit_usd: usd(credit_usd_micros),
            spent_usd: usd(spent),
            remaining_credit_usd: usd(credit_usd_micros - spent),
            billable_usd: usd(spent - credit_usd_micros),
            by_chain: by_chain
                .into_iter()
                .map(|(chain, symbol, decimals, amount, micros, txs)| ChainGas {
                    chain,
                    amount: Amount::from_raw(amount, decimals).to_string(),
                    currency_symbol: symbol,
                    usd: usd(micros),
                    transactions: txs.len() as u64,
                })
                .collect(),
        })
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

    /// Adds a limit policy for an account or an identity of the organization.
    pub async fn create_limit_policy(
        &self,
        organization: &str,
        account_id: Option<&str>,
        identity_id: Option<&str>,
        currency_symbol: &str,
        max_per_transfer: Option<&str>,
        max_rolling_24h: Option<&str>,
    ) -> Result<LimitPolicy, StoreError> {
        if account_id.is_some() == identity_id.is_some() {
            return Err(StoreError::Invalid(
                "a policy applies to exactly one account or one identity".into(),
            ));
        }
        if max_per_transfer.is_none() && max_rolling_24h.is_none() {
            return Err(StoreError::Invalid("a policy needs a per-transfer or a rolling 24 h limit".into()));
        }
        for limit in [max_per_transfer, max_rolling_24h].into_iter().flatten() {
            Amount::parse(limit, COMMON_DECIMALS as u8)
                .map_err(|e| StoreError::Invalid(format!("limit: {e}")))?;
        }
        if let Some(account) = account_id {
            self.organization_account(organization, account).await?;
        }
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO transaction_limit_policies (id, organization_id, account_id, identity_id, currency_symbol,
                 max_per_transfer, max_rolling_24h, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&id)
        .bind(organization)
        .bind(account_id)
        .bind(identity_id)
        .bind(currency_symbol)
        .bind(max_per_transfer)
        .bind(max_rolling_24h)
        .bind(now_micros())
        .execute(&self.pool)
        .await?;
        self.limit_policy(organization, &id).await
    }

    pub async fn limit_policy(&self, organization: &str, id: &str) -> Result<LimitPolicy, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {POLICY_COLUMNS} FROM transaction_limit_policies WHERE id = $1 AND organization_id = $2"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("transaction limit policy {id}")))?;
        policy_from_row(&row)
    }

    pub async fn limit_policies(&self, organization: &str) -> Result<Vec<LimitPolicy>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {POLICY_COLUMNS} FROM transaction_limit_policies WHERE organization_id = $1 ORDER BY created_at, id"
        ))
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(policy_from_row).collect()
    }
}

const POLICY_COLUMNS: &str =
    "id, account_id, identity_id, currency_symbol, max_per_transfer, max_rolling_24h, created_at";

fn policy_from_row(row: &AnyRow) -> Result<LimitPolicy, StoreError> {
    Ok(LimitPolicy {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        identity_id: row.try_get("identity_id")?,
        currency_symbol: row.try_get("currency_symbol")?,
        max_per_transfer: row.try_get("max_per_transfer")?,
        max_rolling_24h: row.try_get("max_rolling_24h")?,
        created_at: time(row.try_get("created_at")?)?,
    })
}

/// The transfer holding a `request_id`.
struct FoundRequest {
    id: String,
    fingerprint: String,
    status: TransferStatus,
}

async fn find_request(
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
async fn in_flight(
    tx: &mut Transaction<'static, Any>,
    account_id: &str,
    chain: Chain,
    symbol: &str,
) -> Result<U256, StoreError> {
    let rows = sqlx::query(
        "SELECT amount_raw FROM transfers WHERE account_id = $1 AND chain = $2 AND currency_symbol = $3
           AND status IN ('ACCEPTED', 'SUBMITTED')",
    )
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

/// Refuses the transfer when a policy on its account or identity and asset
/// would be exceeded: by the amount alone, or by the scope's transfers of the
/// last 24 hours that did not fail (on every chain) plus this one.
async fn check_limits(
    tx: &mut Transaction<'static, Any>,
    new: &NewTransfer,
    identity_id: &str,
    now: i64,
) -> Result<(), Refusal> {
    // Locking the matching policies serialises transfers of one identity
    // across its accounts on PostgreSQL.
    let policies = sqlx::query(&format!(
        "UPDATE transaction_limit_policies SET id = id
         WHERE organization_id = $1 AND currency_symbol = $2 AND (account_id = $3 OR identity_id = $4)
         RETURNING {POLICY_COLUMNS}"
    ))
    .bind(&new.organization)
    .bind(&new.currency_symbol)
    .bind(&new.account_id)
    .bind(identity_id)
    .fetch_all(&mut **tx)
    .await?;
    let amount = scale(new.amount.raw(), new.amount.decimals());
    let limit = |text: &str| -> Result<U256, StoreError> {
        Amount::parse(text, COMMON_DECIMALS as u8)
            .map(|a| a.raw())
            .map_err(|_| StoreError::Corrupt(format!("transaction_limit_policies limit {text:?}")))
    };
    for row in policies {
        let policy = policy_from_row(&row)?;
        if let Some(max) = &policy.max_per_transfer
            && amount > limit(max)?
        {
            return Err(Refusal::Limit {
                policy: policy.id,
                message: format!("at most {max} {} per transfer", policy.currency_symbol),
            });
        }
        if let Some(max) = &policy.max_rolling_24h {
            let (column, scope) = match &policy.account_id {
                Some(account) => ("account_id", account.as_str()),
                None => ("identity_id", identity_id),
            };
            let rows = sqlx::query(&format!(
                "SELECT amount_raw, decimals FROM transfers
                 WHERE organization_id = $1 AND {column} = $2 AND currency_symbol = $3 AND created_at > $4
                   AND status NOT IN ('FAILED', 'DROPPED')"
            ))
            .bind(&new.organization)
            .bind(scope)
            .bind(&new.currency_symbol)
            .bind(now - 24 * 3600 * 1_000_000)
            .fetch_all(&mut **tx)
            .await?;
            let mut volume = amount;
            for row in rows {
                let raw: U256 =
                    parse_column(&row.try_get::<String, _>("amount_raw")?, "transfers.amount_raw")?;
                volume += scale(raw, row.try_get::<i64, _>("decimals")? as u8);
            }
            if volume > limit(max)? {
                return Err(Refusal::Limit {
                    policy: policy.id,
                    message: format!("at most {max} {} in any 24 hours", policy.currency_symbol),
                });
            }
        }
    }
    Ok(())
}

/// `raw` with `decimals` brought to [`COMMON_DECIMALS`].
fn scale(raw: U256, decimals: u8) -> U256 {
    raw * U256::from(10).pow(U256::from(COMMON_DECIMALS.saturating_sub(u32::from(decimals))))
}

/// `amount` of a coin with `decimals` at `price` micro-USD per coin, in
/// micro-USD, rounded half up.
pub fn usd_micros(amount: U256, decimals: u8, price: u128) -> i64 {
    let unit = U256::from(10).pow(U256::from(decimals));
    let value = (amount * U256::from(price) + unit / U256::from(2)) / unit;
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// [`Store::settle_transfer`] inside `tx`.
pub(super) async fn settle_in(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    settlement: &Settlement,
) -> Result<(), StoreError> {
    let now = now_micros();
    // Takes the transfer's row lock first, as recording a transaction does:
    // settlements and recordings of one transfer are judged one at a time.
    let row = sqlx::query(
        "UPDATE transfers SET updated_at = updated_at WHERE id = $1 RETURNING organization_id, chain, status",
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
    let mut total = U256::ZERO;
    let mut total_usd: i64 = 0;
    for fee in &settlement.fees {
        let usd = usd_micros(fee.amount, settlement.native_decimals, settlement.usd_micros_per_coin);
        total += fee.amount;
        total_usd += usd;
        sqlx::query(
                "INSERT INTO gas_ledger (id, organization_id, transfer_id, chain, transaction_hash, kind, amount_raw,
                     decimals, currency_symbol, usd_micros, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (transaction_hash, kind) DO NOTHING",
            )
            .bind(uuid::Uuid::new_v4().to_string())
            .bind(&organization)
            .bind(id)
            .bind(&chain)
            .bind(&fee.transaction_hash)
            .bind(fee.kind)
            .bind(fee.amount.to_string())
            .bind(i64::from(settlement.native_decimals))
            .bind(&settlement.native_symbol)
            .bind(usd)
            .bind(now)
            .execute(&mut **tx)
            .await?;
    }
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
    announce_transfer(tx, id, now).await
}

/// Writes the transfer's event when its status differs from the last one
/// announced: `crypto_transfer_submitted`, `crypto_transfer_updated`, or
/// `crypto_transfer_failed` with `failure_details`.
async fn announce_transfer(tx: &mut Transaction<'static, Any>, id: &str, now: i64) -> Result<(), StoreError> {
    let row =
        sqlx::query(&format!("SELECT {TRANSFER_COLUMNS}, announced_status FROM transfers WHERE id = $1"))
            .bind(id)
            .fetch_one(&mut **tx)
            .await?;
    let transfer = transfer_from_row(&row)?;
    let announced: Option<String> = row.try_get("announced_status")?;
    if announced.as_deref() == Some(transfer.status.as_str()) {
        return Ok(());
    }
    let Some(kind) = transfer.status.event_type() else { return Ok(()) };
    let organization: String = row.try_get("organization_id")?;
    let data = serde_json::to_value(&transfer).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let event = events::NewEvent {
        organization: &organization,
        kind,
        resource_id: &transfer.id,
        id: uuid::Uuid::new_v4().to_string(),
        data,
    };
    events::append(tx, std::slice::from_ref(&event), now).await?;
    sqlx::query("UPDATE transfers SET announced_status = status WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

fn transfer_from_row(row: &AnyRow) -> Result<Transfer, StoreError> {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_values_are_exact_and_rounded_half_up() {
        // 21,000 gas at 1 gwei at 3,000 USD/ETH = 0.063 USD.
        let fee = U256::from(21_000u64 * 1_000_000_000);
        assert_eq!(usd_micros(fee, 18, 3_000_000_000), 63_000);
        // 5,000 lamports at 150 USD/SOL = 0.00075 USD.
        assert_eq!(usd_micros(U256::from(5_000), 9, 150_000_000), 750);
        // Half a micro-dollar rounds up, less rounds down.
        assert_eq!(usd_micros(U256::from(5), 7, 1_000_000), 1);
        assert_eq!(usd_micros(U256::from(4), 7, 1_000_000), 0);
    }

    #[test]
    fn amounts_of_different_decimals_compare_on_one_scale() {
        assert_eq!(scale(U256::from(1_500_000), 6), scale(U256::from(1_500_000_000_000_000_000u128), 18));
    }
}
