//! The chains of the API's `Chain` enum and the family each belongs to.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// A chain as the API names it (`destination_chain`, `addresses[].chains`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Chain {
    EthereumMainnet,
    PolygonMainnet,
    BaseMainnet,
    OptimismMainnet,
    EthereumTestnet,
    OptimismSepolia,
    BaseSepolia,
    PolygonAmoy,
    SolanaMainnet,
    SolanaDevnet,
}

/// Chain families share address formats, RPC protocols and watchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Evm,
    Solana,
}

impl Chain {
    pub const ALL: [Chain; 10] = [
        Chain::EthereumMainnet,
        Chain::PolygonMainnet,
        Chain::BaseMainnet,
        Chain::OptimismMainnet,
        Chain::EthereumTestnet,
        Chain::OptimismSepolia,
        Chain::BaseSepolia,
        Chain::PolygonAmoy,
        Chain::SolanaMainnet,
        Chain::SolanaDevnet,
    ];

    /// The API's spelling, e.g. `ETHEREUM_MAINNET`.
    pub fn as_str(self) -> &'static str {
        match self {
            Chain::EthereumMainnet => "ETHEREUM_MAINNET",
            Chain::PolygonMainnet => "POLYGON_MAINNET",
            Chain::BaseMainnet => "BASE_MAINNET",
            Chain::OptimismMainnet => "OPTIMISM_MAINNET",
            Chain::EthereumTestnet => "ETHEREUM_TESTNET",
            Chain::OptimismSepolia => "OPTIMISM_SEPOLIA",
            Chain::BaseSepolia => "BASE_SEPOLIA",
            Chain::PolygonAmoy => "POLYGON_AMOY",
            Chain::SolanaMainnet => "SOLANA_MAINNET",
            Chain::SolanaDevnet => "SOLANA_DEVNET",
        }
    }

    /// Whether real money moves on it: a sandbox never follows one.
    pub fn is_mainnet(self) -> bool {
        matches!(
            self,
            Chain::EthereumMainnet
                | Chain::PolygonMainnet
                | Chain::BaseMainnet
                | Chain::OptimismMainnet
                | Chain::SolanaMainnet
        )
    }

    /// Whether a chain file's network is a mainnet's whatever the chain it
    /// names: Ethereum's, Optimism's, Polygon's or Base's chain id, or
    /// Solana mainnet-beta's genesis hash.
    pub fn mainnet_network(chain_id: Option<u64>, genesis_hash: Option<&str>) -> bool {
        matches!(chain_id, Some(1 | 10 | 137 | 8453))
            || genesis_hash == Some("5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d")
    }

    pub fn family(self) -> Family {
        match self {
            Chain::SolanaMainnet | Chain::SolanaDevnet => Family::Solana,
            _ => Family::Evm,
        }
    }
}

/// How a family's gas sponsor pays for an account's transaction: as its
/// fee payer (Solana), or by giving the account's address gas (EVM: a
/// top-up, or an EIP-3009 authorization the sponsor relays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sponsorship {
    FeePayer,
    Gas,
}

/// The curve a family's keys sign with: secp256k1 (ECDSA) for EVM chains,
/// Ed25519 for Solana (see [`crate::family::rules::curve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    Secp256k1,
    Ed25519,
}

impl fmt::Display for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The schema's zero value: in a filter it means "every chain", and it
/// never names the chain a body needs.
pub const UNSPECIFIED: &str = "CHAIN_UNSPECIFIED";

#[derive(Debug, thiserror::Error)]
pub enum UnknownChain {
    #[error("unknown chain {0:?} (expected one of: {list})", list = Chain::ALL.map(Chain::as_str).join(", "))]
    Unknown(String),
    #[error("CHAIN_UNSPECIFIED names no chain (expected one of: {list})", list = Chain::ALL.map(Chain::as_str).join(", "))]
    Unspecified,
}

impl FromStr for Chain {
    type Err = UnknownChain;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case(UNSPECIFIED) {
            return Err(UnknownChain::Unspecified);
        }
        Chain::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownChain::Unknown(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for chain in Chain::ALL {
            let json = serde_json::to_string(&chain).unwrap();
            assert_eq!(json, format!("\"{}\"", chain.as_str()));
            assert_eq!(serde_json::from_str::<Chain>(&json).unwrap(), chain);
            assert_eq!(chain.as_str().parse::<Chain>().unwrap(), chain);
        }
        assert_eq!("ethereum_testnet".parse::<Chain>().unwrap(), Chain::EthereumTestnet);
        assert!(matches!("CHAIN_UNSPECIFIED".parse::<Chain>(), Err(UnknownChain::Unspecified)));
        assert!(matches!("BASE".parse::<Chain>(), Err(UnknownChain::Unknown(_))));
    }
}
