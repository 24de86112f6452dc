//! Operator health: whether the store answers and every chain's watcher keeps
//! up. Computed from what the watchers record in the store, so `/readyz` of
//! `run`, `/readyz` of a separate `serve` and `custody-indexer health` agree.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{
    chain::Chain,
    config::{Chains, Span},
    deposits::resource::{rfc3339, rfc3339_opt},
    environment::Environment,
    store::{ChainHealth, ChainStop, Condition, Store, StoreError, WorkerKind, WorkerLease},
};

/// Kinds of watcher error that no retry cures while the setup stays as it
/// is (a node that pruned the range, one of another chain, one refusing a
/// method the indexer needs): a chain whose last step failed so is
/// unhealthy at once, without waiting for it to turn stale.
const SETUP_ERRORS: [&str; 3] = ["pruned", "wrong_chain", "method_unsupported"];

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub healthy: bool,
    /// The environment the store was first started in (`sandbox` or
    /// `production`); `null` before any `run` or `serve` started it.
    pub environment: Option<Environment>,
    /// Why the whole service is unhealthy, beyond each chain's problems.
    pub problems: Vec<String>,
    /// What needs an operator's eye but leaves the service ready: an
    /// unfunded gas sponsor, a tenant's failing webhook, a chain's failing
    /// step not stale yet. Never a reason for `healthy: false`.
    pub warnings: Vec<String>,
    /// The conditions the senders and delivery workers raised and that
    /// still hold (see [`crate::alarm`]).
    pub conditions: Vec<Condition>,
    pub store: StoreReport,
    pub chains: Vec<ChainReport>,
    #[serde(serialize_with = "rfc3339")]
    pub checked_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StoreReport {
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChainReport {
    pub chain: Chain,
    pub status: ChainStatus,
    pub healthy: bool,
    /// Why the chain is unhealthy; empty when healthy.
    pub problems: Vec<String>,
    /// What is wrong without making the chain unhealthy (yet): a failing
    /// step retried, an unfunded gas sponsor.
    pub warnings: Vec<String>,
    pub head: Option<u64>,
    pub indexed: Option<u64>,
    pub lag: Option<u64>,
    /// The most blocks the indexed height may trail the head: the chain
    /// file's `max_lag_blocks`, or its `max_lag_secs` at the measured block
    /// time (`null` until the block time is measured).
    pub max_lag_blocks: Option<u64>,
    /// The chain file's `max_lag_secs`, when the limit is written so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lag_seconds: Option<f64>,
    /// The chain's block time as its watcher measured it over the last ten
    /// minutes (milliseconds, rounded).
    pub block_time_ms: Option<u64>,
    #[serde(serialize_with = "rfc3339_opt")]
    pub last_success_at: Option<DateTime<Utc>>,
    pub stale_after_seconds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(serialize_with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<DateTime<Utc>>,
    /// Addresses registered after the live cursor passed their watch start,
    /// whose earlier blocks are still being scanned (or resolved).
    pub addresses_catching_up: u64,
    /// The lowest block (slot) still to scan for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catching_up_from: Option<u64>,
    /// Which instance runs the chain's live watcher and its transfer
    /// sender: their leases (one instance holds each at a time).
    pub workers: Vec<WorkerReport>,
    /// The stop in force: the chain's watcher met an error no retry cures
    /// and runs nowhere until an operator runs `chains resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<ChainStop>,
    /// The last background reconciliation (EVM chains).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconciled: Option<crate::reconcile::Reconciled>,
}

/// A chain's state at a glance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChainStatus {
    Healthy,
    Unhealthy,
    /// Its watcher is stopped until `chains resume`.
    Stopped,
}

impl ChainStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChainStatus::Healthy => "healthy",
            ChainStatus::Unhealthy => "UNHEALTHY",
            ChainStatus::Stopped => "STOPPED",
        }
    }
}

impl ChainReport {
    /// The lag limit for a reader: `100` (blocks), `1500 = 300 s`, or
    /// `300 s` while the block time is not measured.
    pub fn lag_limit(&self) -> String {
        match (self.max_lag_blocks, self.max_lag_seconds) {
            (Some(blocks), None) => blocks.to_string(),
            (Some(blocks), Some(seconds)) => format!("{blocks} = {seconds} s"),
            (None, Some(seconds)) => format!("{seconds} s"),
            (None, None) => "-".into(),
        }
    }

    /// Marks the chain stopped: unhealthy whatever its watcher recorded
    /// last, the stop first among its problems.
    fn stopped(&mut self, stop: ChainStop) {
        let at = stop.stopped_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let problem = format!(
            "STOPPED at {at} by {}: {}; resume with `custody-indexer chains resume {}`",
            stop.instance, stop.reason, self.chain
        );
        self.problems.insert(0, problem);
        self.healthy = false;
        self.status = ChainStatus::Stopped;
        self.stop = Some(stop);
    }
}

/// A singleton worker of a chain and the instance running it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    /// `WATCHER` or `SENDER`.
    pub kind: WorkerKind,
    /// The instance holding the lease, or that held it last.
    pub instance: String,
    /// Grows with every takeover.
    pub epoch: i64,
    /// Whether the lease is live; a lapsed one awaits a takeover.
    pub held: bool,
    #[serde(serialize_with = "rfc3339")]
    pub until: DateTime<Utc>,
}

/// Checks the store and the chains: `required` ones when given (a chain with
/// no recorded step is unhealthy), else every configured chain a watcher has
/// reported on.
pub async fn check(store: &Store, chains: &Chains, required: &[Chain]) -> Report {
    match gather(store, chains, required, Utc::now()).await {
        Ok(report) => report,
        Err(error) => unreachable(error),
    }
}

/// [`check`], failing when the store cannot be read.
async fn gather(
    store: &Store,
    chains: &Chains,
    required: &[Chain],
    now: DateTime<Utc>,
) -> Result<Report, StoreError> {
    let recorded = store.chain_health().await?;
    let mut reports = assessed(&recorded, chains, required, now);
    let leases = store.worker_leases().await?;
    let mut stops = store.chain_stops().await?;
    let environment = store.environment().await?;
    // Conditions are warnings: failing to read them (a store not yet
    // migrated by a newer release, a row a newer release wrote) is one more
    // warning, never a reason to be unready.
    let (conditions, unread) = match store.conditions().await {
        Ok(conditions) => (conditions, None),
        Err(error) => (Vec::new(), Some(format!("conditions could not be read: {error}"))),
    };
    // A signer that does not answer stops transfers: a problem, not a warning.
    let (unsigned, conditions): (Vec<Condition>, Vec<Condition>) =
        conditions.into_iter().partition(|c| c.kind == crate::store::SIGNER_UNREACHABLE);
    let runs = store.reconcile_runs(None).await?;
    for report in &mut reports {
        let run = runs.iter().find(|r| r.chain == report.chain.as_str());
        report.reconciled = run.map(|run| crate::reconcile::Reconciled::of(run, now.timestamp_micros()));
        report.warnings.extend(report.reconciled.as_ref().and_then(|r| r.warning(report.chain)));
    }
    let mut warnings = attach(&mut reports, &conditions);
    warnings.extend(unread);
    for report in &mut reports {
        report.workers = workers(&leases, report.chain);
        if let Some(at) = stops.iter().position(|s| s.chain == report.chain) {
            report.stopped(stops.swap_remove(at));
        }
        let coverage = store.coverage(report.chain).await?;
        report.addresses_catching_up = coverage.catching_up;
        report.catching_up_from = coverage.lowest_gap_block;
    }
    // Read from the outages themselves, which stop the submit windows: an
    // open one shows even without its condition.
    let mut problems: Vec<String> =
        store.open_signer_outages().await?.into_iter().map(|(_, message)| message).collect();
    if reports.is_empty() {
        problems.push("no chain has recorded a scan yet: is `custody-indexer run` running?".to_string());
    }
    problems.extend(
        reports.iter().filter(|c| !c.healthy).map(|c| format!("{}: {}", c.chain, c.problems.join("; "))),
    );
    let chain_warnings = reports.iter().flat_map(|c| c.warnings.iter().map(|w| format!("{}: {w}", c.chain)));
    warnings.splice(0..0, chain_warnings.collect::<Vec<_>>());
    if environment == Some(Environment::Production) {
        warnings.extend(admin_key_warning(store, now).await?);
    }
    Ok(Report {
        healthy: problems.is_empty(),
        environment,
        problems,
        warnings,
        conditions: [conditions, unsigned].concat(),
        store: StoreReport { reachable: true, error: None },
        chains: reports,
        checked_at: now,
    })
}

/// Each chain's report from what its watcher recorded: the `required`
/// chains, else every configured chain a watcher has reported on.
fn assessed(
    recorded: &[ChainHealth],
    chains: &Chains,
    required: &[Chain],
    now: DateTime<Utc>,
) -> Vec<ChainReport> {
    let selected: Vec<Chain> = if required.is_empty() {
        recorded.iter().map(|r| r.chain).filter(|c| chains.get(*c).is_ok()).collect()
    } else {
        required.to_vec()
    };
    selected
        .into_iter()
        .filter_map(|chain| {
            let config = chains.get(chain).ok()?;
            let state = recorded.iter().find(|r| r.chain == chain);
            Some(assess(chain, state, config.max_lag, config.stale_after, now))
        })
        .collect()
}

/// The warning of the last admin key's expiry; none on a store without
/// operators yet (before its bootstrap).
async fn admin_key_warning(store: &Store, now: DateTime<Utc>) -> Result<Option<String>, StoreError> {
    let operators = store.operators().await?;
    let last = store.last_admin_key_expiry(now.timestamp_micros()).await?;
    if operators.is_empty() {
        return Ok(None);
    }
    Ok(crate::operators::key_rules::admin_key_warning(last, now.timestamp_micros()))
}

/// Adds each condition to its chain's warnings; those of no chain reported
/// (a webhook's) are returned. Keys attested as hardware are no warning:
/// they are listed with the conditions only.
fn attach(reports: &mut [ChainReport], conditions: &[Condition]) -> Vec<String> {
    let mut rest = Vec::new();
    for condition in conditions.iter().filter(|c| c.kind != crate::keys::rules::KEYS_ATTESTED) {
        match reports.iter_mut().find(|r| Some(r.chain) == condition.chain) {
            Some(report) => report.warnings.push(condition.message.clone()),
            None => rest.push(condition.message.clone()),
        }
    }
    rest
}

/// The report when the store cannot be read.
pub fn unreachable(error: StoreError) -> Report {
    let error = format!("{:#}", anyhow::Error::from(error));
    Report {
        healthy: false,
        environment: None,
        problems: vec![format!("the store is unreachable: {error}")],
        warnings: Vec::new(),
        conditions: Vec::new(),
        store: StoreReport { reachable: false, error: Some(error) },
        chains: Vec::new(),
        checked_at: Utc::now(),
    }
}

/// Judges one chain's recorded state against its thresholds.
pub fn assess(
    chain: Chain,
    state: Option<&ChainHealth>,
    max_lag: Span,
    stale_after: std::time::Duration,
    now: DateTime<Utc>,
) -> ChainReport {
    let block_time = state.and_then(|s| s.block_time);
    let max_lag_blocks = max_lag.blocks(block_time);
    let head = state.and_then(|s| s.head);
    let indexed = state.and_then(|s| s.indexed);
    let lag = head.zip(indexed).map(|(head, indexed)| head.saturating_sub(indexed));
    let last_success_at = state.and_then(|s| s.checked_at);
    let mut problems = Vec::new();
    match last_success_at {
        None => problems.push("no successful scan recorded".to_string()),
        Some(at) => {
            let age = (now - at).to_std().unwrap_or_default();
            if age > stale_after {
                problems.push(format!(
                    "last successful scan {}s ago (limit {}s)",
                    age.as_secs(),
                    stale_after.as_secs()
                ));
            }
        }
    }
    let mut warnings = Vec::new();
    match judge_lag(lag, max_lag, block_time) {
        Some(Ok(problem)) => problems.push(problem),
        Some(Err(warning)) => warnings.push(warning),
        None => {}
    }
    let last_error_at = state.and_then(|s| s.last_error_at);
    let error_is_current = last_error_at.is_some_and(|e| last_success_at.is_none_or(|ok| e > ok));
    if error_is_current && let Some(error) = state.and_then(|s| s.last_error.as_deref()) {
        let kind = state.and_then(|s| s.last_error_kind.as_deref()).unwrap_or_default();
        if SETUP_ERRORS.contains(&kind) {
            problems.push(format!("the watcher cannot progress: {error}"));
        } else if !problems.is_empty() {
            problems.push(format!("last error: {error}"));
        } else {
            // Retried; the chain turns unhealthy once stale.
            warnings.push(format!("the watcher's last step failed ({kind}), retrying: {error}"));
        }
    }
    ChainReport {
        chain,
        status: if problems.is_empty() { ChainStatus::Healthy } else { ChainStatus::Unhealthy },
        healthy: problems.is_empty(),
        problems,
        warnings,
        head,
        indexed,
        lag,
        max_lag_blocks,
        max_lag_seconds: match max_lag {
            Span::Time(time) => Some(time.as_secs_f64()),
            Span::Blocks(_) => None,
        },
        block_time_ms: block_time.map(|t| ((t.as_micros() + 500) / 1000) as u64),
        last_success_at,
        stale_after_seconds: stale_after.as_secs(),
        last_error: state.and_then(|s| s.last_error.clone()),
        last_error_at,
        addresses_catching_up: 0,
        catching_up_from: None,
        workers: Vec::new(),
        reconciled: None,
        stop: None,
    }
}

/// A lag beyond the limit (a problem, in the limit's unit), or a limit in
/// seconds not judged for want of a measured block time (a warning).
fn judge_lag(
    lag: Option<u64>,
    max_lag: Span,
    block_time: Option<std::time::Duration>,
) -> Option<Result<String, String>> {
    let lag = lag?;
    let Some(limit) = max_lag.blocks(block_time) else {
        return Some(Err(format!(
            "the block time is not measured yet: the lag is not judged against max_lag_secs ({})",
            max_lag.describe()
        )));
    };
    if lag <= limit {
        return None;
    }
    Some(Ok(match (max_lag, block_time) {
        (Span::Time(_), Some(block)) => format!(
            "indexing trails the head by {lag} blocks, {:.1} s at {} ms a block (limit {})",
            block.as_secs_f64() * lag as f64,
            block.as_millis(),
            max_lag.describe()
        ),
        _ => format!("indexing trails the head by {lag} blocks (limit {limit})"),
    }))
}

/// The leases of `chain`'s workers, held or not as the store judged them
/// when it read them (on PostgreSQL by the database's clock).
fn workers(leases: &[WorkerLease], chain: Chain) -> Vec<WorkerReport> {
    leases
        .iter()
        .filter(|l| l.chain == chain)
        .map(|l| WorkerReport {
            kind: l.kind,
            instance: l.owner.clone(),
            epoch: l.epoch,
            held: l.held,
            until: l.until,
        })
        .collect()
}

#[cfg(test)]
mod tests;
