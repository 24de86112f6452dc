//! Confirmation on a quorum of providers (`confirm_quorum` above 1): each
//! pending deposit at or below the confirmed height is asked of every RPC
//! URL on its own (its block's hash, and the deposit found again in that
//! block by the watcher's own decoder), and confirmed, failed or left
//! waiting by [`crate::deposits::quorum::verdict`].

use alloy::{
    primitives::{Address, B256},
    rpc::types::BlockNumberOrTag,
};

use super::EvmWatcher;
use crate::{
    config::Confirmation,
    deposits::{
        quorum::{self, Answer, Claimed, Evidence, Quorum},
        watch::WatchSet,
        watcher::WatchError,
    },
    evm::{
        decode::{self, BlockInput},
        rpc::{EvmRpc, RpcFailure},
    },
};

/// Each RPC URL of the chain with a client of its own.
pub(super) type Providers = quorum::Providers<EvmRpc>;

pub(super) fn providers(config: &crate::config::ChainConfig) -> Providers {
    Providers::of(config, |url| EvmRpc::single(config.chain, url))
}

impl EvmWatcher {
    /// Settles the pending deposits of blocks up to `through` on the
    /// providers' agreement, in one transaction with their disputes.
    pub(super) async fn confirm_on_quorum(&self, through: u64) -> Result<(), WatchError> {
        let at = Quorum { chain: self.config.chain, store: &self.store, quorum: self.config.confirm_quorum };
        quorum::confirm_on_quorum(at, &self.providers, self, through).await
    }
}

impl Evidence<EvmRpc> for EvmWatcher {
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
            .map(|d| Answer::Serves { hash: hash.clone(), holds: found.iter().any(|f| d.is(f)) })
            .collect())
    }
}
