//! Reorgs: detect them from parent hashes, find the common ancestor among the
//! stored recent hashes, rewind the store to it, and settle the deposits whose
//! blocks were reorged away (`FAILED` unless their transaction reappears).

use std::collections::HashMap;

use alloy::primitives::B256;
use tracing::{error, info, warn};

use super::{rpc::TxStatus, watcher::EvmWatcher};
use crate::{
    deposits::commit,
    deposits::watcher::{Step, WatchError},
    store::{BlockRef, Rewind},
};

impl EvmWatcher {
    /// While no new block arrived: the stored tip must still be canonical.
    pub(super) async fn check_tip(&self, next: u64, head: u64) -> Result<Option<u64>, WatchError> {
        let chain = self.config().chain;
        let Some(tip) = next.checked_sub(1).filter(|tip| *tip <= head) else {
            return Ok(None);
        };
        let stored = self.store().blocks_below(chain, tip, 1).await?;
        let Some(stored) = stored.first().filter(|b| b.number == tip) else {
            return Ok(None);
        };
        let canonical = self.rpc().headers(&[tip]).await?;
        if canonical.first().is_some_and(|h| h.hash.to_string() == stored.hash) {
            return Ok(None);
        }
        self.rewind(next, head).await.map(Some)
    }

    /// The first new block must extend the last stored one.
    pub(super) async fn check_parent(&self, next: u64, first: &BlockRef) -> Result<Option<u64>, WatchError> {
        let chain = self.config().chain;
        let Some(tip) = next.checked_sub(1) else {
            return Ok(None);
        };
        let stored = self.store().blocks_below(chain, tip, 1).await?;
        match stored.first() {
            Some(block) if block.number == tip && block.hash != first.parent_hash => {
                self.rewind(next, first.number).await.map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Finds the highest stored block that is still canonical and rewinds the
    /// store to it. Confirmed deposits above it are never rewritten: they are
    /// reported as an error and counted, for an operator to look at.
    async fn rewind(&self, next: u64, head: u64) -> Result<u64, WatchError> {
        let chain = self.config().chain;
        let window = self.blocks_of(self.config().reorg_window).max(2);
        let stored = self.store().blocks_below(chain, next - 1, window).await?;
        let numbers: Vec<u64> = stored.iter().map(|b| b.number).filter(|n| *n <= head).collect();
        let canonical: HashMap<u64, String> = self
            .rpc()
            .headers(&numbers)
            .await?
            .into_iter()
            .map(|h| (h.number.to(), h.hash.to_string()))
            .collect();
        let ancestor = stored
            .iter()
            .find(|b| canonical.get(&b.number) == Some(&b.hash))
            .map(|b| b.number)
            .ok_or(WatchError::ReorgTooDeep { chain, window, below: next })?;
        let outcome = commit::rewind(
            self.store(),
            Rewind { chain, common_ancestor: ancestor, expected_next: next, scanned_height: next - 1 },
        )
        .await?;
        metrics::counter!("custody_indexer_reorgs_total", "chain" => chain.as_str()).increment(1);
        warn!(%chain, common_ancestor = ancestor, depth = next - 1 - ancestor, orphaned = outcome.orphaned, "reorg: rewound to the common ancestor");
        if outcome.confirmed_affected > 0 {
            metrics::counter!("custody_indexer_deep_reorgs_total", "chain" => chain.as_str()).increment(1);
            error!(%chain, common_ancestor = ancestor, confirmed_deposits = outcome.confirmed_affected,
                "reorg deeper than the confirmation policy: CONFIRMED deposits are in reorged blocks and were left unchanged");
        }
        Ok(ancestor)
    }

    /// Decides the orphans' fate once the chain was scanned up to `scanned`:
    /// a transaction the node no longer knows, or one mined in a scanned block
    /// without producing the deposit again, failed; one still pending fails
    /// after `dropped_after` (blocks, or seconds at the measured block time).
    pub(super) async fn settle_orphans(&self, scanned: u64) -> Result<(), WatchError> {
        let chain = self.config().chain;
        let orphans = self.store().orphans(chain).await?;
        if orphans.is_empty() {
            return Ok(());
        }
        let hashes: Vec<B256> = orphans.iter().filter_map(|o| o.tx_hash.parse().ok()).collect();
        let status = self.rpc().transaction_status(&hashes).await?;
        let grace = self.blocks_of(self.config().dropped_after);
        let failed: Vec<String> = orphans
            .iter()
            .filter(|o| {
                let Ok(hash) = o.tx_hash.parse::<B256>() else {
                    return false;
                };
                // Whatever the node says, the transaction gets the grace: the
                // answer may come from a backend behind the reorg (it knows the
                // transaction in the old block, or not at all), and a
                // transaction that reappears within it revives the deposit.
                let aged = scanned.saturating_sub(o.orphaned_at_block) >= grace;
                match status.get(&hash) {
                    Some(TxStatus::Unknown | TxStatus::Pending) => aged,
                    Some(TxStatus::Mined(n)) => *n <= scanned && aged,
                    None => false,
                }
            })
            .map(|o| o.id.clone())
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        let failed = commit::fail_orphans(self.store(), &failed).await?;
        info!(%chain, failed = failed.len(), "deposits of reorged blocks whose transactions did not reappear are FAILED");
        Ok(())
    }
}
