//! A quorum step, for either family: each pending deposit at or below the
//! settled height is asked of every RPC URL on its own, judged by
//! [`super::deposit_verdict`], and confirmed, failed or left waiting in one
//! transaction with the disputes found. The family says what one URL
//! answers about a block's deposits ([`Evidence`]).

use std::{
    collections::BTreeMap,
    future::Future,
    sync::atomic::{AtomicBool, Ordering},
};

use futures::future::join_all;
use tracing::{error, info, warn};

use super::{Answer, Claimed, Decision, Dispute, NOT_ON_QUORUM, deposit_verdict, reference_hash};
use crate::{
    chain::Chain,
    deposits::{commit, watcher::WatchError},
    rpc::RpcFailure,
    store::{QuorumSettlement, Store},
};

/// The condition `health` shows while deposits wait for providers that
/// do not answer.
pub const QUORUM_WAITING: &str = "quorum_waiting";

/// Each RPC URL of the chain with a client of its own `R`, the URL as logs
/// show it (without its secrets), and whether deposits wait on silent ones.
pub struct Providers<R> {
    each: Vec<(String, R)>,
    waiting: AtomicBool,
}

impl<R> Providers<R> {
    /// One client per URL of `config`, made by `client`.
    pub fn of(config: &crate::config::ChainConfig, client: impl Fn(&crate::redact::RpcUrl) -> R) -> Self {
        let each = config.rpc_urls.iter().map(|url| (url.to_string(), client(url))).collect();
        // A condition an earlier process left is cleared at the first step.
        Providers { each, waiting: AtomicBool::new(true) }
    }
}

/// What one URL's client answers about `deposits`, all recorded at
/// height `number`: each one's [`Answer`], in order. An error is no
/// answer from that URL (every deposit waits on it).
pub trait Evidence<R> {
    fn evidence(
        &self,
        rpc: &R,
        number: u64,
        deposits: &[Claimed],
    ) -> impl Future<Output = Result<Vec<Answer>, RpcFailure>> + Send;
}

/// The chain, store and quorum a step runs with.
pub struct Quorum<'a> {
    pub chain: Chain,
    pub store: &'a Store,
    pub quorum: usize,
}

/// Settles the pending deposits of heights up to `through` on the
/// providers' agreement, in one transaction with their disputes.
pub async fn confirm_on_quorum<R, E: Evidence<R>>(
    at: Quorum<'_>,
    providers: &Providers<R>,
    family: &E,
    through: u64,
) -> Result<(), WatchError> {
    let chain = at.chain;
    let claimed = at.store.claimed_through(chain, through).await?;
    if claimed.is_empty() {
        return waiting_on(&at, providers, 0, Vec::new()).await;
    }
    let mut by_block: BTreeMap<(u64, String), Vec<Claimed>> = BTreeMap::new();
    for c in claimed {
        by_block.entry((c.block_number, c.block_hash.clone())).or_default().push(c);
    }
    let mut settlement = QuorumSettlement::default();
    let (mut silent, mut waiting) = (Vec::new(), 0);
    for ((number, _), deposits) in &by_block {
        let asked = providers.each.iter().map(|(url, rpc)| async move {
            let answers = match family.evidence(rpc, *number, deposits).await {
                Ok(answers) if answers.len() == deposits.len() => answers,
                Ok(answers) => {
                    warn!(%chain, url, block = number, answered = answers.len(), asked = deposits.len(),
                        "quorum: the provider answered for another number of deposits: no answer");
                    vec![Answer::Silent; deposits.len()]
                }
                Err(failure) => {
                    warn!(%chain, url, block = number, %failure, "quorum: the provider did not answer");
                    vec![Answer::Silent; deposits.len()]
                }
            };
            (url.clone(), answers)
        });
        let by_url = join_all(asked).await;
        for (i, deposit) in deposits.iter().enumerate() {
            let answers: Vec<(String, Answer)> =
                by_url.iter().map(|(u, a)| (u.clone(), a[i].clone())).collect();
            let only: Vec<Answer> = answers.iter().map(|(_, a)| a.clone()).collect();
            let judged_by = reference_hash(&deposit.block_hash, &only);
            let judged = deposit_verdict(&judged_by, &only, at.quorum);
            silent.extend(answers.iter().filter(|(_, a)| *a == Answer::Silent).map(|(u, _)| u.clone()));
            // Pinned to the hash recorded: a deposit moved meanwhile is left alone.
            let pinned = (deposit.id.clone(), deposit.block_hash.clone());
            match judged.decision {
                Decision::Confirm => settlement.confirmed.push(pinned),
                Decision::Fail => settlement.failed.push(pinned),
                Decision::Wait => waiting += 1,
            }
            if judged.disputed {
                settlement.disputes.push(Dispute::new(deposit, &judged_by, &answers, judged.decision));
            }
        }
    }
    settle(&at, &settlement).await?;
    waiting_on(&at, providers, waiting, silent).await
}

/// Raises `health`'s condition while `waiting` deposits wait and some
/// URLs (`silent`) did not answer; clears it once none waits on them.
async fn waiting_on<R>(
    at: &Quorum<'_>,
    providers: &Providers<R>,
    waiting: usize,
    mut silent: Vec<String>,
) -> Result<(), WatchError> {
    let chain = at.chain;
    silent.sort();
    silent.dedup();
    if waiting > 0 && !silent.is_empty() {
        let message = format!(
            "{waiting} deposits wait for a quorum of {} providers: no answer from {}",
            at.quorum,
            silent.join(", ")
        );
        warn!(%chain, waiting, ?silent, "quorum: confirmation waits for providers that did not answer");
        crate::conditions::raise(at.store, Some(chain), QUORUM_WAITING, "confirmation", &message).await?;
        providers.waiting.store(true, Ordering::SeqCst);
    } else if providers.waiting.swap(false, Ordering::SeqCst) {
        crate::conditions::clear(at.store, Some(chain), QUORUM_WAITING, "confirmation").await?;
    }
    Ok(())
}

/// Commits a quorum step's settlement, and says what it found.
async fn settle(at: &Quorum<'_>, settlement: &QuorumSettlement) -> Result<(), WatchError> {
    let chain = at.chain;
    let (changed, new) = commit::settle_on_quorum(at.store, settlement).await?;
    if !new.is_empty() {
        metrics::counter!("custody_indexer_provider_disputes_total", "chain" => chain.as_str())
            .increment(new.len() as u64);
    }
    for dispute in settlement.disputes.iter().filter(|d| new.contains(&d.deposit_id)) {
        let answers: Vec<String> =
            dispute.answers.iter().map(|a| format!("{}: {}", a.url, a.answered)).collect();
        error!(%chain, deposit = dispute.deposit_id, block = dispute.block_number,
            transaction = dispute.transaction_hash, outcome = dispute.outcome.as_str(), ?answers,
            "providers disagree about a deposit");
    }
    for (id, _) in settlement.failed.iter().filter(|(id, _)| changed.iter().any(|(c, _)| c == id)) {
        error!(%chain, deposit = id, reason = NOT_ON_QUORUM, "a deposit no quorum of providers holds is FAILED");
    }
    if !changed.is_empty() {
        info!(%chain, settled = changed.len(), "deposits settled on a quorum of providers");
    }
    Ok(())
}
