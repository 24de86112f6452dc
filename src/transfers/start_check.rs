//! An asset checked against its chain when `run` or `serve` starts: the one
//! shape of the issued decimals' check (`issuance::decimals`) and the
//! contract code's (`evm::asset_code`). A definite disagreement refuses the
//! start, naming the asset and the file (or, where the check says so, only
//! holds the asset's transfers back, loudly). A node that does not answer
//! decides nothing and blocks no start: the asset's transfers are held
//! back ([`held`]) and it is checked again in the background until the
//! chain answers. Assets are checked all at once, 10 s at most.

use std::{future::Future, time::Duration};

use tracing::{error, info, warn};

use super::held;
use crate::config::{AssetConfig, ChainConfig};

/// How long the start waits for a node's answer before checking in the
/// background instead.
const AT_START: Duration = Duration::from_secs(10);
/// Between two background checks of an asset whose node did not answer.
const AGAIN: Duration = Duration::from_secs(15);

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Agrees,
    /// The chain says the file is wrong: the refusal, for people.
    Disagrees(String),
    /// No node answered: nothing is known.
    Unknown(String),
}

/// What a disagreement found at start does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDisagree {
    Refuse,
    /// Hold the asset's transfers back for good, loudly.
    Hold,
}

/// One kind of check of an asset against its chain.
pub trait AssetCheck: Send + Sync + 'static {
    /// Why the asset's transfers are held while this check holds them.
    const HELD_FOR: &'static str;
    /// What is checked, for the log: `decimals`, `contract code`.
    const WHAT: &'static str;

    fn check(config: &ChainConfig, asset: &AssetConfig) -> impl Future<Output = Verdict> + Send;

    /// What a disagreement found at start does with `config`'s chain.
    fn on_disagree(_config: &ChainConfig) -> OnDisagree {
        OnDisagree::Refuse
    }
}

/// Checks `assets` at once; refuses the first definite disagreement (that
/// refuses), and leaves an unanswered asset to a background check meanwhile
/// holding its transfers back.
pub async fn verify_at_start<C: AssetCheck>(assets: Vec<(&ChainConfig, &AssetConfig)>) -> anyhow::Result<()> {
    // A service started again in the same process (`dev` when a chain
    // joins) judges its assets anew: the checks of the one before end.
    let epoch = {
        let mut starts = STARTS.lock().expect("starts");
        let epoch = starts.entry(C::HELD_FOR).or_default();
        *epoch += 1;
        *epoch
    };
    let verdicts = futures::future::join_all(assets.iter().map(|(config, asset)| async move {
        tokio::time::timeout(AT_START, C::check(config, asset))
            .await
            .unwrap_or_else(|_| Verdict::Unknown(format!("no answer in {} s", AT_START.as_secs())))
    }))
    .await;
    for ((config, asset), verdict) in assets.into_iter().zip(verdicts) {
        let (chain, symbol) = (config.chain, &asset.symbol);
        match verdict {
            Verdict::Agrees => {
                held::release(chain, &asset.contract_address, C::HELD_FOR);
                info!(%chain, asset = %symbol, "the asset's {} agrees with the chain", C::WHAT)
            }
            Verdict::Disagrees(why) if C::on_disagree(config) == OnDisagree::Refuse => {
                return Err(anyhow::anyhow!(why));
            }
            Verdict::Disagrees(why) => {
                warn!(error = %why, "the asset's {} disagrees with the chain: its transfers wait", C::WHAT);
                held::hold(chain, &asset.contract_address, C::HELD_FOR);
            }
            Verdict::Unknown(why) => {
                warn!(%chain, asset = %symbol, %why, "cannot read the asset's {} now: its transfers wait until it is verified", C::WHAT);
                held::hold(chain, &asset.contract_address, C::HELD_FOR);
                tokio::spawn(verify_later::<C>(config.clone(), asset.clone(), epoch));
            }
        }
    }
    Ok(())
}

/// How many times each kind of check verified the assets at a start in
/// this process: a later start ends the background checks of an earlier
/// one of its kind.
static STARTS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<&'static str, u64>>> =
    std::sync::LazyLock::new(Default::default);

/// Asks again until the chain answers (while no later start judged the
/// assets again): an agreement frees the asset's
/// transfers; a disagreement keeps them waiting for good, loudly.
async fn verify_later<C: AssetCheck>(config: ChainConfig, asset: AssetConfig, epoch: u64) {
    loop {
        tokio::time::sleep(AGAIN).await;
        if STARTS.lock().expect("starts").get(C::HELD_FOR) != Some(&epoch) {
            return;
        }
        match C::check(&config, &asset).await {
            Verdict::Agrees => {
                info!(chain = %config.chain, asset = %asset.symbol, "the asset's {} is verified: its transfers go on", C::WHAT);
                held::release(config.chain, &asset.contract_address, C::HELD_FOR);
                return;
            }
            Verdict::Disagrees(why) => {
                error!(error = %why, "the asset's transfers wait for good: restart with the chain file corrected");
                return;
            }
            Verdict::Unknown(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Whether the test check's chain answers.
    static ANSWERS: AtomicBool = AtomicBool::new(false);

    struct Flaky;

    impl AssetCheck for Flaky {
        const HELD_FOR: &'static str = "start_check test";
        const WHAT: &'static str = "test property";

        async fn check(_config: &ChainConfig, _asset: &AssetConfig) -> Verdict {
            if ANSWERS.load(Ordering::SeqCst) { Verdict::Agrees } else { Verdict::Unknown("no node".into()) }
        }
    }

    /// A service started again in one process (`dev` when a chain joins)
    /// whose check now agrees lets the asset's transfers go, though the
    /// first start held them.
    #[tokio::test]
    async fn a_second_start_that_agrees_releases_what_the_first_held() {
        let chains = crate::config::Chains::load(None).unwrap();
        let config = chains.iter().find(|c| !c.assets.is_empty()).unwrap();
        let asset = &config.assets[0];
        verify_at_start::<Flaky>(vec![(config, asset)]).await.unwrap();
        assert!(held::is_held(config.chain, &asset.contract_address), "no answer: held");
        ANSWERS.store(true, Ordering::SeqCst);
        verify_at_start::<Flaky>(vec![(config, asset)]).await.unwrap();
        assert!(!held::is_held(config.chain, &asset.contract_address), "the second start agrees");
    }
}
