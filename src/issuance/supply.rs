//! An issued stablecoin as the chain holds it now: its supply and its
//! decimals (ERC-20 `totalSupply` and `decimals` on EVM, the SPL mint's
//! supply and decimals on Solana, `confirmed`). The chain file's RPC URLs
//! are tried in turn.

pub use crate::family::seam::OnChain;
use crate::{
    config::{AssetConfig, ChainConfig},
    family,
    redact::redact_urls,
};

/// The supply and decimals of `asset` on `config`'s chain; the last node's
/// error when none answers, its URLs redacted (an RPC URL may hold a key,
/// and the error is printed).
pub async fn supply(config: &ChainConfig, asset: &AssetConfig) -> Result<OnChain, String> {
    let mut last = "the chain file lists no RPC URL".to_string();
    for url in &config.rpc_urls {
        let url = url.expose().as_str();
        match family::of(config.family()).supply(url, &asset.contract_address).await {
            Ok(supply) => return Ok(supply),
            Err(error) => last = redact_urls(&error),
        }
    }
    Err(last)
}
