//! The supported assets of every chain file, and account balances read from
//! the chains themselves.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use alloy::primitives::U256;
use futures::future::try_join_all;

pub mod resource;

pub use resource::{Asset, AssetType, Balance};

use crate::{
    account::Account,
    amount::Amount,
    chain::Chain,
    config::{ChainConfig, Chains},
    family::seam::{GasBeyondCap, Move, Totals},
    rpc::RpcFailure,
};

/// A balance the chain did not answer.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BalanceError(#[from] RpcFailure);

impl BalanceError {
    pub fn chain(&self) -> Chain {
        self.0.chain
    }

    /// The JSON-RPC method that failed, for a client: never the provider's
    /// own words, which may name its plan, its internals or its URL.
    pub fn method(&self) -> &'static str {
        self.0.method
    }
}

/// The assets of one chain file: its coin first, then its tokens in file order.
pub fn assets_of(config: &ChainConfig) -> Vec<Asset> {
    let token_kind = crate::family::rules::token_type(config.family());
    let native = Asset {
        chain: config.chain,
        symbol: config.native.symbol.clone(),
        decimals: config.native.decimals.to_string(),
        kind: AssetType::Base,
        contract_address: String::new(),
    };
    let tokens = config.assets.iter().map(|a| Asset {
        chain: config.chain,
        symbol: a.symbol.clone(),
        decimals: a.decimals.to_string(),
        kind: token_kind,
        contract_address: a.contract_address.clone(),
    });
    std::iter::once(native).chain(tokens).collect()
}

/// Reads balances from each configured chain's RPC endpoints.
pub struct BalanceReader {
    chains: Chains,
    clients: HashMap<Chain, Box<dyn Totals>>,
}

impl BalanceReader {
    /// Reads `chains` through `clients`, one per chain (see
    /// [`crate::family::balance_reader`]).
    pub fn new(chains: Chains, clients: HashMap<Chain, Box<dyn Totals>>) -> Self {
        Self { chains, clients }
    }

    pub fn chains(&self) -> &Chains {
        &self.chains
    }

    /// Whether `transfer` on `chain` needs more gas than one transaction
    /// may carry (see [`Totals::gas_beyond_cap`]).
    pub async fn gas_beyond_cap(
        &self,
        chain: Chain,
        transfer: &Move<'_>,
    ) -> Result<Option<GasBeyondCap>, RpcFailure> {
        match self.clients.get(&chain) {
            Some(client) => client.gas_beyond_cap(transfer).await,
            None => Ok(None),
        }
    }

    /// The account's balance of every asset on every configured chain it has
    /// an address on (or on `only`), chains in API order. `held` gives what
    /// transfers in flight hold of `(chain, symbol)` in base units.
    pub async fn balances(
        &self,
        account: &Account,
        only: Option<Chain>,
        held: impl Fn(Chain, &str) -> U256,
    ) -> Result<Vec<Balance>, BalanceError> {
        let mut addresses: BTreeMap<Chain, BTreeSet<&str>> = BTreeMap::new();
        for entry in &account.addresses {
            for chain in entry.chains.iter().filter(|c| only.is_none_or(|o| o == **c)) {
                addresses.entry(*chain).or_default().insert(&entry.address);
            }
        }
        let reads = addresses.into_iter().filter_map(|(chain, addresses)| {
            let config = self.chains.get(chain).ok()?;
            let client = self.clients.get(&chain)?;
            Some(async move {
                let raw = client.totals(config, &addresses).await?;
                Ok::<_, BalanceError>((config, raw))
            })
        });
        let mut balances = Vec::new();
        for (config, totals) in try_join_all(reads).await? {
            for (asset, total) in assets_of(config).into_iter().zip(totals) {
                let decimals: u8 = asset.decimals.parse().expect("formatted from a u8");
                let available = total.saturating_sub(held(config.chain, &asset.symbol));
                balances.push(Balance {
                    total: Amount::from_raw(total, decimals).to_string(),
                    available: Amount::from_raw(available, decimals).to_string(),
                    symbol: asset.symbol,
                    decimals,
                    kind: asset.kind,
                    chain: asset.chain,
                    contract_address: asset.contract_address,
                });
            }
        }
        Ok(balances)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_coin_then_the_tokens_of_a_chain_file() {
        let chains = Chains::load(None).unwrap();
        let ethereum = assets_of(chains.get(Chain::EthereumMainnet).unwrap());
        let json = serde_json::to_value(&ethereum).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                { "chain": "ETHEREUM_MAINNET", "symbol": "ETH", "decimals": "18", "type": "BASE", "contract_address": "" },
                { "chain": "ETHEREUM_MAINNET", "symbol": "USDC", "decimals": "6", "type": "ERC20",
                  "contract_address": "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48" },
                { "chain": "ETHEREUM_MAINNET", "symbol": "USDT", "decimals": "6", "type": "ERC20",
                  "contract_address": "0xdAC17F958D2ee523a2206206994597C13D831ec7" },
            ])
        );
        let solana = assets_of(chains.get(Chain::SolanaMainnet).unwrap());
        assert_eq!(solana[0].kind, AssetType::Base);
        assert!(solana[1..].iter().all(|a| a.kind == AssetType::SplToken));
    }
}
