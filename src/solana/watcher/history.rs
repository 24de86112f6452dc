//! The Solana watcher as the gap scanner sees it (see [`crate::coverage`]).

use solana_commitment_config::CommitmentConfig;

use super::SolanaWatcher;
use crate::{
    deposits::coverage::{self, History},
    deposits::resource::Detected,
    deposits::watch::WatchSet,
    deposits::watcher::WatchError,
};

impl History for SolanaWatcher {
    fn max_range(&self) -> u64 {
        self.config.max_block_range
    }

    /// Slots are searched by the time of the first block at or after them:
    /// skipped slots have no time of their own.
    async fn block_at(&self, time: u64) -> Result<u64, WatchError> {
        let low = self.rpc.first_available_block().await?;
        let high = self.rpc.slot(CommitmentConfig::finalized()).await?;
        let at_or_before = |slot| async move {
            let first = self.rpc.first_block(slot, CommitmentConfig::finalized()).await?;
            let Some(block) = first.filter(|block| *block <= high) else { return Ok(false) };
            Ok(self.rpc.block_time(block).await? <= time)
        };
        coverage::last_at_or_before(low, high, at_or_before).await
    }

    async fn settled(&self) -> Result<Option<u64>, WatchError> {
        Ok(Some(self.rpc.slot(CommitmentConfig::finalized()).await?))
    }

    async fn deposits_for(
        &self,
        addresses: &[(String, String)],
        from: u64,
        to: u64,
    ) -> Result<(Vec<Detected>, Option<u64>), WatchError> {
        let watch = WatchSet::build(addresses.to_vec(), |a| Some(Box::from(a)));
        let finalized = CommitmentConfig::finalized();
        let scanned = self.scan_slots(&watch, from, to, finalized).await?;
        let covered = self.covered_through(from, to, scanned.known(), finalized).await?;
        Ok((scanned.deposits, covered))
    }
}
