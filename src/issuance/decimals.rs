//! The decimals of each issued stablecoin, checked against its contract (its
//! SPL mint) when `run` or `serve` starts. A chain file saying 18 for a
//! 6-decimal contract would mint 10^12 times every wire, so a definite
//! mismatch refuses the start, naming the asset, the file and both numbers.
//! A node that does not answer decides nothing and blocks no start: the
//! asset is checked again in the background, and until it agrees its mints
//! and the transfers that move it (an off-ramp's collect, a refund) wait
//! before they are signed ([`waiting`]).

use super::supply::supply;
use crate::{
    chain::Chain,
    config::{AssetConfig, ChainConfig},
    transfers::{
        held,
        start_check::{self, AssetCheck},
    },
};

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
fn differs(config: &ChainConfig, asset: &AssetConfig, on_chain: u8) -> String {
    format!(
        "asset {} of chain file {}: the file says decimals = {}, and the contract {} on {} has {on_chain}; a \
         mint would create another amount than the wire: correct the chain file",
        asset.symbol,
        config.source.display(),
        asset.decimals,
        asset.contract_address,
        config.chain,
    )
}

/// The check of an issued asset's decimals.
struct Decimals;

impl AssetCheck for Decimals {
    const HELD_FOR: &'static str = "decimals";
    const WHAT: &'static str = "decimals";

    async fn check(config: &ChainConfig, asset: &AssetConfig) -> start_check::Verdict {
        match verdict(asset.decimals, supply(config, asset).await.map(|read| read.decimals)) {
            Verdict::Agrees => start_check::Verdict::Agrees,
            Verdict::Differs { on_chain } => {
                start_check::Verdict::Disagrees(differs(config, asset, on_chain))
            }
            Verdict::Unknown(why) => start_check::Verdict::Unknown(why),
        }
    }
}

/// Checks every issued asset of `configs` at the start (see
/// [`start_check`]): a definite mismatch refuses it.
pub async fn verify_at_start<'a>(configs: impl IntoIterator<Item = &'a ChainConfig>) -> anyhow::Result<()> {
    let assets: Vec<(&ChainConfig, &AssetConfig)> =
        configs.into_iter().flat_map(|c| c.assets.iter().filter(|a| a.issued).map(move |a| (c, a))).collect();
    start_check::verify_at_start::<Decimals>(assets).await
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
