//! The issuance resources as the API serves them: Bank account and Mint
//! instruction, with exactly the reference's fields.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::state::Status;
use crate::{chain::Chain, deposits::resource::rfc3339, pii::Masked};

/// The event type of every change of a mint's status.
pub const MINT_UPDATE: &str = "mint_update";

/// The only payment rail a mint instruction takes.
pub const PAYMENT_RAIL: &str = "WIRE";
/// The only fiat currency a mint instruction takes.
pub const FIAT_CURRENCY: &str = "USD";

/// A client's bank account, registered for an identity.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BankAccount {
    pub id: String,
    pub identity_id: String,
    /// As the client gave it (checked by `issuance::bank`); personal data, stored
    /// sealed and never logged.
    #[schema(value_type = crate::schemas::BankAccountDetails)]
    pub bank_account_details: Masked<Value>,
}

/// Where and how to wire dollars to have a stablecoin minted to an account:
/// a wire to `bank_account_details` quoting `memo_id` mints
/// `stablecoin_symbol` on `chain` to the address of the account
/// `mint_destination_address_id`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MintInstruction {
    pub id: String,
    pub identity_id: String,
    pub request_id: String,
    pub stablecoin_symbol: String,
    pub chain: Chain,
    /// The identity's account whose address on `chain` receives the stablecoin.
    pub mint_destination_address_id: String,
    /// `WIRE`.
    pub payment_rail: &'static str,
    /// `USD`.
    pub fiat_currency_symbol: &'static str,
    /// Quoted in the wire's memo, it names this instruction; unique.
    pub memo_id: String,
    /// The platform's receiving bank: where the wire goes.
    #[schema(value_type = crate::schemas::BankAccountDetails)]
    pub bank_account_details: Value,
    pub label: Option<String>,
}

impl BankAccount {
    /// Whether `other` asks for the same bank account (a replay of its request).
    pub fn same_request(&self, other: &BankAccount) -> bool {
        self.identity_id == other.identity_id && self.bank_account_details == other.bank_account_details
    }
}

impl MintInstruction {
    /// Whether `other` asks for the same instruction (a replay of its request).
    pub fn same_request(&self, other: &MintInstruction) -> bool {
        self.identity_id == other.identity_id
            && self.stablecoin_symbol == other.stablecoin_symbol
            && self.chain == other.chain
            && self.mint_destination_address_id == other.mint_destination_address_id
            && self.label == other.label
    }
}

/// A wire minted (or being minted) as a stablecoin: `GET
/// /v2/issuance/mints/{id}` and the `data` of `mint_update`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Mint {
    pub id: String,
    pub mint_instruction_id: String,
    pub identity_id: String,
    pub memo_id: String,
    /// The wire's dollars, a decimal string with 2 decimals (`250.00`).
    pub amount: String,
    /// `USD`.
    pub fiat_currency_symbol: &'static str,
    pub stablecoin_symbol: String,
    pub chain: Chain,
    pub destination_address: String,
    pub status: Status,
    /// The mint transaction, once sent.
    pub transaction_hash: Option<String>,
    /// The deposit the mint made at `destination_address`, once seen.
    pub deposit_id: Option<String>,
    /// Why nothing was minted (`FAILED` only): a code and what happened.
    pub failure_reason: Option<String>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
    #[serde(skip)]
    pub organization: String,
}
