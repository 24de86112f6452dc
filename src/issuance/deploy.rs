//! `issuance deploy`: places the platform's stablecoin on a test chain, the
//! issuer key its only minter, and answers the chain-file lines that list
//! it as issued. On EVM it deploys `contracts/Stablecoin.sol` (the gas
//! sponsor pays); on Solana it creates an SPL Token mint whose mint
//! authority is the issuer (the sponsor pays the rent and the fee). Mainnet
//! chains are refused: a production stablecoin is deployed by the issuer's
//! own audited process, and then marked `issued = true` by hand.

use anyhow::{Context, bail};

pub use crate::family::seam::Coin;
use crate::{
    chain::Chain,
    config::ChainConfig,
    family::{self, keys::key_address},
    keys::{KeyRef, Signer},
};

/// Where it was placed, and the `[[assets]]` lines naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    pub contract_address: String,
    pub toml: String,
}

/// Places `coin` on `config`'s chain with the issuer as minter.
pub async fn deploy(config: &ChainConfig, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<Deployed> {
    if config.chain.is_mainnet() || Chain::mainnet_network(config.chain_id, config.genesis_hash.as_deref()) {
        bail!(
            "issuance deploy places test stablecoins: {} is a mainnet. Deploy a production stablecoin with your \
             own audited process (a minter role you can rotate, cap and pause, its key held apart from the \
             service's hot mnemonic), then mark it `issued = true` in the chain file",
            config.chain
        );
    }
    let url = config.rpc_urls.first().context("the chain file lists no RPC URL")?.expose().as_str();
    let placed = family::of(config.family()).deploy(url, signer, coin).await?;
    let (contract_address, extra) = (placed.contract_address, placed.extra_toml);
    let toml = format!(
        "[[assets]]\nsymbol = \"{}\"\ncontract_address = \"{contract_address}\"\ndecimals = {}\n{extra}issued = true\n",
        coin.symbol, coin.decimals
    );
    Ok(Deployed { contract_address, toml })
}

/// The issuer's address on `chain`.
pub fn issuer(chain: Chain, signer: &dyn Signer) -> anyhow::Result<String> {
    Ok(key_address(signer, chain.family(), KeyRef::Issuer)?)
}
