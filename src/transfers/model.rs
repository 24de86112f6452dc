//! A transfer's domain types: the request as accepted, why one is refused,
//! the signed transactions of its one lineage, and what settles it.

use alloy::primitives::U256;
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::resource::{FailureDetails, Route, Transfer, TransferStatus};
use crate::{amount::Amount, chain::Chain, deposits::resource::rfc3339};

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
    /// Its step failed `retries` times in a row; not tried again before
    /// `retry_at` (microseconds).
    pub retries: u32,
    pub retry_at: Option<i64>,
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

#[cfg(test)]
impl SentTransaction {
    /// A plain transfer transaction `SENT` by `sender` at `nonce`, for unit
    /// tests to change what they judge.
    pub(crate) fn sent_by(sender: &str, nonce: u64) -> Self {
        SentTransaction {
            hash: String::new(),
            role: TxRole::Transfer,
            sender: sender.into(),
            nonce,
            gas_limit: 21_000,
            value: U256::ZERO,
            max_fee_per_gas: 1,
            max_priority_fee_per_gas: 1,
            raw: String::new(),
            state: TxState::Sent,
            block_number: None,
            block_hash: None,
            fee: None,
            created_at: 0,
        }
    }
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

/// Fees the platform paid for itself (a nonce filler's), for the gas ledger:
/// billed to no organization.
#[derive(Debug, Clone)]
pub struct PlatformCost {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
