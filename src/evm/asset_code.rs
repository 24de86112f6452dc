//! Whether each EVM asset of a chain file is where the file says: a token
//! contract has bytecode, except a native B20 token, a precompile at an
//! address with no code (Base's Beryl upgrade, 2026-06-25), which the file
//! marks `precompile = true`. A mistyped address has no code either, and
//! its `Transfer` logs would never come, so deposits of the asset would be
//! missed without a word.
//!
//! Checked when `run` or `serve` starts, as an issued asset's decimals are
//! (`issuance::decimals`): an asset with no code and no mark refuses the
//! start, naming the asset, the file and the address; on a local node
//! standing in for the chain (its id overridden by `<CHAIN>_CHAIN_ID`),
//! where the chain's contracts may not be, it only holds the asset's
//! transfers back, loudly. A node that does not
//! answer decides nothing and blocks no start: the asset is checked again
//! in the background, and its transfers wait until its code is found.

use std::time::Duration;

use alloy::{
    primitives::Address,
    providers::{Provider, ProviderBuilder},
};
use tracing::{error, info, warn};

use crate::{
    chain::Family,
    config::{AssetConfig, ChainConfig},
    redact::redact_urls,
    transfers::held,
};

/// How long the start waits for a node's answer before checking in the
/// background instead.
const AT_START: Duration = Duration::from_secs(10);
/// How long one URL is waited for: a node that hangs does not keep the
/// next from being asked.
const PER_URL: Duration = Duration::from_secs(5);
/// Between two background checks of an asset whose node did not answer.
const AGAIN: Duration = Duration::from_secs(15);
/// Why an asset's transfers are held back here.
const HELD_FOR: &str = "asset code";

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
fn no_code(config: &ChainConfig, asset: &AssetConfig) -> anyhow::Error {
    anyhow::anyhow!(
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

/// Checks every asset of the EVM chains of `configs` not marked a
/// precompile, all at once; refuses one without code, and leaves an
/// unanswered one to a background check meanwhile holding its transfers
/// back.
pub async fn verify_at_start<'a>(configs: impl IntoIterator<Item = &'a ChainConfig>) -> anyhow::Result<()> {
    let assets: Vec<(&ChainConfig, &AssetConfig)> = configs
        .into_iter()
        .filter(|c| c.family() == Family::Evm)
        .flat_map(|c| c.assets.iter().filter(|a| !a.precompile).map(move |a| (c, a)))
        .collect();
    let answers = futures::future::join_all(assets.iter().map(|(config, asset)| async move {
        let answer = tokio::time::timeout(AT_START, has_code(config, asset)).await;
        answer.map_err(|_| format!("no answer in {} s", AT_START.as_secs())).and_then(|a| a)
    }))
    .await;
    for ((config, asset), answer) in assets.into_iter().zip(answers) {
        match verdict(asset.precompile, answer) {
            Verdict::Found => {
                info!(chain = %config.chain, asset = %asset.symbol, "asset's contract code found")
            }
            Verdict::NoCode if config.stand_in => {
                let why = no_code(config, asset);
                warn!(error = %why, "the node standing in for the chain lacks the asset's contract: its transfers wait");
                held::hold(config.chain, &asset.contract_address, HELD_FOR);
            }
            Verdict::NoCode => return Err(no_code(config, asset)),
            Verdict::Unknown(why) => {
                warn!(chain = %config.chain, asset = %asset.symbol, %why, "cannot read the asset's contract code now: its transfers wait until it is found");
                held::hold(config.chain, &asset.contract_address, HELD_FOR);
                tokio::spawn(verify_later(config.clone(), asset.clone()));
            }
        }
    }
    Ok(())
}

/// Asks again until the chain answers: code found frees the asset's
/// transfers; none keeps them waiting for good, loudly.
async fn verify_later(config: ChainConfig, asset: AssetConfig) {
    loop {
        tokio::time::sleep(AGAIN).await;
        match verdict(asset.precompile, has_code(&config, &asset).await) {
            Verdict::Found => {
                info!(chain = %config.chain, asset = %asset.symbol, "asset's contract code found: its transfers go on");
                held::release(config.chain, &asset.contract_address, HELD_FOR);
                return;
            }
            Verdict::NoCode => {
                let refusal = no_code(&config, &asset);
                error!(error = %refusal, "the asset's transfers wait for good: restart with the chain file corrected");
                return;
            }
            Verdict::Unknown(_) => {}
        }
    }
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
