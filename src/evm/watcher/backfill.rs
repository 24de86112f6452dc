//! The EVM watcher over past blocks: `backfill` of a block range, and the
//! reads that find where a late registration's history begins and fill it
//! (see [`crate::coverage`]).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use backon::{ExponentialBuilder, Retryable};
use futures::{StreamExt, TryStreamExt, stream};
use tracing::info;

use super::EvmWatcher;
use crate::evm::ranges;
use crate::{
    deposits::commit,
    deposits::coverage::{self, History},
    deposits::resource::Detected,
    deposits::watch::WatchSet,
    deposits::watcher::{BackfillReport, WatchError},
    store::{CursorMove, ScanCommit, StoreError},
};

impl EvmWatcher {
    /// Scans `from..=to` (default: the confirmed height) into the store without
    /// touching the live cursor. Idempotent: deposits are upserted on their
    /// natural key, so a repeated or overlapping backfill, or one beside a
    /// running `run`, adds nothing twice. Only confirmed blocks are accepted:
    /// reorgs above them are the live watcher's business.
    pub async fn backfill(
        &mut self,
        from: u64,
        to: Option<u64>,
        progress: &(dyn Fn(u64, usize) + Sync),
    ) -> Result<BackfillReport, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        let head = self.rpc.head().await?;
        let confirmed = self.confirmed_height(head).await?.ok_or(WatchError::NothingConfirmed { chain })?;
        let to = to.unwrap_or(confirmed);
        if to > confirmed {
            return Err(WatchError::AboveConfirmed { chain, to, confirmed });
        }
        if from > to {
            return Err(WatchError::EmptyRange { chain, from, to });
        }
        let max = self.config.max_block_range;
        // Each range's size follows the deposits of the last one scanned
        // (see [`super::ranges`]), so a dense chain holds no more in memory
        // than a sparse one.
        let size = AtomicU64::new(ranges::first(self.config.batch_size as u64, max));
        let retry = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_times(8)
            .with_jitter();
        let this = &*self;
        let size_now = &size;
        let ranges = stream::unfold(Some(from), move |start| async move {
            Some(ranges::range_at(start?, size_now.load(Ordering::Relaxed), to))
        });
        let scans = ranges.map(|(start, end)| {
            let scan =
                move || async move { this.scan(&this.watch, start, end).await.map(|s| (start, end, s)) };
            scan.retry(retry).when(WatchError::is_retryable)
        });
        let mut scans = std::pin::pin!(scans.buffered(2));
        let started = std::time::Instant::now();
        let mut report = BackfillReport { from, to, ..Default::default() };
        // Each range is committed while the next ones are fetched: the store
        // and the node work at the same time, and ranges still commit in order.
        let mut next = scans.try_next().await?;
        while let Some((start, end, scanned)) = next {
            size.store(ranges::next(end - start + 1, scanned.deposits.len() as u64, max), Ordering::Relaxed);
            let commit = ScanCommit {
                chain,
                from: start,
                to: end,
                head,
                blocks: Vec::new(),
                deposits: scanned.deposits,
                confirmed_through: this.config.confirmed_on_scan(Some(confirmed)),
                cursor: CursorMove::Backfill,
                keep_blocks: 0,
            };
            let committing = (|| commit::commit_scan(&this.store, &commit))
                .retry(retry)
                .when(|e| matches!(e, StoreError::Query(_)));
            let (changed, fetched) = tokio::join!(committing, scans.try_next());
            let changed = changed?;
            report.blocks += end - start + 1;
            report.deposits_found += commit.deposits.len();
            report.deposits_changed += changed.len();
            progress(report.blocks, report.deposits_found);
            next = fetched?;
        }
        report.elapsed = started.elapsed();
        info!(%chain, from, to, found = report.deposits_found, changed = report.deposits_changed, "backfill done");
        Ok(report)
    }
}

impl History for EvmWatcher {
    fn max_range(&self) -> u64 {
        self.config.max_block_range
    }

    fn scan_confirms(&self) -> bool {
        self.config.confirmed_on_scan(Some(0)).is_some()
    }

    async fn block_at(&self, time: u64) -> Result<u64, WatchError> {
        let head = self.rpc.head().await?;
        let at_or_before = |n| async move { Ok(self.rpc.block_time(n).await? <= time) };
        coverage::last_at_or_before(0, head, at_or_before).await
    }

    async fn settled(&self) -> Result<Option<u64>, WatchError> {
        let head = self.rpc.head().await?;
        self.confirmed_height(head).await
    }

    async fn deposits_for(
        &self,
        addresses: &[(String, String)],
        from: u64,
        to: u64,
    ) -> Result<(Vec<Detected>, Option<u64>), WatchError> {
        let watch = WatchSet::build(addresses.to_vec(), |a| a.parse().ok());
        Ok((self.scan(&watch, from, to).await?.deposits, Some(to)))
    }
}
