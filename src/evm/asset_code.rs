//! Whether each EVM asset of a chain file is where the file says: a token
//! contract has bytecode, except a native B20 token, a precompile at an
//! address with no code (Base's Beryl upgrade, 2026-06-25), which the file
//! marks `precompile = true`. A mistyped address has no code either, and
//! its `Transfer` logs would never come, so deposits of the asset would be
//! missed without a word.
//!
//! Checked when `run` or `serve` starts, as an issued asset's decimals are
//! (`transfers::start_check`): an asset with no code and no mark refuses
//! the start, naming the asset, the file and the address; on a local node
//! standing in for the chain (its id overridden by `<CHAIN>_CHAIN_ID`),
//! where the chain's contracts may not be, it only holds the asset's
//! transfers back, loudly. A node that does not answer decides nothing and
//! blocks no start: the asset is checked again in the background, and its
//! transfers wait until its code is found.

use std::time::Duration;

use alloy::{
    primitives::Address,
    providers::{Provider, ProviderBuilder},
};

use crate::{
    chain::Family,
    config::{AssetConfig, ChainConfig},
    redact::redact_urls,
    transfers::start_check::{self, AssetCheck, OnDisagree},
};

/// How long one URL is waited for: a node that hangs does not keep the
/// next from being asked.
const PER_URL: Duration = Duration::from_secs(5);

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Code at the address, or no code where the file says precompile.
    Found,
    /// No code, and the file does not mark the asset a precompile.
    NoCode,
    /// No node answered: nothing is known.
    Unknown(String),
}

/// The verdict on an asset (`precompile` as its file marks it) given
/// whether the chain holds code at its address.
pub fn verdict(precompile: bool, has_code: Result<bool, String>) -> Verdict {
    match has_code {
        Ok(true) => Verdict::Found,
        Ok(false) if precompile => Verdict::Found,
        Ok(false) => Verdict::NoCode,
        Err(error) => Verdict::Unknown(error),
    }
}

/// The refusal of a start with `asset` at an address without code.
fn no_code(config: &ChainConfig, asset: &AssetConfig) -> String {
    format!(
        "asset {} of chain file {}: {} on {} holds no code; a token contract has code, and a native B20 \
         token (a precompile) is marked precompile = true: correct the address or mark it",
        asset.symbol,
        config.source.display(),
        asset.contract_address,
        config.chain,
    )
}

/// Whether `config`'s chain holds code at `asset`'s address: the first
/// node that answers decides; the last node's error when none does.
async fn has_code(config: &ChainConfig, asset: &AssetConfig) -> Result<bool, String> {
    let address: Address = asset.contract_address.parse().map_err(|e| format!("{e}"))?;
    let mut last = "the chain file lists no RPC URL".to_string();
    for url in &config.rpc_urls {
        let provider = match url.expose().as_str().parse() {
            Ok(url) => ProviderBuilder::new().connect_http(url),
            Err(e) => {
                last = format!("{e}");
                continue;
            }
        };
        match tokio::time::timeout(PER_URL, provider.get_code_at(address)).await {
            Ok(Ok(code)) => return Ok(!code.is_empty()),
            Ok(Err(error)) => last = redact_urls(&error.to_string()),
            Err(_) => last = format!("no answer in {} s", PER_URL.as_secs()),
        }
    }
    Err(last)
}

/// The check of an asset's contract code.
struct Code;

impl AssetCheck for Code {
    const HELD_FOR: &'static str = "asset code";
    const WHAT: &'static str = "contract code";

    async fn check(config: &ChainConfig, asset: &AssetConfig) -> start_check::Verdict {
        match verdict(asset.precompile, has_code(config, asset).await) {
            Verdict::Found => start_check::Verdict::Agrees,
            Verdict::NoCode => start_check::Verdict::Disagrees(no_code(config, asset)),
            Verdict::Unknown(why) => start_check::Verdict::Unknown(why),
        }
    }

    /// A local node standing in for the chain may lack the chain's
    /// contracts: there the asset's transfers only wait.
    fn on_disagree(config: &ChainConfig) -> OnDisagree {
        if config.stand_in { OnDisagree::Hold } else { OnDisagree::Refuse }
    }
}

/// Checks every asset of the EVM chains of `configs` not marked a
/// precompile (see [`start_check`]).
pub async fn verify_at_start<'a>(configs: impl IntoIterator<Item = &'a ChainConfig>) -> anyhow::Result<()> {
    let assets: Vec<(&ChainConfig, &AssetConfig)> = configs
        .into_iter()
        .filter(|c| c.family() == Family::Evm)
        .flat_map(|c| c.assets.iter().filter(|a| !a.precompile).map(move |a| (c, a)))
        .collect();
    start_check::verify_at_start::<Code>(assets).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_code_refuses_only_an_asset_not_marked_a_precompile() {
        for (precompile, answer, expected) in [
            (false, Ok(true), Verdict::Found),
            (true, Ok(true), Verdict::Found),
            (true, Ok(false), Verdict::Found),
            (false, Ok(false), Verdict::NoCode),
            (false, Err("timed out".to_string()), Verdict::Unknown("timed out".into())),
        ] {
            assert_eq!(verdict(precompile, answer.clone()), expected, "{precompile} {answer:?}");
        }
    }
}
