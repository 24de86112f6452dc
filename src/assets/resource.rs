//! An asset and a balance, as the API shows them.

use serde::Serialize;
use utoipa::ToSchema;

use crate::chain::Chain;

/// What kind of asset: the chain's own coin, an ERC-20 token or an SPL token
/// (Token or Token-2022 program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AssetType {
    Base,
    Erc20,
    SplToken,
}

/// A supported asset, as `GET /v2/assets` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Asset {
    pub chain: Chain,
    pub symbol: String,
    /// Decimal places, as a string (the resource's type).
    pub decimals: String,
    #[serde(rename = "type")]
    pub kind: AssetType,
    /// The token contract or mint; empty for the chain's own coin.
    pub contract_address: String,
}

/// One asset's balance of an account on one chain, summed over the account's
/// addresses there. Amounts are in the major unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Balance {
    pub symbol: String,
    /// What the chain holds for the account's addresses.
    pub total: String,
    /// `total` less what transfers in flight hold.
    pub available: String,
    pub decimals: u8,
    #[serde(rename = "type")]
    pub kind: AssetType,
    pub chain: Chain,
    pub contract_address: String,
}
