//! The conversion resources as the API serves them: Conversion (the read
//! and the `data` of `conversion_notification_update`) and Virtual account,
//! with exactly the reference's fields.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::state::Status;
use crate::{
    chain::Chain,
    deposits::resource::{rfc3339, rfc3339_opt},
};

/// The event type of every change of a conversion's status.
pub const CONVERSION_NOTIFICATION_UPDATE: &str = "conversion_notification_update";

/// Which way a conversion moves value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = ConversionType)]
pub enum Type {
    /// Dollars wired to a virtual account, delivered as a stablecoin on chain.
    OnRamp,
    /// A stablecoin of an account, paid out to a bank account.
    OffRamp,
}

impl Type {
    pub fn as_str(self) -> &'static str {
        match self {
            Type::OnRamp => "ON_RAMP",
            Type::OffRamp => "OFF_RAMP",
        }
    }
}

impl std::str::FromStr for Type {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Type::OnRamp, Type::OffRamp]
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown conversion type {s:?}"))
    }
}

/// What a conversion takes in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = ConversionSource)]
pub struct Source {
    /// `USD` (an on-ramp) or the stablecoin (an off-ramp).
    pub currency: String,
    /// A decimal string in `currency`'s major unit (`250.00`).
    pub amount: String,
    /// The chain the stablecoin leaves from; `null` for dollars.
    pub chain: Option<Chain>,
}

/// What a conversion delivers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = ConversionDestination)]
pub struct Destination {
    pub currency: String,
    /// Exactly what arrives; `null` until settlement.
    pub amount: Option<String>,
}

/// The stablecoin credited back when a payout was returned. A key not yet
/// known is left out (never `null`): the refund workflow fills them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct RefundDetails {
    /// The stablecoin credited back, in the major unit (`"50"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    /// The stablecoin credited back (`USDC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// The credit: the platform's id of the transfer that sent the
    /// stablecoin back from its settlement wallet, for support and
    /// reconciliation (a platform transfer, not listed among the account's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_id: Option<String>,
    /// The credit's transaction on chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_hash: Option<String>,
    /// Why the payout came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RefundFailure>,
}

/// Why a returned payout came back: a stable code and the bank's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct RefundFailure {
    /// `PAYOUT_RETURNED`: the bank paid, then the payment came back.
    pub code: String,
    /// The bank's own words, as it gave them.
    pub message: String,
}

impl RefundFailure {
    pub const RETURNED: &str = "PAYOUT_RETURNED";
}

/// A conversion: `GET /v2/conversions/{id}` and the `data` of
/// `conversion_notification_update`. Every field is always present, `null`
/// when empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Conversion {
    pub id: String,
    pub status: Status,
    #[serde(rename = "type")]
    pub kind: Type,
    pub account_id: String,
    pub identity_id: String,
    /// An off-ramp's bank account; an on-ramp's virtual account.
    pub payment_instructions_id: Option<String>,
    /// The client's idempotency key (an off-ramp); `null` for an on-ramp.
    pub request_id: Option<String>,
    pub quote_id: Option<String>,
    pub source: Source,
    pub destination: Destination,
    /// A decimal string; `null` until settlement.
    pub exchange_rate: Option<String>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
    /// Set on `COMPLETED` only.
    #[serde(serialize_with = "rfc3339_opt")]
    #[schema(value_type = Option<String>)]
    pub completed_at: Option<DateTime<Utc>>,
    /// Set on `FAILED` and `RETURNED` only: a code and what happened.
    pub failure_reason: Option<String>,
    /// Set on `RETURNED` only.
    pub refund_details: Option<RefundDetails>,
    #[serde(skip)]
    pub organization: String,
}

/// A virtual account's status. `INACTIVE` is derived: an `ACTIVE` virtual
/// account of a `SUSPENDED` or `TERMINATED` identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
pub enum VirtualAccountStatus {
    #[serde(rename = "VIRTUAL_ACCOUNT_STATUS_PENDING")]
    Pending,
    #[serde(rename = "VIRTUAL_ACCOUNT_STATUS_ACTIVE")]
    Active,
    #[serde(rename = "VIRTUAL_ACCOUNT_STATUS_INACTIVE")]
    Inactive,
    #[serde(rename = "VIRTUAL_ACCOUNT_STATUS_FAILED")]
    Failed,
}

impl VirtualAccountStatus {
    pub const ALL: [VirtualAccountStatus; 4] = [Self::Pending, Self::Active, Self::Inactive, Self::Failed];

    /// The name the API shows and filters by.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "VIRTUAL_ACCOUNT_STATUS_PENDING",
            Self::Active => "VIRTUAL_ACCOUNT_STATUS_ACTIVE",
            Self::Inactive => "VIRTUAL_ACCOUNT_STATUS_INACTIVE",
            Self::Failed => "VIRTUAL_ACCOUNT_STATUS_FAILED",
        }
    }
}

impl std::str::FromStr for VirtualAccountStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
            format!("{s:?} is not a virtual account status (one of {})", names.join(", "))
        })
    }
}

/// Where a virtual account's wires come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = VirtualAccountSource)]
pub struct VirtualAccountSource {
    /// ISO 3166-1 alpha-2 country of the senders' banks.
    pub banking_country: String,
}

/// Where a virtual account's dollars are delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = VirtualAccountDestination)]
pub struct VirtualAccountDestination {
    pub account_id: String,
    /// The stablecoin delivered.
    #[schema(value_type = crate::schemas::StablecoinCurrency)]
    pub currency: String,
    pub chain: Chain,
}

/// How a virtual account's funds reach the account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = DepositInstructionsPaymentMethod)]
pub enum PaymentMethod {
    /// Minted on chain to `destination.account_id`.
    #[serde(rename = "BLOCKCHAIN")]
    Blockchain,
}

/// How to wire dollars to a virtual account: all strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct DepositInstructions {
    /// `0`: any amount.
    pub amount: String,
    /// The stablecoin delivered (the virtual account's
    /// `destination.currency`): `USDC`. The wire itself is in US dollars.
    #[schema(value_type = crate::schemas::StablecoinCurrency, example = "USDC")]
    pub currency: String,
    pub bank_name: String,
    pub bank_address: String,
    /// How the funds reach the account: `BLOCKCHAIN`, the only value.
    pub payment_method: PaymentMethod,
    /// The reference a wire quotes; unique to the virtual account.
    pub deposit_message: String,
    /// Unique to the virtual account.
    pub bank_account_number: String,
    pub bank_routing_number: String,
    pub bank_beneficiary_name: String,
    pub bank_beneficiary_address: String,
}

impl DepositInstructions {
    /// The deposit instructions of a virtual account at `bank` (a Bank
    /// account details object: the platform's receiving bank), under its
    /// own account number and message, delivering `stablecoin`. As the
    /// reference observes, `currency` is the stablecoin delivered and
    /// `payment_method` is `BLOCKCHAIN` (how the funds arrive); the wire
    /// itself is always US dollars.
    pub fn at(bank: &serde_json::Value, account_number: &str, message: &str, stablecoin: &str) -> Self {
        let text = |key: &str| bank[key].as_str().unwrap_or_default().to_string();
        let address = &bank["address"];
        let line = ["street_line_1", "street_line_2", "city", "region_code", "postal_code", "country"]
            .iter()
            .filter_map(|k| address[*k].as_str().filter(|s| !s.is_empty()))
            .collect::<Vec<_>>()
            .join(", ");
        DepositInstructions {
            amount: "0".into(),
            currency: stablecoin.into(),
            bank_name: text("bank_name"),
            bank_address: line.clone(),
            payment_method: PaymentMethod::Blockchain,
            deposit_message: message.into(),
            bank_account_number: account_number.into(),
            bank_routing_number: text("routing_number"),
            bank_beneficiary_name: text("account_holder_name"),
            bank_beneficiary_address: line,
        }
    }
}

/// A bank account number opened for an identity: the dollars wired to it
/// are delivered as `destination.currency` on `destination.chain` to the
/// account `destination.account_id`, each wire an `ON_RAMP` conversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct VirtualAccount {
    pub id: String,
    pub identity_id: String,
    pub status: VirtualAccountStatus,
    pub source: VirtualAccountSource,
    pub destination: VirtualAccountDestination,
    /// Filled once `ACTIVE` (and kept while `INACTIVE`); `null` before.
    pub deposit_instructions: Option<DepositInstructions>,
    /// Why the bank refused it (`FAILED` only); extension.
    pub failure_reason: Option<String>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
    #[serde(skip)]
    pub organization: String,
    #[serde(skip)]
    pub request_id: String,
}

impl VirtualAccount {
    /// Whether `other` asks for the same virtual account (a replay of its request).
    pub fn same_request(&self, other: &VirtualAccount) -> bool {
        self.identity_id == other.identity_id
            && self.source == other.source
            && self.destination == other.destination
    }
}

/// An amount in a currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = QuoteAmount)]
pub struct Money {
    pub currency: String,
    /// A decimal string in `currency`'s major unit (`100.00`).
    pub amount: String,
}

/// A priced off-ramp: `GET /v2/conversions/quotes`. Usable by one
/// conversion, until `expires_at`; its fee is bound to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Quote {
    pub id: String,
    pub source: Money,
    pub destination: Money,
    /// Destination units per source unit, an exact decimal string.
    pub exchange_rate: String,
    pub fee: Money,
    /// The bank account it pays out to.
    pub payment_instructions_id: String,
    #[serde(serialize_with = "rfc3339")]
    pub expires_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(skip)]
    pub organization: String,
    /// The fee, in cents of the source.
    #[serde(skip)]
    pub fee_cents: i64,
}
