//! What every chain family's watcher shares: its errors, the outcome of a
//! step, and the loop that follows a chain until shutdown.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{clock::BlockClock, commit};
use crate::{
    alarm::Alarms,
    chain::Chain,
    redact::RpcUrl,
    rpc::{Cause, RpcFailure},
    solana::decode::UnreadableTransaction,
    store::{Store, StoreError},
};

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Rpc(RpcFailure),
    /// A transaction (or a slot holding one) this release cannot read: the
    /// node refused to serve its version (`-32015`), or the decoder does not
    /// know its version or encoding. Retryable on purpose: skipping it could
    /// skip a deposit, and a fatal error stops the chain until an operator
    /// resumes it; the cause may also be one backend of a load-balanced URL. So
    /// the watcher keeps its cursor before the slot, backs off and asks
    /// again, counted under `unsupported_version` and unhealthy, until the
    /// node serves the transaction or a release that reads it is running.
    #[error("{chain}: {unreadable}; retrying, the cursor stays")]
    UnsupportedVersion { chain: Chain, unreadable: Box<UnreadableTransaction> },
    #[error("{chain}: rpc {url} serves cluster {actual}, expected {expected}; refusing to index it")]
    WrongCluster { chain: Chain, url: String, expected: String, actual: String },
    #[error(
        "{chain}: slot {slot} holds a block the node cannot return ({message}); retrying, the cursor stays"
    )]
    SlotUnavailable { chain: Chain, slot: u64, message: String },
    #[error("{chain}: transaction {signature} is listed but not served yet; retrying, the cursor stays")]
    NotServedYet { chain: Chain, signature: String },
    /// The node no longer holds the slot: its ledger starts at
    /// `first_available` (`getFirstAvailableBlock`). The slots below are
    /// unread, never taken for skipped. `run` waits and warns, the cursor
    /// kept; `backfill` fails at once.
    #[error(
        "{chain}: slot {slot} is below slot {first_available}, the first the RPC node still holds (its ledger is pruned); the slots below it are unread, not skipped: use an archive RPC node, or start at slot {first_available} or later"
    )]
    Pruned { chain: Chain, slot: u64, first_available: u64 },
    #[error("{chain}: no answer covers slot {slot} yet (the answering node is behind); retrying")]
    Behind { chain: Chain, slot: u64 },
    /// The node's head is below what is indexed already (through a fresher
    /// node, or before a restart on a node that fell behind): a step reads
    /// nothing until it catches up, which a stalled node never does.
    #[error(
        "{chain}: the rpc node's head {head} is below block {indexed}, indexed already: the node lags behind the chain; waiting for it"
    )]
    HeadBehind { chain: Chain, head: u64, indexed: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{chain}: rpc {url} answers chain id {actual}, expected {expected}; refusing to index it")]
    WrongChain { chain: Chain, url: String, expected: u64, actual: u64 },
    #[error("{chain}: no rpc url answered")]
    Unreachable { chain: Chain },
    #[error("{chain}: blocks changed while they were read ({detail}); scanning again")]
    Inconsistent { chain: Chain, detail: String },
    #[error(
        "{chain}: reorg deeper than the {window} stored block hashes below block {below}; indexing stopped"
    )]
    ReorgTooDeep { chain: Chain, window: u64, below: u64 },
    #[error(
        "{chain}: backfill --to {to} is above the confirmed height {confirmed}; newer blocks are indexed by `run`"
    )]
    AboveConfirmed { chain: Chain, to: u64, confirmed: u64 },
    #[error("{chain}: no block is confirmed yet; nothing to backfill")]
    NothingConfirmed { chain: Chain },
    #[error("{chain}: backfill range {from}..={to} is empty")]
    EmptyRange { chain: Chain, from: u64, to: u64 },
}

impl WatchError {
    /// Whether a later attempt can succeed without an operator. Every RPC
    /// failure counts: nodes lag, rate-limit and return garbage for a while,
    /// and the watcher backs off rather than stopping the chain.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            WatchError::Rpc(_)
                | WatchError::UnsupportedVersion { .. }
                | WatchError::SlotUnavailable { .. }
                | WatchError::NotServedYet { .. }
                | WatchError::Pruned { .. }
                | WatchError::Behind { .. }
                | WatchError::HeadBehind { .. }
                | WatchError::Store(
                    StoreError::Raced(_)
                        | StoreError::Elsewhere(_)
                        | StoreError::LeaseLost(_)
                        | StoreError::Query(_)
                )
                | WatchError::Unreachable { .. }
                | WatchError::Inconsistent { .. }
        )
    }
}

impl WatchError {
    /// Whether the error is a node behind the chain answering (through a
    /// load-balanced URL: one backend of several): asking again, a moment
    /// later, reaches a node that has the data. `backfill` retries these.
    pub fn is_lagging(&self) -> bool {
        match self {
            WatchError::Rpc(failure) => failure.kind == "behind",
            WatchError::SlotUnavailable { .. }
            | WatchError::NotServedYet { .. }
            | WatchError::Behind { .. }
            | WatchError::HeadBehind { .. }
            | WatchError::AboveConfirmed { .. } => true,
            _ => false,
        }
    }

    /// A short label of what failed, for the `kind` label of
    /// `custody_indexer_rpc_errors_total` and the health report.
    pub fn kind(&self) -> &'static str {
        match self {
            WatchError::Rpc(failure) => failure.kind,
            WatchError::UnsupportedVersion { .. } => "unsupported_version",
            WatchError::SlotUnavailable { .. } | WatchError::NotServedYet { .. } => "missing_data",
            WatchError::Pruned { .. } => "pruned",
            WatchError::Behind { .. } | WatchError::HeadBehind { .. } => "behind",
            WatchError::Store(_) => "store",
            WatchError::WrongCluster { .. } | WatchError::WrongChain { .. } => "wrong_chain",
            WatchError::Unreachable { .. } => "unreachable",
            WatchError::Inconsistent { .. } => "inconsistent",
            WatchError::ReorgTooDeep { .. } => "reorg_too_deep",
            WatchError::AboveConfirmed { .. }
            | WatchError::NothingConfirmed { .. }
            | WatchError::EmptyRange { .. } => "invalid_range",
        }
    }
}

impl From<RpcFailure> for WatchError {
    fn from(failure: RpcFailure) -> Self {
        match failure.cause {
            Cause::Unreadable(unreadable) => {
                WatchError::UnsupportedVersion { chain: failure.chain, unreadable }
            }
            _ => WatchError::Rpc(failure),
        }
    }
}

/// What one step of the live watcher did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// Indexed `from..=to` with the chain at `head`; `caught_up` when `to` is the head.
    Scanned { from: u64, to: u64, head: u64, deposits: usize, caught_up: bool },
    /// Nothing new since the last step: everything up to `indexed` is indexed.
    Idle { head: u64, indexed: u64 },
    /// A reorg was undone down to the common ancestor.
    Reorged { common_ancestor: u64 },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillReport {
    pub from: u64,
    pub to: u64,
    pub blocks: u64,
    /// Deposits found in the range, new or already known.
    pub deposits_found: usize,
    /// Deposits this backfill created or changed.
    pub deposits_changed: usize,
    /// Time spent scanning and committing the range.
    pub elapsed: Duration,
}

/// Asks every RPC URL of a chain who it is (`identify`: chain id, genesis
/// hash). A URL answering `expected` counts; one answering anything else
/// refuses the whole chain (`mismatch`); one that does not answer stays as a
/// fallback. At least one URL must answer.
pub async fn verify_endpoints<T, E, Fut>(
    chain: Chain,
    urls: &[RpcUrl],
    expected: &T,
    identify: impl Fn(RpcUrl) -> Fut,
    mismatch: impl Fn(String, T) -> WatchError,
) -> Result<(), WatchError>
where
    T: PartialEq,
    E: std::fmt::Display,
    Fut: Future<Output = Result<T, E>>,
{
    let mut verified = 0;
    for url in urls {
        match identify(url.clone()).await {
            Ok(actual) if actual == *expected => verified += 1,
            Ok(actual) => return Err(mismatch(url.to_string(), actual)),
            Err(error) => warn!(%chain, %url, %error, "rpc url did not answer; kept as a fallback"),
        }
    }
    if verified == 0 {
        return Err(WatchError::Unreachable { chain });
    }
    Ok(())
}

impl Tick {
    /// `(head, indexed)` after the step, when the step knows them.
    fn progress(&self) -> Option<(u64, u64)> {
        match *self {
            Tick::Scanned { to, head, .. } => Some((head, to)),
            Tick::Idle { head, indexed } => Some((head, indexed)),
            Tick::Reorged { .. } => None,
        }
    }
}

/// One step of a live watcher.
pub trait Step {
    fn chain(&self) -> Chain;
    fn store(&self) -> &Store;
    fn poll_interval(&self) -> Duration;
    /// The chain's block time as this run measured it (see
    /// [`BlockClock::measured`]), for the settings in seconds that count
    /// blocks; `None` until measured.
    fn set_block_time(&mut self, block_time: Option<Duration>);
    fn step(&mut self) -> impl Future<Output = Result<Tick, WatchError>> + Send;
}

/// Follows a chain until `shutdown`: steps immediately while behind, waits for
/// the poll interval (or a `wake` notification) when caught up, and backs off
/// exponentially on transient errors. Returns an error only for what needs an
/// operator. A step cut short by shutdown rolls back: every commit is atomic.
pub async fn follow<S: Step>(
    mut watcher: S,
    shutdown: CancellationToken,
    wake: Arc<Notify>,
) -> Result<(), WatchError> {
    let chain = watcher.chain();
    let mut delays = backoff();
    let mut recorded: Option<Instant> = None;
    let mut alarms = Alarms::default();
    let key = format!("{chain} watcher");
    let mut behind_since: Option<Instant> = None;
    let mut clock = BlockClock::new(earlier_block_time(watcher.store(), chain).await);
    let started = Instant::now();
    info!(%chain, "watcher started");
    loop {
        let step = tokio::select! {
            _ = shutdown.cancelled() => break,
            step = watcher.step() => step,
        };
        let step =
            step.and_then(|tick| ahead_of_node(chain, tick, &mut behind_since, watcher.poll_interval()));
        if let Some((head, _)) = step.as_ref().ok().and_then(Tick::progress) {
            clock.observe(started.elapsed(), head);
            // What this run measured: an earlier run's figure may be from
            // before the chain sped up, and would keep too little history.
            watcher.set_block_time(clock.measured());
        }
        record(&watcher, &step, &mut recorded, clock.block_time()).await;
        if step.is_ok() {
            alarms.clear(&key, &format!("{chain}: the watcher progresses again"));
        }
        let wait = match step {
            Ok(Tick::Scanned { caught_up: false, .. } | Tick::Reorged { .. }) => {
                delays = backoff();
                continue;
            }
            Ok(_) => {
                delays = backoff();
                watcher.poll_interval()
            }
            Err(error @ WatchError::HeadBehind { .. }) => {
                // Asked again at the poll interval: the node may catch up soon.
                let message = format!("{chain}: the watcher cannot progress, retrying: {error}");
                alarms.raise(&key, error.kind(), &message);
                watcher.poll_interval()
            }
            Err(WatchError::Store(
                StoreError::Raced(reason) | StoreError::Elsewhere(reason) | StoreError::LeaseLost(reason),
            )) => {
                // Another instance on the same store indexed this range first.
                debug!(%chain, reason, "range already indexed elsewhere");
                delays = backoff();
                watcher.poll_interval()
            }
            Err(error) if error.is_retryable() => {
                let delay = delays.next().unwrap_or(Duration::from_secs(60));
                // A lasting failure is logged once a minute, not at every retry.
                let message = format!("{chain}: the watcher cannot progress, retrying: {error}");
                if !alarms.raise(&key, error.kind(), &message).logged() {
                    debug!(%chain, %error, retry_in_ms = delay.as_millis() as u64, "step failed; retrying");
                }
                delay
            }
            Err(error) => return Err(error),
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
            _ = wake.notified() => {}
        }
    }
    info!(%chain, "watcher stopped");
    Ok(())
}

/// The waits between failed steps: from half a second to a minute.
fn backoff() -> backon::ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(60))
        .without_max_times()
        .with_jitter()
        .build()
}

/// Idle steps whose node's head stays below what is indexed for ten poll
/// intervals are an error ([`WatchError::HeadBehind`]): not a success, so
/// `health` sees it. Shorter, it is one backend of a load-balanced URL a
/// block or two behind, which the next answer makes up for.
fn ahead_of_node(
    chain: Chain,
    tick: Tick,
    since: &mut Option<Instant>,
    poll_interval: Duration,
) -> Result<Tick, WatchError> {
    match tick {
        Tick::Idle { head, indexed } if indexed > head => {
            let since = since.get_or_insert_with(Instant::now);
            if since.elapsed() < poll_interval * 10 {
                return Ok(tick);
            }
            Err(WatchError::HeadBehind { chain, head, indexed })
        }
        tick => {
            *since = None;
            Ok(tick)
        }
    }
}

/// The block time an earlier run measured, until this one measures its own.
async fn earlier_block_time(store: &Store, chain: Chain) -> Option<Duration> {
    match store.chain_health().await {
        Ok(rows) => rows.into_iter().find(|r| r.chain == chain).and_then(|r| r.block_time),
        Err(error) => {
            debug!(%chain, %error, "no earlier block time read");
            None
        }
    }
}

/// Records a step's outcome in the store for health checks (a success at most
/// once a second while catching up) and counts failures by kind.
async fn record<S: Step>(
    watcher: &S,
    step: &Result<Tick, WatchError>,
    recorded: &mut Option<Instant>,
    block_time: Option<Duration>,
) {
    let chain = watcher.chain();
    let result = match step {
        Ok(tick) => {
            let Some((head, indexed)) = tick.progress() else { return };
            let idle = matches!(tick, Tick::Idle { .. } | Tick::Scanned { caught_up: true, .. });
            if !idle && recorded.is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
                return;
            }
            *recorded = Some(Instant::now());
            metrics::gauge!("custody_indexer_last_success_timestamp_seconds", "chain" => chain.as_str())
                .set(chrono::Utc::now().timestamp() as f64);
            commit::record_check(watcher.store(), chain, head, indexed, block_time).await
        }
        Err(WatchError::Store(
            StoreError::Raced(_) | StoreError::Elsewhere(_) | StoreError::LeaseLost(_),
        )) => {
            return;
        }
        Err(error) => {
            let kind = error.kind();
            metrics::counter!("custody_indexer_rpc_errors_total", "chain" => chain.as_str(), "kind" => kind)
                .increment(1);
            commit::record_failure(watcher.store(), chain, kind, &error.to_string()).await
        }
    };
    if let Err(error) = result {
        warn!(%chain, error = %error, "cannot record the watcher's health");
    }
}
