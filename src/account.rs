//! Accounts: what the indexer watches. An account belongs to an organization,
//! holds addresses valid on a list of chains, and keeps receiving deposits
//! whatever its status (funds that arrived on chain are always recorded).

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{chain::Chain, unknown::UnknownValue};

/// The organization every account belongs to unless told otherwise.
pub const DEFAULT_ORGANIZATION: &str = "default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AccountType {
    Omnibus,
    Segregated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AccountStatus {
    Active,
    Frozen,
    Closed,
}

/// An address and the chains it is valid on, as in the Account resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AccountAddress {
    pub chains: Vec<Chain>,
    pub address: String,
}

/// An account. Its `status` is derived from its identity's (`FROZEN` while
/// the identity is `SUSPENDED`, `CLOSED` once it is `TERMINATED`, `ACTIVE`
/// otherwise), and `identity_status`/`identity_sub_status` mirror the
/// identity's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Account {
    pub id: String,
    /// The client's idempotency key; `null` for accounts an operator registered.
    pub request_id: Option<String>,
    #[serde(skip)]
    pub organization: String,
    pub identity_id: String,
    pub identity_type: crate::identity::Type,
    #[serde(rename = "type")]
    pub kind: AccountType,
    pub addresses: Vec<AccountAddress>,
    pub status: AccountStatus,
    pub identity_status: crate::identity::Status,
    /// `null` when the identity has none.
    pub identity_sub_status: Option<crate::identity::SubStatus>,
}

impl AccountType {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountType::Omnibus => "OMNIBUS",
            AccountType::Segregated => "SEGREGATED",
        }
    }
}

/// Refuses the legacy names `LEDGER` and `ONCHAIN`, removed on 2026-06-24,
/// naming the value that replaced each.
impl FromStr for AccountType {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "OMNIBUS" => Ok(Self::Omnibus),
            "SEGREGATED" => Ok(Self::Segregated),
            "LEDGER" => Err(UnknownValue::new(
                "account type",
                s,
                "OMNIBUS: LEDGER was renamed OMNIBUS and removed on 2026-06-24",
            )),
            "ONCHAIN" => Err(UnknownValue::new(
                "account type",
                s,
                "SEGREGATED: ONCHAIN was renamed SEGREGATED and removed on 2026-06-24",
            )),
            _ => Err(UnknownValue::new("account type", s, "OMNIBUS or SEGREGATED")),
        }
    }
}

impl AccountStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Active => "ACTIVE",
            AccountStatus::Frozen => "FROZEN",
            AccountStatus::Closed => "CLOSED",
        }
    }
}

impl FromStr for AccountStatus {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "ACTIVE" => Ok(Self::Active),
            "FROZEN" => Ok(Self::Frozen),
            "CLOSED" => Ok(Self::Closed),
            _ => Err(UnknownValue::new("account status", s, "ACTIVE, FROZEN or CLOSED")),
        }
    }
}

impl fmt::Display for AccountType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for AccountStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
