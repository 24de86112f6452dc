//! The deposits wing's writes, each one transaction of the store that the
//! flow here holds and commits: a scanned range, a settlement, a rewind, a
//! chain stopped or resumed. On a store handle fenced by the watcher's
//! lease, [`Store::begin`] refuses the transaction with
//! [`StoreError::LeaseLost`] unless the lease still holds, so a watcher
//! that lost its lease writes nothing. A change that announced an event
//! wakes the delivery worker once committed.

use std::time::Duration;

use crate::{
    chain::Chain,
    deposits::resource::DepositStatus,
    store::{ChainStop, QuorumSettlement, Rewind, RewindOutcome, ScanCommit, Store, StoreError, scan_in},
};

/// A deposit whose status a commit set or changed.
pub type Changed = Vec<(String, DepositStatus)>;

/// Commits a scanned range: its deposits, their events, its block hashes,
/// what the policy confirms and the cursor, all in one transaction. A crash
/// before the commit leaves nothing; a crash after it leaves everything, so
/// a restart neither misses nor duplicates a deposit. Returns the deposits
/// whose status this commit set or changed.
pub async fn commit_scan(store: &Store, scan: &ScanCommit) -> Result<Changed, StoreError> {
    let mut tx = store.begin().await?;
    let changed = scan_in(&mut tx, scan).await?;
    tx.commit().await?;
    announced(store, changed)
}

/// Marks orphaned deposits `FAILED`, closing a providers' dispute still
/// open about one as `REORGED`; one seen again in the meantime is left
/// alone. Returns the ids that failed.
pub async fn fail_orphans(store: &Store, ids: &[String]) -> Result<Vec<String>, StoreError> {
    let mut tx = store.begin().await?;
    let failed = store.fail_orphans(&mut tx, ids).await?;
    tx.commit().await?;
    if !failed.is_empty() {
        store.wake_deliveries();
    }
    Ok(failed)
}

/// Settles pending deposits at once: `confirmed` become `CONFIRMED`,
/// `failed` (their block never became final) `FAILED`.
pub async fn settle(store: &Store, confirmed: &[String], failed: &[String]) -> Result<Changed, StoreError> {
    let mut tx = store.begin().await?;
    let changed = store.settle(&mut tx, confirmed, failed).await?;
    tx.commit().await?;
    announced(store, changed)
}

/// Confirms the pending deposits of blocks up to `through` outside a scan
/// (when the finalized block moves while no new block arrives).
pub async fn confirm_through(store: &Store, chain: Chain, through: u64) -> Result<Changed, StoreError> {
    let mut tx = store.begin().await?;
    let changed = store.confirm_through(&mut tx, chain, through).await?;
    tx.commit().await?;
    announced(store, changed)
}

/// Undoes the blocks above the common ancestor in one transaction: their
/// hashes are dropped, their pending deposits are set aside as orphans,
/// the cursor moves back, and the reorg is recorded.
pub async fn rewind(store: &Store, rewind: Rewind) -> Result<RewindOutcome, StoreError> {
    let mut tx = store.begin().await?;
    let outcome = store.rewind(&mut tx, rewind).await?;
    tx.commit().await?;
    Ok(outcome)
}

/// Stops `chain`'s watcher on every instance. Under the handle's fence
/// when it has one: only the watcher's current holder stops its chain, so
/// a holder that lost its lease stops nothing. A chain already stopped
/// stays stopped as it was (its first reason stands).
pub async fn stop_chain(
    store: &Store,
    chain: Chain,
    kind: &str,
    reason: &str,
    instance: &str,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    store.stop_chain(&mut tx, chain, kind, reason, instance).await?;
    Ok(tx.commit().await?)
}

/// Ends the stop in force on `chain`, recording `by` and the time: the
/// instances run its watcher again. The stop it ended, `None` when the
/// chain was not stopped.
pub async fn resume_chain(store: &Store, chain: Chain, by: &str) -> Result<Option<ChainStop>, StoreError> {
    let mut tx = store.begin().await?;
    let resumed = store.resume_chain(&mut tx, chain, by).await?;
    tx.commit().await?;
    Ok(resumed)
}

/// Confirms and fails what a quorum step decided and records its
/// disputes, in one transaction; a deposit no longer pending, or no longer
/// in the block the providers were asked about (a backfill or a rescan
/// moved it meanwhile), is left alone. A dispute still open ends with its
/// deposit. Returns the deposits changed and the disputes seen for the
/// first time.
pub async fn settle_on_quorum(
    store: &Store,
    settlement: &QuorumSettlement,
) -> Result<(Changed, Vec<String>), StoreError> {
    let mut tx = store.begin().await?;
    let (changed, new) = store.settle_on_quorum(&mut tx, settlement).await?;
    tx.commit().await?;
    Ok((announced(store, changed)?, new))
}

/// Records a successful step of a chain's watcher. `block_time`, when
/// measured, is kept; an unmeasured one leaves the earlier measure.
pub async fn record_check(
    store: &Store,
    chain: Chain,
    head: u64,
    indexed: u64,
    block_time: Option<Duration>,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    store.record_check(&mut tx, chain, head, indexed, block_time).await?;
    Ok(tx.commit().await?)
}

/// Records a failed step for `health`; `message` must already be free of
/// secrets.
pub async fn record_failure(
    store: &Store,
    chain: Chain,
    kind: &str,
    message: &str,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    store.record_failure(&mut tx, chain, kind, message).await?;
    Ok(tx.commit().await?)
}

/// `changed`, the delivery worker woken when any change was announced.
fn announced(store: &Store, changed: Changed) -> Result<Changed, StoreError> {
    if !changed.is_empty() {
        store.wake_deliveries();
    }
    Ok(changed)
}
