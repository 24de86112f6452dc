//! Confirmation on a quorum of providers (`confirm_quorum` above 1): each
//! pending deposit at or below the confirmed height is asked of every RPC
//! URL on its own (its block's hash, and the deposit found again in that
//! block by the watcher's own decoder), and confirmed, failed or left
//! waiting by [`crate::deposits::quorum::verdict`].

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
};

use alloy::{
    primitives::{Address, B256},
    rpc::types::BlockNumberOrTag,
};
use futures::future::join_all;
use tracing::{error, info, warn};

use super::EvmWatcher;
use crate::{
    config::Confirmation,
    deposits::{
        quorum::{Answer, Claimed, Decision, Dispute, NOT_ON_QUORUM, verdict},
        watch::WatchSet,
        watcher::WatchError,
    },
    evm::{
        decode::{self, BlockInput},
        rpc::{EvmRpc, RpcFailure},
    },
    store::QuorumSettlement,
};

/// The condition `health` shows while deposits wait for providers that
/// do not answer.
pub const QUORUM_WAITING: &str = "quorum_waiting";

/// Each RPC URL of the chain with a client of its own, the URL as logs
/// show it (without its secrets), and whether deposits wait on silent ones.
pub(super) struct Providers {
    each: Vec<(String, EvmRpc)>,
    waiting: AtomicBool,
}

impl Providers {
    pub(super) fn of(config: &crate::config::ChainConfig) -> Self {
        let each =
            config.rpc_urls.iter().map(|url| (url.to_string(), EvmRpc::single(config.chain, url))).collect();
        // A condition an earlier process left is cleared at the first step.
        Providers { each, waiting: AtomicBool::new(true) }
    }
}

impl EvmWatcher {
    /// Settles the pending deposits of blocks up to `through` on the
    /// providers' agreement, in one transaction with their disputes.
    pub(super) async fn confirm_on_quorum(&self, through: u64) -> Result<(), WatchError> {
        let chain = self.config.chain;
        let claimed = self.store.claimed_through(chain, through).await?;
        if claimed.is_empty() {
            return self.waiting_on(0, Vec::new()).await;
        }
        let mut by_block: BTreeMap<(u64, String), Vec<Claimed>> = BTreeMap::new();
        for c in claimed {
            by_block.entry((c.block_number, c.block_hash.clone())).or_default().push(c);
        }
        let mut settlement = QuorumSettlement::default();
        let (mut silent, mut waiting) = (Vec::new(), 0);
        for ((number, _), deposits) in &by_block {
            let asked = self.providers.each.iter().map(|(url, rpc)| async move {
                let answers = self.evidence(rpc, *number, deposits).await.unwrap_or_else(|failure| {
                    warn!(%chain, url, block = number, %failure, "quorum: the provider did not answer");
                    vec![Answer::Silent; deposits.len()]
                });
                (url.clone(), answers)
            });
            let by_url = join_all(asked).await;
            for (i, deposit) in deposits.iter().enumerate() {
                let answers: Vec<(String, Answer)> =
                    by_url.iter().map(|(u, a)| (u.clone(), a[i].clone())).collect();
                let only: Vec<Answer> = answers.iter().map(|(_, a)| a.clone()).collect();
                let judged = verdict(&deposit.block_hash, &only, self.config.confirm_quorum);
                silent.extend(answers.iter().filter(|(_, a)| *a == Answer::Silent).map(|(u, _)| u.clone()));
                match judged.decision {
                    Decision::Confirm => {
                        settlement.confirmed.push((deposit.id.clone(), deposit.block_hash.clone()))
                    }
                    Decision::Fail => {
                        settlement.failed.push((deposit.id.clone(), deposit.block_hash.clone()))
                    }
                    Decision::Wait => waiting += 1,
                }
                if judged.disputed {
                    settlement.disputes.push(Dispute::new(deposit, &answers, judged.decision));
                }
            }
        }
        self.settle_quorum(&settlement).await?;
        self.waiting_on(waiting, silent).await
    }

    /// Raises `health`'s condition while `waiting` deposits wait and some
    /// URLs (`silent`) did not answer; clears it once none waits on them.
    async fn waiting_on(&self, waiting: usize, mut silent: Vec<String>) -> Result<(), WatchError> {
        let chain = self.config.chain;
        silent.sort();
        silent.dedup();
        if waiting > 0 && !silent.is_empty() {
            let message = format!(
                "{waiting} deposits wait for a quorum of {} providers: no answer from {}",
                self.config.confirm_quorum,
                silent.join(", ")
            );
            warn!(%chain, waiting, ?silent, "quorum: confirmation waits for providers that did not answer");
            self.store.raise_condition(Some(chain), QUORUM_WAITING, "confirmation", &message).await?;
            self.providers.waiting.store(true, Ordering::SeqCst);
        } else if self.providers.waiting.swap(false, Ordering::SeqCst) {
            self.store.clear_condition(Some(chain), QUORUM_WAITING, "confirmation").await?;
        }
        Ok(())
    }

    /// Commits a quorum step's settlement, and says what it found.
    async fn settle_quorum(&self, settlement: &QuorumSettlement) -> Result<(), WatchError> {
        let chain = self.config.chain;
        let (changed, new) = self.store.settle_on_quorum(settlement).await?;
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

    /// What the provider behind `rpc` answers about `deposits`, all of
    /// block `number`: each one's [`Answer`], in order.
    async fn evidence(
        &self,
        rpc: &EvmRpc,
        number: u64,
        deposits: &[Claimed],
    ) -> Result<Vec<Answer>, RpcFailure> {
        // Each URL vouches only for what its own chain holds final.
        let vouched = match self.config.confirmation {
            Confirmation::Depth(depth) => rpc.head().await?.checked_sub(depth),
            Confirmation::Finalized => rpc.tagged(BlockNumberOrTag::Finalized).await?,
        };
        if vouched.is_none_or(|height| height < number) {
            return Ok(vec![Answer::Behind; deposits.len()]);
        }
        let blocks = rpc.blocks(number, number).await?;
        let Some(block) = blocks.first() else {
            return Ok(vec![Answer::Behind; deposits.len()]);
        };
        let hash = block.hash.to_string();
        if deposits.iter().all(|d| d.block_hash != hash) {
            return Ok(vec![Answer::Serves { hash, holds: false }; deposits.len()]);
        }
        // Receipts only of the block's own transactions, and each the
        // block's: one from another fork is no answer, never an absence.
        let in_block: Vec<(B256, B256)> = deposits
            .iter()
            .filter_map(|d| d.tx_hash.parse::<B256>().ok())
            .filter(|tx| block.transactions.iter().any(|t| t.hash == *tx))
            .map(|tx| (tx, block.hash))
            .collect();
        let hashes: Vec<B256> = in_block.iter().map(|(tx, _)| *tx).collect();
        let receipts = if hashes.is_empty() { Vec::new() } else { rpc.receipts(&hashes).await? };
        decode::check_receipts(&in_block, &receipts)
            .map_err(|detail| rpc.missing("eth_getTransactionReceipt", detail))?;
        let succeeded = decode::succeeded(&receipts);
        let logs = match self.contracts.is_empty() {
            true => Vec::new(),
            false => {
                rpc.logs_by_hash(&[block.hash], &self.contracts, decode::transfer_topic()).await?.concat()
            }
        };
        // A deposit found in a call trace (by a reconciliation's repair,
        // say) is looked for in the traces, whatever `traces` says.
        let traced = !self.assets.native_logged(number)
            && (self.config.traces || deposits.iter().any(|d| d.position.starts_with("trace:")));
        let traces = if traced { Some(rpc.traces(block.hash).await?) } else { None };
        let watch = WatchSet::build(
            deposits.iter().map(|d| (d.address.clone(), d.account_id.clone())).collect(),
            |a: &str| a.parse::<Address>().ok(),
        );
        let input = BlockInput { block, succeeded: &succeeded, logs: &logs, traces: traces.as_deref() };
        let found = decode::deposits_in_block(self.config.chain, &input, &watch, &self.assets);
        Ok(deposits
            .iter()
            .map(|d| {
                let holds = found.iter().any(|f| {
                    f.tx_hash == d.tx_hash
                        && f.position.key() == d.position
                        && f.account_address.eq_ignore_ascii_case(&d.address)
                        && f.currency_symbol == d.symbol
                        && f.amount.raw().to_string() == d.amount_raw
                });
                Answer::Serves { hash: hash.clone(), holds }
            })
            .collect())
    }
}
