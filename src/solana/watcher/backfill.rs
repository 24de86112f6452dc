//! `backfill`: finalized slots, or an address's signature history, read
//! beside `run` without touching the live cursor. Through a load-balanced URL
//! some answers come from a backend behind the chain; each step asks again,
//! a bounded number of times, rather than stop or record less.

use std::{future::Future, time::Duration};

use backon::{ExponentialBuilder, Retryable};
use solana_commitment_config::CommitmentConfig;
use tracing::info;

use super::{PAGE, SolanaWatcher};
use crate::{
    chain::Chain,
    deposits::commit,
    deposits::resource::Detected,
    deposits::watcher::{BackfillReport, WatchError},
    store::{CursorMove, ScanCommit},
};

/// Looks at the confirmed slot, sent at once, before a backfill takes the
/// freshest answer for the chain's head: behind a load-balanced URL each
/// look may reach any backend, so with half of them behind, all sixteen
/// reach one behind once in 65,536 backfills.
const HEAD_LOOKS: usize = 16;

/// How often a step answered by a node behind is asked again: about 20
/// seconds in all, longer than public backends usually lag.
pub(super) fn patience() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(3))
        .with_max_times(10)
}

/// `step` until it succeeds, asked again (within `patience`) while the
/// answer came from a node behind, each time with a log line.
pub(super) async fn patiently<T, F, Fut>(
    chain: Chain,
    step: F,
    patience: ExponentialBuilder,
) -> Result<T, WatchError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, WatchError>>,
{
    step.retry(patience).when(WatchError::is_lagging).notify(log_retry(chain)).await
}

fn log_retry(chain: Chain) -> impl Fn(&WatchError, Duration) {
    move |error, delay| {
        info!(%chain, %error, retry_in_ms = delay.as_millis() as u64, "backfill: an answer came from a node behind the chain; asking again");
    }
}

impl SolanaWatcher {
    /// Scans finalized slots `from..=to` (default: up to the finalized slot)
    /// without touching the live cursor. Idempotent, safe beside `run`. A
    /// range the node no longer holds fails at once, naming its first slot.
    pub async fn backfill_slots(
        &mut self,
        from: u64,
        to: Option<u64>,
        progress: &(dyn Fn(u64, usize) + Sync),
    ) -> Result<BackfillReport, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        let finalized = self.finalized_through(to).await?;
        let to = to.unwrap_or(finalized);
        if from > to {
            return Err(WatchError::EmptyRange { chain, from, to });
        }
        let started = std::time::Instant::now();
        let mut report = BackfillReport { from, to, ..Default::default() };
        let mut start = from;
        while start <= to {
            let end = to.min(start + self.config.max_block_range - 1);
            let (through, deposits) = patiently(chain, || self.backfill_step(start, end), patience()).await?;
            let commit = backfill_commit(chain, start, through, finalized, deposits);
            report.deposits_changed += commit::commit_scan(&self.store, &commit).await?.len();
            report.deposits_found += commit.deposits.len();
            report.blocks += through - start + 1;
            progress(report.blocks, report.deposits_found);
            start = through + 1;
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// The finalized slot, at or above `to`: read again while the answer is
    /// below `to` but a fresher answer showed the chain past it (a backend
    /// behind answered). A `to` above the freshest of [`HEAD_LOOKS`] looks at
    /// the confirmed slot is refused.
    async fn finalized_through(&self, to: Option<u64>) -> Result<u64, WatchError> {
        let chain = self.config.chain;
        self.look_at_head().await?;
        let read = || async {
            let finalized = self.rpc.slot(CommitmentConfig::finalized()).await?;
            match to {
                Some(to) if to > finalized => {
                    Err(WatchError::AboveConfirmed { chain, to, confirmed: finalized })
                }
                _ => Ok(finalized),
            }
        };
        let seen = |to: u64| to <= self.rpc.freshest();
        read.retry(patience())
            .when(|error| match error {
                WatchError::AboveConfirmed { to, .. } => seen(*to),
                error => error.is_lagging(),
            })
            .notify(log_retry(chain))
            .await
    }

    /// The chain's confirmed slot, the freshest of [`HEAD_LOOKS`] answers
    /// asked at once (and of what the store saw): what a backend behind
    /// cannot pass off as the head.
    async fn look_at_head(&self) -> Result<u64, WatchError> {
        if let Some(state) = self.store.chain_state(self.config.chain).await? {
            // The head the live watcher saw.
            self.rpc.saw(state.head);
        }
        let looks = (0..HEAD_LOOKS).map(|_| self.rpc.slot(CommitmentConfig::confirmed()));
        let answers = futures::future::join_all(looks).await;
        if answers.iter().all(Result::is_err) {
            return Err(answers.into_iter().find_map(Result::err).expect("a look").into());
        }
        Ok(self.rpc.freshest())
    }

    /// Reads `start..=end`: how far the answers provably covered, and the
    /// deposits found there.
    async fn backfill_step(&self, start: u64, end: u64) -> Result<(u64, Vec<Detected>), WatchError> {
        let finalized = CommitmentConfig::finalized();
        let scanned = self.scan_slots(&self.watch, start, end, finalized).await?;
        // Only what the answers provably cover; the rest is asked again.
        match self.covered_through(start, end, scanned.known(), finalized).await? {
            Some(through) => Ok((through, scanned.deposits)),
            None => Err(WatchError::Behind { chain: self.config.chain, slot: start }),
        }
    }

    /// Reads an address's signature history (newest first, from `before`
    /// down to `until`, both optional) and records its deposits. Every page
    /// is asked at the freshest slot seen (see [`super::super::rpc::SolanaRpc::signatures`]),
    /// so a backend behind cannot pass a short history off as the whole.
    pub async fn backfill_address(
        &mut self,
        address: &str,
        before: Option<String>,
        until: Option<String>,
        progress: &(dyn Fn(u64, usize) + Sync),
    ) -> Result<BackfillReport, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        // Every page is asked at this slot or later: the history is read as
        // of it, never as of a backend behind.
        let head = self.look_at_head().await?;
        let finalized = self.rpc.slot(CommitmentConfig::finalized()).await?;
        let started = std::time::Instant::now();
        let mut report = BackfillReport { from: head, to: head, ..BackfillReport::default() };
        let mut before = before;
        loop {
            let page = || self.backfill_page(address, before.as_deref(), until.as_deref(), finalized);
            let (commit, listed) = patiently(chain, page, patience()).await?;
            let Some(commit) = commit else { break };
            report.to = report.to.max(commit.to);
            report.from = report.from.min(commit.from);
            report.deposits_changed += commit::commit_scan(&self.store, &commit).await?.len();
            report.deposits_found += commit.deposits.len();
            report.blocks += listed.len() as u64;
            progress(report.blocks, report.deposits_found);
            if listed.len() < PAGE {
                break;
            }
            before = listed.last().cloned();
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// One page of an address's signatures below `before`, decoded: the
    /// commit of its deposits (`None` when the page is empty) and the page's
    /// signatures, newest first.
    async fn backfill_page(
        &self,
        address: &str,
        before: Option<&str>,
        until: Option<&str>,
        finalized: u64,
    ) -> Result<(Option<ScanCommit>, Vec<String>), WatchError> {
        // At the head found at the start, or the newest slot a page listed.
        let page = self.rpc.signatures(address, (before, until), PAGE, 0).await?;
        let (Some(newest), Some(oldest)) = (page.first(), page.last()) else { return Ok((None, Vec::new())) };
        let landed = page.iter().rev().filter(|s| s.err.is_none()).map(|s| s.signature.as_str());
        let deposits = self.decode_signatures(landed, patience()).await?;
        let commit = backfill_commit(self.config.chain, oldest.slot, newest.slot, finalized, deposits);
        Ok((Some(commit), page.into_iter().map(|s| s.signature).collect()))
    }
}

fn backfill_commit(chain: Chain, from: u64, to: u64, finalized: u64, deposits: Vec<Detected>) -> ScanCommit {
    ScanCommit {
        chain,
        from,
        to,
        head: finalized,
        blocks: Vec::new(),
        deposits,
        confirmed_through: Some(finalized),
        cursor: CursorMove::Backfill,
        keep_blocks: 0,
    }
}
