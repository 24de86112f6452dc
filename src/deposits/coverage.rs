//! Registered means watched: where a chain's first live scan begins, and the
//! background scan of the blocks an address registered later missed.
//!
//! An address is watched from its watch start (its registration resolved to
//! a block by block time, or the block it was registered with). A chain's
//! first live scan begins at the earliest watch start of its addresses, made
//! durable before the scan. An address registered while the live cursor is
//! already past its watch start has that gap scanned here, in the background,
//! only in blocks the chain's policy already confirms (so no reorg can change
//! what the gap scan recorded); the live watcher is never held back.

use std::{future::Future, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::{
    chain::Chain,
    deposits::commit,
    deposits::resource::Detected,
    deposits::watcher::{Step, WatchError},
    store::{ChainState, CursorMove, Gap, ScanCommit, Store, StoreError},
};

/// How far before its registration an address's watch begins: block times
/// and the registering host's clock may disagree by this much.
pub const CLOCK_MARGIN_SECS: u64 = 120;

/// Registrations resolved to blocks per round of the gap scanner.
const RESOLVE_BATCH: u32 = 64;

/// What the gap scanner needs of a chain family's watcher, beyond a step.
pub trait History: Step + Send + Sync {
    /// Most blocks (slots) per gap scan step.
    fn max_range(&self) -> u64;
    /// Whether a scan confirms the deposits it records at or below the
    /// settled height; not when a quorum of providers must agree first.
    fn scan_confirms(&self) -> bool {
        true
    }
    /// The last block (slot) whose time is at or before `time` (seconds since
    /// the epoch), or the first available one when none is.
    fn block_at(&self, time: u64) -> impl Future<Output = Result<u64, WatchError>> + Send;
    /// The highest block (slot) the chain's confirmation policy settles.
    fn settled(&self) -> impl Future<Output = Result<Option<u64>, WatchError>> + Send;
    /// Deposits to `addresses` (`(address, account_id)`) in `from..=to`, and
    /// the last block (slot) the answers provably covered: a backend behind
    /// may answer for less than asked (`None`: nothing).
    fn deposits_for(
        &self,
        addresses: &[(String, String)],
        from: u64,
        to: u64,
    ) -> impl Future<Output = Result<(Vec<Detected>, Option<u64>), WatchError>> + Send;
}

/// The block a registration time (microseconds) is watched from.
pub async fn resolve<H: History>(history: &H, registered_at: i64) -> Result<u64, WatchError> {
    let seconds = (registered_at.max(0) / 1_000_000) as u64;
    history.block_at(seconds.saturating_sub(CLOCK_MARGIN_SECS)).await
}

/// The live cursor of a chain, created on its first start at the earliest
/// watch start of its addresses (or `configured`, when lower; or the head
/// when nothing is registered) before anything is scanned.
pub async fn live_cursor<H: History>(
    history: &H,
    configured: Option<u64>,
    head: u64,
) -> Result<ChainState, WatchError> {
    let (chain, store) = (history.chain(), history.store());
    if let Some(state) = store.chain_state(chain).await? {
        return Ok(state);
    }
    let seen = store.accounts_version().await?;
    let starts = store.watch_start(chain).await?;
    let resolved = match starts.earliest_time {
        Some(time) => Some(resolve(history, time).await?),
        None => None,
    };
    let registered = starts.earliest_block.into_iter().chain(resolved).min();
    let start = registered.into_iter().chain(configured).min().unwrap_or(head).min(head);
    info!(%chain, start, head, "first start: indexing from the earliest watch start");
    Ok(start_cursor(store, chain, start, head, seen).await?)
}

/// Makes a chain's starting point durable before its first scan: the
/// cursor row is created at `start` (unless another process created one
/// first), and the addresses registered so far without a block are
/// stamped with it, since they were registered at or after it. A crash
/// before the first commit then restarts from the same block. Only the
/// addresses of versions up to `seen` (those the start was computed from)
/// are stamped; later ones are resolved by time.
pub async fn start_cursor(
    store: &Store,
    chain: Chain,
    start: u64,
    head: u64,
    seen: i64,
) -> Result<ChainState, StoreError> {
    let mut tx = store.begin().await?;
    store.start_cursor(&mut tx, chain, start, head, seen).await?;
    tx.commit().await?;
    store.chain_state(chain).await?.ok_or_else(|| StoreError::Elsewhere(format!("no {chain} cursor")))
}

/// Scans the gaps of late-registered addresses until `shutdown`. Errors are
/// logged and retried: a gap is only ever moved in the transaction of the
/// deposits found in it.
pub async fn fill_gaps<H: History>(history: H, shutdown: CancellationToken) {
    let chain = history.chain();
    let mut failures = 0u32;
    let mut alarms = crate::alarm::Alarms::default();
    let key = format!("{chain} gap scan");
    loop {
        // A step cut short by shutdown rolls back: its commit is atomic.
        let step = tokio::select! {
            _ = shutdown.cancelled() => return,
            step = step(&history) => step,
        };
        if step.is_ok() {
            alarms.clear(&key, &format!("{chain}: the gap scan progresses again"));
        }
        let wait = match step {
            Ok(true) => {
                failures = 0;
                continue;
            }
            Ok(false) => {
                failures = 0;
                history.poll_interval().max(Duration::from_secs(1))
            }
            Err(WatchError::Store(StoreError::Raced(reason) | StoreError::Elsewhere(reason))) => {
                debug!(%chain, reason, "gap scanned elsewhere");
                Duration::ZERO
            }
            // Another instance holds the chain now: its scan goes on, this
            // one asks again at the pace of a poll, not at once.
            Err(WatchError::Store(StoreError::LeaseLost(reason))) => {
                debug!(%chain, reason, "the chain's lease was taken over");
                history.poll_interval().max(Duration::from_secs(1))
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                let delay = Duration::from_millis(500u64.saturating_mul(1 << failures.min(7)));
                // A lasting failure is logged once a minute, not at every retry.
                let message =
                    format!("{chain}: the scan of late-registered addresses' gaps fails, retrying: {error}");
                if !alarms.raise(&key, error.kind(), &message).logged() {
                    debug!(%chain, %error, retry_in_ms = delay.as_millis() as u64, "gap scan failed; retrying");
                }
                delay
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One step: resolve registrations to blocks, then scan the lowest gap as far
/// as the chain has settled. `Ok(true)` when there is more to do at once.
async fn step<H: History>(history: &H) -> Result<bool, WatchError> {
    let (chain, store) = (history.chain(), history.store());
    for registered_at in store.unresolved_registrations(chain, RESOLVE_BATCH).await? {
        let block = resolve(history, registered_at).await?;
        let mut tx = store.begin().await?;
        let addresses = store.resolve_watch_start(&mut tx, chain, registered_at, block).await?;
        tx.commit().await.map_err(StoreError::from)?;
        debug!(%chain, registered_at, block, addresses, "watch start resolved");
    }
    let Some(gap) = store.next_gap(chain).await? else { return Ok(false) };
    let Some(settled) = history.settled().await? else { return Ok(false) };
    let to = (gap.live_from - 1).min(gap.from.saturating_add(history.max_range() - 1)).min(settled);
    if to < gap.from {
        return Ok(false);
    }
    scan(history, &gap, to, settled).await
}

/// Scans a gap through `to` at most, and commits as far as the answers
/// covered; `Ok(false)` when they covered nothing.
async fn scan<H: History>(history: &H, gap: &Gap, to: u64, settled: u64) -> Result<bool, WatchError> {
    let chain = history.chain();
    let (mut deposits, covered) = history.deposits_for(&gap.addresses, gap.from, to).await?;
    let Some(to) = covered.map(|c| c.min(to)) else { return Ok(false) };
    name_sources(history, &mut deposits).await?;
    let commit = ScanCommit {
        chain,
        from: gap.from,
        to,
        head: settled,
        blocks: Vec::new(),
        deposits,
        confirmed_through: history.scan_confirms().then_some(settled),
        cursor: CursorMove::Gap {
            live_from: gap.live_from,
            addresses: gap.addresses.iter().map(|(address, _)| address.clone()).collect(),
        },
        keep_blocks: 0,
    };
    let changed = commit::commit_scan(history.store(), &commit).await?;
    let (addresses, found) = (gap.addresses.len(), commit.deposits.len());
    info!(%chain, from = gap.from, to, addresses, found, changed = changed.len(), "scanned a registration gap");
    Ok(true)
}

/// A gap is decoded against its own addresses only: a transfer from another
/// watched address is named here, as a live scan would have named it (the
/// store then keeps it only within the receiver's organization).
async fn name_sources<H: History>(history: &H, deposits: &mut [Detected]) -> Result<(), WatchError> {
    let unnamed: Vec<String> =
        deposits.iter().filter(|d| d.source_account_id.is_none()).map(|d| d.source_address.clone()).collect();
    if unnamed.is_empty() {
        return Ok(());
    }
    let known = history.store().accounts_at(history.chain(), &unnamed).await?;
    for deposit in deposits.iter_mut().filter(|d| d.source_account_id.is_none()) {
        deposit.source_account_id = known.get(&deposit.source_address).cloned();
    }
    Ok(())
}

/// The largest `n` in `low..=high` with `at_or_before(n)`, or `low` when
/// none is; `at_or_before` must be true up to some point and false after it.
pub async fn last_at_or_before<F, Fut>(low: u64, high: u64, at_or_before: F) -> Result<u64, WatchError>
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<bool, WatchError>>,
{
    let (mut low, mut high) = (low, high);
    if !at_or_before(low).await? {
        return Ok(low);
    }
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if at_or_before(mid).await? {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    Ok(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finds_the_last_block_at_or_before_a_time() {
        // Block n has time 100 + 12n.
        let search = |target: u64| {
            last_at_or_before(0, 1000, move |n| async move { Ok::<_, WatchError>(100 + 12 * n <= target) })
        };
        assert_eq!(search(100).await.unwrap(), 0);
        assert_eq!(search(111).await.unwrap(), 0);
        assert_eq!(search(112).await.unwrap(), 1);
        assert_eq!(search(100 + 12 * 700 + 5).await.unwrap(), 700);
        assert_eq!(search(u64::MAX).await.unwrap(), 1000);
        // Before the first block: the first block.
        assert_eq!(search(50).await.unwrap(), 0);
    }
}
