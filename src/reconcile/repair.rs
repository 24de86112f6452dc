//! `reconcile --repair`: the credits a reconciliation's decoder found in the
//! blocks where a balance rose unexplained, recorded as the scan that missed
//! them would have recorded them: through the same commit, each once (by
//! transaction and position, so a second repair or a later backfill with
//! traces finds it recorded), `CONFIRMED` (their blocks are at or below the
//! confirmed height reconciled; `PENDING` for the watcher's quorum step
//! when a quorum of providers must agree), with its `deposit_v2` event. Debits are
//! never repaired: money that left an address without the platform stays a
//! difference until someone explains it.

use super::Report;
use crate::{
    config::ChainConfig,
    deposits::commit,
    deposits::resource::{DepositStatus, Detected},
    store::{CursorMove, ScanCommit, Store, StoreError},
};

/// Records the report's missed credits at or below its settled height;
/// the deposits it wrote or changed.
pub async fn credit(
    store: &Store,
    config: &ChainConfig,
    report: &Report,
) -> Result<Vec<(String, DepositStatus)>, StoreError> {
    match commit_of(config, report.settled, settled_missed(report)) {
        Some(commit) => commit::commit_scan(store, &commit).await,
        None => Ok(Vec::new()),
    }
}

/// The report's missed credits at or below its settled height: what a
/// repair may record.
pub fn settled_missed(report: &Report) -> Vec<Detected> {
    report.missed.iter().filter(|d| d.block_number <= report.settled).cloned().collect()
}

/// The commit that records `missed` as a backfill would (its cursor left
/// alone), confirmed through `settled`; none when there is nothing.
pub fn commit_of(config: &ChainConfig, settled: u64, missed: Vec<Detected>) -> Option<ScanCommit> {
    let blocks = missed.iter().map(|d| d.block_number);
    let (from, to) = (blocks.clone().min()?, blocks.max()?);
    Some(ScanCommit {
        chain: config.chain,
        from,
        to,
        head: settled,
        blocks: Vec::new(),
        deposits: missed,
        confirmed_through: config.confirmed_on_scan(Some(settled)),
        cursor: CursorMove::Backfill,
        keep_blocks: 0,
    })
}
