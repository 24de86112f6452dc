//! A mint on chain: each chain's sender starts the transfers of its
//! `MINTING` mints (route `MINT`, signed by the issuer) and sends them as
//! any transfer, exactly once under kills and several instances; their
//! settlement moves the mint on (see `store::mint_transfers`).

use crate::{
    config::ChainConfig,
    store::{Issued, Store},
    transfers::SendError,
};

/// The stablecoins the platform issues on `config`'s chain.
fn issued(config: &ChainConfig) -> Vec<Issued> {
    config
        .assets
        .iter()
        .filter(|a| a.issued)
        .map(|a| Issued { symbol: a.symbol.clone(), decimals: a.decimals })
        .collect()
}

/// Creates the transfers of the chain's `MINTING` mints that have none,
/// from the address `issuer` answers; nothing on a chain that issues no
/// stablecoin.
pub async fn start_mints(
    store: &Store,
    config: &ChainConfig,
    issuer: impl FnOnce() -> Result<String, SendError>,
) -> Result<usize, SendError> {
    let issued = issued(config);
    if issued.is_empty() {
        return Ok(0);
    }
    // Until the chain confirms an issued stablecoin's decimals, no mint of
    // the chain starts (see [`super::decimals`]).
    if config.assets.iter().any(|a| a.issued && super::decimals::waiting(config.chain, &a.contract_address)) {
        return Ok(0);
    }
    Ok(store.start_mints(config.chain, &issuer()?, &issued).await?)
}
