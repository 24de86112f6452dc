//! `run`'s reconciliation: every `reconcile_every_secs` each watched
//! address and platform wallet of a chain is reconciled as
//! `reconcile` does it, beside the chain's watcher and under its lease (one
//! instance at a time). A pass is spread over the period in slices of
//! about two hundred addresses ([`slices`]), each read at its own height.
//! Each slice's alarms are kept as it ends ([`alarms`]); the pass's result,
//! when its last slice ends, for `health`, `/metrics` and
//! `GET /operator/v1/reconciliation`, with the period achieved. Nothing is
//! repaired here. Between slices, newly watched addresses' baselines are
//! recorded ([`baselines`]).

use std::{collections::BTreeMap, time::Duration};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{
    ReconcileError, Report, Run, alarms, baselines, evm,
    reader::Reader,
    rules,
    slices::{self, Slice},
    solana,
};
use crate::{
    conditions,
    config::ChainConfig,
    deposits::resource::format_time,
    store::{Store, now_micros},
};

/// The condition `health` shows while passes fail.
pub const FAILING: &str = "reconcile_failing";

/// How long a failed slice waits before it is tried again, at most.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// How often newly watched addresses' baselines are looked for.
const BASELINES_EVERY: Duration = Duration::from_secs(2);

/// Reconciles `config`'s chain every `reconcile_every` until `stop`: the
/// first pass when the last one kept began that long ago (at once on a
/// store that has none), each pass's slices evenly spaced over the period.
pub async fn every(config: ChainConfig, store: Store, stop: CancellationToken) {
    let period = config.reconcile_every;
    let rpc = crate::family::reconcile_reader(&config);
    let idle = Idle { store: &store, rpc: &rpc, config: &config, stop: &stop };
    let mut deferrals = alarms::Deferrals::new();
    let last = store.reconcile_runs(Some(config.chain)).await.ok().and_then(|runs| runs.into_iter().next());
    let mut previous = last.as_ref().map(|run| run.started_micros);
    let mut due = Instant::now() + first_wait(last.as_ref(), period);
    loop {
        if !idle.until(due).await {
            return;
        }
        let mut pass = Pass::begin(&store, &config, previous).await;
        for index in 0..pass.slices {
            let slice = Slice { index, of: pass.slices };
            if !idle.until(pass.started + slice.offset(period)).await
                || !pass.kept(&idle, slice, &mut deferrals).await
            {
                return;
            }
        }
        previous = Some(pass.started_micros);
        due = pass.started + period;
    }
}

/// How long until the first pass: the period less the time since the last
/// pass kept began (none at once).
fn first_wait(last: Option<&Run>, period: Duration) -> Duration {
    last.map_or(Duration::ZERO, |run| {
        let elapsed = now_micros().saturating_sub(run.started_micros).max(0) as u64;
        period.saturating_sub(Duration::from_micros(elapsed))
    })
}

/// What a chain's reconciliation does while it waits: newly watched
/// addresses' baselines recorded, every [`BASELINES_EVERY`].
struct Idle<'a> {
    store: &'a Store,
    rpc: &'a Reader,
    config: &'a ChainConfig,
    stop: &'a CancellationToken,
}

impl Idle<'_> {
    /// Waits until `due`; false when stopped first.
    async fn until(&self, due: Instant) -> bool {
        loop {
            let nap = due.saturating_duration_since(Instant::now()).min(BASELINES_EVERY);
            tokio::select! {
                _ = self.stop.cancelled() => return false,
                _ = tokio::time::sleep(nap) => {}
            }
            tokio::select! {
                _ = self.stop.cancelled() => return false,
                _ = record_baselines(self.store, self.rpc, self.config) => {}
            }
            if Instant::now() >= due {
                return true;
            }
        }
    }
}

impl Reader {
    /// The watched addresses and wallets of `slice`, as `reconcile`
    /// without arguments reads them.
    async fn reconcile(
        &self,
        store: &Store,
        config: &ChainConfig,
        slice: Slice,
    ) -> Result<Report, ReconcileError> {
        let ask = evm::Ask { slice: Some(slice), ..evm::Ask::default() };
        match self {
            Reader::Evm(rpc) => evm::reconcile(store, rpc, config, &ask).await,
            Reader::Solana(rpc) => solana::reconcile(store, rpc, config, &ask).await,
        }
    }
}

/// Records newly watched addresses' baselines; a failure waits for the
/// next try.
async fn record_baselines(store: &Store, rpc: &Reader, config: &ChainConfig) {
    let chain = config.chain;
    let recorded = match rpc {
        Reader::Evm(rpc) => baselines::record_new(store, rpc, config).await,
        Reader::Solana(rpc) => baselines::record_new_solana(store, rpc, config).await,
    };
    match recorded {
        Ok(0) => {}
        Ok(recorded) => debug!(%chain, recorded, "baselines recorded at watch starts"),
        Err(error) => debug!(%chain, %error, "cannot record baselines at watch starts yet"),
    }
}

/// A pass under way: its slices, when it began, and what its slices kept
/// so far.
struct Pass {
    slices: u64,
    started: Instant,
    started_micros: i64,
    /// When the pass before it began, if one was kept.
    previous: Option<i64>,
    tally: Tally,
}

/// The sum of a pass's slices so far.
#[derive(Debug, Clone, Default)]
struct Tally {
    at_block: u64,
    lines: u64,
    differences: Vec<serde_json::Value>,
    failed: Vec<String>,
    skipped: Vec<String>,
    by_asset: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, report: &Report) -> Result<(), ReconcileError> {
        // A slice that compared nothing keeps the height of the one before.
        self.at_block = report.lines.first().map_or(self.at_block.max(report.settled), |l| l.at_block);
        self.lines += report.lines.len() as u64;
        for line in report.lines.iter().filter(|l| l.difference != "0") {
            *self.by_asset.entry(line.asset.clone()).or_default() += 1;
            let line = serde_json::to_value(line)
                .map_err(|e| crate::store::StoreError::Invalid(format!("a reconciled line: {e}")))?;
            self.differences.push(line);
        }
        self.failed.extend(report.failed.iter().cloned());
        self.skipped.extend(report.skipped.iter().cloned());
        Ok(())
    }
}

impl Pass {
    /// A pass over the chain's addresses as they are now, in slices.
    async fn begin(store: &Store, config: &ChainConfig, previous: Option<i64>) -> Self {
        let addresses = match evm::chosen(store, config, &evm::Ask::default()).await {
            Ok(all) => all.len(),
            Err(_) => 0,
        };
        Pass {
            slices: slices::count(addresses, config.reconcile_every),
            started: Instant::now(),
            started_micros: now_micros(),
            previous,
            tally: Tally::default(),
        }
    }

    /// Reconciles `slice` until it is kept, a failure tried again after a
    /// minute (or the period, when shorter); false when stopped first.
    async fn kept(&mut self, idle: &Idle<'_>, slice: Slice, deferrals: &mut alarms::Deferrals) -> bool {
        let (chain, period) = (idle.config.chain, idle.config.reconcile_every);
        loop {
            let tried = tokio::select! {
                _ = idle.stop.cancelled() => return false,
                tried = self.slice(idle, slice, deferrals) => tried,
            };
            match tried {
                Ok(()) => {
                    let _ = conditions::clear(idle.store, Some(chain), FAILING, "reconciliation").await;
                    return true;
                }
                // A watcher that just started: nothing to reconcile yet.
                Err(ReconcileError::NotIndexed(_)) => debug!(%chain, "nothing indexed yet to reconcile"),
                Err(error) => {
                    warn!(%chain, %error, retryable = error.retryable(), "reconciliation failed; trying again");
                    let message = format!("the background reconciliation fails: {error}");
                    if let Err(e) =
                        conditions::raise(idle.store, Some(chain), FAILING, "reconciliation", &message).await
                    {
                        warn!(%chain, error = %e, "cannot record the reconciliation's failure");
                    }
                }
            }
            if !idle.until(Instant::now() + period.min(RETRY_AFTER)).await {
                return false;
            }
        }
    }

    /// One slice reconciled, its alarms kept, and the pass when it is the
    /// last, in one transaction.
    async fn slice(
        &mut self,
        idle: &Idle<'_>,
        slice: Slice,
        deferrals: &mut alarms::Deferrals,
    ) -> Result<(), ReconcileError> {
        let (store, config) = (idle.store, idle.config);
        let report = idle.rpc.reconcile(store, config, slice).await?;
        let debits =
            report.lines.iter().filter(|l| l.difference != "0").flat_map(rules::unexplained_debits).collect();
        // The deferrals change only once the slice is kept: a commit that
        // fails does not start a due debit's wait over.
        let mut waiting = deferrals.clone();
        let debits = alarms::alarmed_now(store, config, (debits, slice), &mut waiting).await?;
        let mut tally = self.tally.clone();
        tally.add(&report)?;
        let now = now_micros();
        let run = match slice.index + 1 == self.slices {
            true => Some(self.run(config, &tally, now)?),
            false => None,
        };
        let new = alarms::keep(store, run.as_ref(), &debits, now).await?;
        alarms::announce(config, &new);
        *deferrals = waiting;
        self.tally = tally;
        if let Some(run) = run {
            self.ended(config, &run);
        }
        Ok(())
    }

    /// The pass as kept when its last slice ends.
    fn run(&self, config: &ChainConfig, tally: &Tally, now: i64) -> Result<Run, ReconcileError> {
        Ok(Run {
            chain: config.chain.as_str().to_string(),
            at: format_time(&crate::store::time(now)?),
            at_micros: now,
            started_micros: self.started_micros,
            took_ms: self.started.elapsed().as_millis() as u64,
            every_ms: config.reconcile_every.as_millis() as u64,
            period_ms: self
                .previous
                .map(|previous| (self.started_micros.saturating_sub(previous).max(0) / 1000) as u64),
            slices: self.slices,
            at_block: tally.at_block,
            lines: tally.lines,
            differ: tally.differences.len() as u64,
            failed: tally.failed.len() as u64,
            skipped: tally.skipped.len() as u64,
            detail: serde_json::json!({
                "differences": tally.differences, "failed": tally.failed, "skipped": tally.skipped,
            }),
        })
    }

    /// Logs the pass and sets the gauge of its differences.
    fn ended(&self, config: &ChainConfig, run: &Run) {
        let (chain, period) = (config.chain, config.reconcile_every);
        info!(%chain, at_block = run.at_block, lines = run.lines, differ = run.differ, failed = run.failed,
            slices = run.slices, took_ms = run.took_ms, period_ms = run.period_ms, "reconciled");
        if Duration::from_millis(run.took_ms) > period {
            warn!(%chain, took_ms = run.took_ms, period_secs = period.as_secs_f64(),
                "a reconciliation took longer than reconcile_every_secs at reconcile_max_rps: the cap wins");
        }
        let mut by_asset: BTreeMap<&str, u64> =
            config.assets.iter().map(|a| (a.symbol.as_str(), 0)).collect();
        by_asset.insert(config.native.symbol.as_str(), 0);
        for (asset, count) in &self.tally.by_asset {
            by_asset.insert(asset.as_str(), *count);
        }
        for (asset, count) in by_asset {
            metrics::gauge!("custody_indexer_reconcile_differences", "chain" => chain.as_str(), "asset" => asset.to_string())
                .set(count as f64);
        }
    }
}
