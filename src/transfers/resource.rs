//! A transfer as the API serves it and announces it: its statuses and the
//! events naming them, the route it takes to the chain, and why it failed.
//! Model types only: the store reads and writes them.

use std::{fmt, str::FromStr};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    chain::Chain,
    deposits::resource::{rfc3339, rfc3339_opt},
};

/// `ACCEPTED` → `SUBMITTED` → `CONFIRMED`; `FAILED` or `DROPPED` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TransferStatus {
    /// Validated, awaiting submission.
    Accepted,
    /// On chain, awaiting confirmations.
    Submitted,
    /// Terminal: included and confirmed under the chain's policy.
    Confirmed,
    /// Terminal: see `failure_details`.
    Failed,
    /// Terminal: not included within the confirmation window, cancelled.
    Dropped,
}

impl TransferStatus {
    pub const ALL: [TransferStatus; 5] = [
        TransferStatus::Accepted,
        TransferStatus::Submitted,
        TransferStatus::Confirmed,
        TransferStatus::Failed,
        TransferStatus::Dropped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TransferStatus::Accepted => "ACCEPTED",
            TransferStatus::Submitted => "SUBMITTED",
            TransferStatus::Confirmed => "CONFIRMED",
            TransferStatus::Failed => "FAILED",
            TransferStatus::Dropped => "DROPPED",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, TransferStatus::Confirmed | TransferStatus::Failed | TransferStatus::Dropped)
    }

    /// The event type announcing a change to this status; none for `ACCEPTED`
    /// (the creating request's answer announces it).
    pub fn event_type(self) -> Option<&'static str> {
        match self {
            TransferStatus::Accepted => None,
            TransferStatus::Submitted => Some(CRYPTO_TRANSFER_SUBMITTED),
            TransferStatus::Failed => Some(CRYPTO_TRANSFER_FAILED),
            TransferStatus::Confirmed | TransferStatus::Dropped => Some(CRYPTO_TRANSFER_UPDATED),
        }
    }
}

pub const CRYPTO_TRANSFER_SUBMITTED: &str = "crypto_transfer_submitted";
pub const CRYPTO_TRANSFER_UPDATED: &str = "crypto_transfer_updated";
pub const CRYPTO_TRANSFER_FAILED: &str = "crypto_transfer_failed";

impl fmt::Display for TransferStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown transfer status {0:?} (expected ACCEPTED, SUBMITTED, CONFIRMED, FAILED or DROPPED)")]
pub struct UnknownStatus(pub String);

impl FromStr for TransferStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TransferStatus::ALL.into_iter().find(|t| t.as_str() == s).ok_or_else(|| UnknownStatus(s.into()))
    }
}

/// How a transfer reaches the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// From the omnibus wallet, which pays its own gas.
    Omnibus,
    /// EIP-3009 `transferWithAuthorization`: signed by the account, sent and
    /// paid for by the sponsor.
    Authorization,
    /// The sponsor first sends the account's address the gas it lacks.
    TopUp,
    /// Solana: the sponsor pays the fee (and any rent) as fee payer.
    FeePayer,
    /// An issued stablecoin minted to a client's address for a wire: the
    /// issuer signs (on Solana the sponsor pays the fee). The platform's
    /// own transaction: no client reads it as a transfer, none is billed.
    Mint,
    /// An off-ramp's stablecoin sent back from the settlement wallet to
    /// the account it came from, after the bank refused or returned the
    /// payout: the settlement key signs (on EVM chains it pays its own gas,
    /// on Solana the sponsor pays the fee). The platform's own, like a mint.
    Settlement,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Omnibus => "OMNIBUS",
            Route::Authorization => "AUTHORIZATION",
            Route::TopUp => "TOP_UP",
            Route::FeePayer => "FEE_PAYER",
            Route::Mint => "MINT",
            Route::Settlement => "SETTLEMENT",
        }
    }

    /// The platform's own transactions (mints, settlement refunds): no
    /// client reads them as transfers, they hold nothing of an account and
    /// no one is billed their gas.
    pub fn is_platform_own(self) -> bool {
        matches!(self, Route::Mint | Route::Settlement)
    }
}

impl FromStr for Route {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Route::Omnibus, Route::Authorization, Route::TopUp, Route::FeePayer, Route::Mint, Route::Settlement]
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.into()))
    }
}

/// Why a transfer failed: a stable `code` and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FailureDetails {
    /// `REVERTED`, `REJECTED_BY_NODE`, `SIGNING_FAILED`, `INVALID_TRANSFER`,
    /// `NOT_SUBMITTED`, `INSUFFICIENT_GAS_FUNDS`, `CHAIN_UNAVAILABLE`,
    /// `GAS_LIMIT_EXCEEDED` (the call needs more gas than one transaction
    /// may use, EIP-7825),
    /// `ACCOUNT_NOT_ACTIVE` (the identity or the account stopped
    /// transacting before the transfer was signed) or `FIAT_NOT_ENABLED`
    /// (an off-ramp's collect whose identity lost the fiat entitlement).
    pub code: String,
    pub message: String,
}

/// What the platform paid on chain for a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct NetworkFee {
    /// In the chain's native coin, major unit.
    pub amount: String,
    pub currency_symbol: String,
    /// Valued at the configured price when recorded.
    pub usd: String,
}

/// A crypto transfer as the API serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Transfer {
    pub id: String,
    /// The client's idempotency key.
    pub request_id: String,
    pub account_id: String,
    pub source_address: String,
    pub destination_address: String,
    pub destination_chain: Chain,
    /// Major unit, as a decimal string.
    pub amount: String,
    pub currency_symbol: String,
    pub status: TransferStatus,
    /// The transaction hash (EVM) or signature (Solana), once submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_hash: Option<String>,
    /// Once the transfer's transactions are settled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_fee: Option<NetworkFee>,
    /// Only on `FAILED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_details: Option<FailureDetails>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub submitted_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub confirmed_at: Option<DateTime<Utc>>,
}

/// Why a transfer failed.
pub fn failure(code: &str, message: &str) -> FailureDetails {
    FailureDetails { code: code.into(), message: message.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_name_their_events() {
        for status in TransferStatus::ALL {
            assert_eq!(status.as_str().parse::<TransferStatus>().unwrap(), status);
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert_eq!(TransferStatus::Submitted.event_type(), Some("crypto_transfer_submitted"));
        assert_eq!(TransferStatus::Failed.event_type(), Some("crypto_transfer_failed"));
        assert_eq!(TransferStatus::Dropped.event_type(), Some("crypto_transfer_updated"));
        assert!("accepted".parse::<TransferStatus>().is_err());
    }
}
