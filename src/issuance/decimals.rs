//! The decimals of each issued stablecoin, checked against its contract (its
//! SPL mint) when `run` or `serve` starts. A chain file saying 18 for a
//! 6-decimal contract would mint 10^12 times every wire, so a definite
//! mismatch refuses the start, naming the asset, the file and both numbers.
//! A node that does not answer decides nothing and blocks no start: the
//! asset is checked again in the background, and until it agrees its mints
//! and the transfers that move it (an off-ramp's collect, a refund) wait
//! before they are signed ([`waiting`]).

use std::time::Duration;

use tracing::{error, info, warn};

use super::supply::supply;
use crate::{
    chain::Chain,
    config::{AssetConfig, ChainConfig},
    transfers::held,
};

/// How long the start waits for a node's answer before checking in the
/// background instead.
const AT_START: Duration = Duration::from_secs(10);
/// Between two background checks of an asset whose node did not answer.
const AGAIN: Duration = Duration::from_secs(15);
/// Why an asset's transfers are held back here.
const HELD_FOR: &str = "decimals";

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Agrees,
    /// The contract has `on_chain` decimals, the chain file says otherwise.
    Differs {
        on_chain: u8,
    },
    /// No node answered: nothing is known.
    Unknown(String),
}

/// The verdict on a chain file's `configured` decimals given the chain's
/// answer.
pub fn verdict(configured: u8, answer: Result<u8, String>) -> Verdict {
    match answer {
        Ok(on_chain) if on_chain == configured => Verdict::Agrees,
        Ok(on_chain) => Verdict::Differs { on_chain },
        Err(error) => Verdict::Unknown(error),
    }
}

/// Whether transactions moving `contract` on `chain` wait for its decimals
/// to be verified. An asset this process never checked is not held back:
/// only `run` and `serve` check, before their senders start.
pub fn waiting(chain: Chain, contract: &str) -> bool {
    held::is_held(chain, contract)
}

/// The refusal of a start with `asset`'s decimals wrong in `config`'s file.
fn differs(config: &ChainConfig, asset: &AssetConfig, on_chain: u8) -> anyhow::Error {
    anyhow::anyhow!(
        "asset {} of chain file {}: the file says decimals = {}, and the contract {} on {} has {on_chain}; a \
         mint would create another amount than the wire: correct the chain file",
        asset.symbol,
        config.source.display(),
        asset.decimals,
        asset.contract_address,
        config.chain,
    )
}

/// Checks every issued asset of `configs` at the start; refuses a definite
/// mismatch, and leaves an unanswered one to a background check meanwhile
/// holding its transactions back.
pub async fn verify_at_start<'a>(configs: impl IntoIterator<Item = &'a ChainConfig>) -> anyhow::Result<()> {
    for config in configs {
        for asset in config.assets.iter().filter(|a| a.issued) {
            let answer = tokio::time::timeout(AT_START, supply(config, asset)).await;
            let answer = answer.map_err(|_| format!("no answer in {} s", AT_START.as_secs())).and_then(|a| a);
            match verdict(asset.decimals, answer.map(|read| read.decimals)) {
                Verdict::Agrees => {
                    info!(chain = %config.chain, asset = %asset.symbol, decimals = asset.decimals, "issued asset's decimals verified")
                }
                Verdict::Differs { on_chain } => return Err(differs(config, asset, on_chain)),
                Verdict::Unknown(why) => {
                    warn!(chain = %config.chain, asset = %asset.symbol, %why, "cannot read the issued asset's decimals now: its mints and transfers wait until they are verified");
                    held::hold(config.chain, &asset.contract_address, HELD_FOR);
                    tokio::spawn(verify_later(config.clone(), asset.clone()));
                }
            }
        }
    }
    Ok(())
}

/// Asks again until the chain answers: an agreement frees the asset's
/// transactions; a mismatch keeps them waiting for good, loudly.
async fn verify_later(config: ChainConfig, asset: AssetConfig) {
    loop {
        tokio::time::sleep(AGAIN).await;
        match verdict(asset.decimals, supply(&config, &asset).await.map(|read| read.decimals)) {
            Verdict::Agrees => {
                info!(chain = %config.chain, asset = %asset.symbol, "issued asset's decimals verified: its transactions go on");
                held::release(config.chain, &asset.contract_address, HELD_FOR);
                return;
            }
            Verdict::Differs { on_chain } => {
                let refusal = differs(&config, &asset, on_chain);
                error!(error = %refusal, "the issued asset's transactions wait for good: restart with the chain file corrected");
                held::hold(config.chain, &asset.contract_address, HELD_FOR);
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
    fn only_a_definite_answer_decides() {
        assert_eq!(verdict(6, Ok(6)), Verdict::Agrees);
        assert_eq!(verdict(18, Ok(6)), Verdict::Differs { on_chain: 6 });
        assert_eq!(verdict(6, Ok(18)), Verdict::Differs { on_chain: 18 });
        assert_eq!(
            verdict(6, Err("connection refused".into())),
            Verdict::Unknown("connection refused".into())
        );
    }
}
