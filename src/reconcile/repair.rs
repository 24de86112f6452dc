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
    deposits::resource::DepositStatus,
    store::{CursorMove, ScanCommit, Store, StoreError},
};

/// Records the report's missed credits at or below its settled height;
/// the deposits it wrote or changed.
pub async fn credit(
    store: &Store,
    config: &ChainConfig,
    report: &Report,
) -> Result<Vec<(String, DepositStatus)>, StoreError> {
    let missed: Vec<_> = report.missed.iter().filter(|d| d.block_number <= report.settled).cloned().collect();
    let blocks = missed.iter().map(|d| d.block_number);
    let (Some(from), Some(to)) = (blocks.clone().min(), blocks.max()) else { return Ok(Vec::new()) };
    let commit = ScanCommit {
        chain: config.chain,
        from,
        to,
        head: report.settled,
        blocks: Vec::new(),
        deposits: missed,
        confirmed_through: config.confirmed_on_scan(Some(report.settled)),
        cursor: CursorMove::Backfill,
        keep_blocks: 0,
    };
    store.commit_scan(&commit).await
}
