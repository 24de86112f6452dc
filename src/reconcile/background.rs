//! `run`'s reconciliation: every `reconcile_every_secs` each watched
//! address (and, on EVM, platform wallet) of a chain is reconciled as
//! `reconcile` does it, beside the chain's watcher and under its lease (one
//! instance at a time). The result is kept for `health`, `/metrics` and
//! `GET /operator/v1/reconciliation`; money that left an address without
//! the platform is an alarm, once per block: counted, logged at ERROR and
//! written to the audit log, in the transaction that keeps the run. Nothing
//! is repaired here. Between passes, newly watched EVM addresses' baselines
//! are recorded ([`baselines`]).

use std::{collections::BTreeMap, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::{Debit, ReconcileError, Report, Run, baselines, evm, rules, solana};
use crate::{
    audit::{self, Actor, Record},
    chain::Family,
    config::ChainConfig,
    deposits::resource::format_time,
    evm::rpc::EvmRpc,
    solana::rpc::SolanaRpc,
    store::{Store, StoreError, now_micros, reconcile_runs},
};

/// The condition `health` shows while passes fail.
pub const FAILING: &str = "reconcile_failing";

/// How long a failed pass waits before the next, at most.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// How often newly watched addresses' baselines are looked for.
const BASELINES_EVERY: Duration = Duration::from_secs(2);

/// Reconciles `config`'s chain every `reconcile_every` until `stop`: the
/// first pass when the last one kept is that old (at once on a store that
/// has none).
pub async fn every(config: ChainConfig, store: Store, stop: CancellationToken) {
    let chain = config.chain;
    let period = config.reconcile_every;
    let rpc = Reader::of(&config);
    let mut deferrals = Deferrals::new();
    let mut due = tokio::time::Instant::now() + first_wait(&store, &config).await;
    loop {
        let nap = due.saturating_duration_since(tokio::time::Instant::now()).min(BASELINES_EVERY);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(nap) => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = record_baselines(&store, &rpc, &config) => {}
        }
        if tokio::time::Instant::now() < due {
            continue;
        }
        let passed = tokio::select! {
            _ = stop.cancelled() => return,
            passed = pass(&store, &rpc, &config, &mut deferrals) => passed,
        };
        let wait = match passed {
            Ok(run) => {
                let _ = store.clear_condition(Some(chain), FAILING, "reconciliation").await;
                info!(%chain, at_block = run.at_block, lines = run.lines, differ = run.differ,
                    failed = run.failed, took_ms = run.took_ms, "reconciled");
                if Duration::from_millis(run.took_ms) > period {
                    warn!(%chain, took_ms = run.took_ms, period_secs = period.as_secs_f64(),
                        "a reconciliation took longer than reconcile_every_secs at reconcile_max_rps: the cap wins");
                }
                period
            }
            // A watcher that just started: nothing to reconcile yet.
            Err(ReconcileError::NotIndexed(_)) => {
                debug!(%chain, "nothing indexed yet to reconcile");
                period.min(RETRY_AFTER)
            }
            Err(error) => {
                warn!(%chain, %error, retryable = error.retryable(), "reconciliation failed; trying again");
                let message = format!("the background reconciliation fails: {error}");
                if let Err(e) = store.raise_condition(Some(chain), FAILING, "reconciliation", &message).await
                {
                    warn!(%chain, error = %e, "cannot record the reconciliation's failure");
                }
                period.min(RETRY_AFTER)
            }
        };
        due = tokio::time::Instant::now() + wait;
    }
}

/// How long until the first pass: the period less the age of the last
/// pass kept (none at once).
async fn first_wait(store: &Store, config: &ChainConfig) -> Duration {
    let period = config.reconcile_every;
    match store.reconcile_runs(Some(config.chain)).await {
        Ok(runs) => runs.first().map_or(Duration::ZERO, |run| {
            let elapsed = now_micros().saturating_sub(run.at_micros).max(0) as u64;
            period.saturating_sub(Duration::from_micros(elapsed))
        }),
        Err(_) => Duration::ZERO,
    }
}

/// A chain's balance reader, at most `reconcile_max_rps` requests a second.
enum Reader {
    Evm(EvmRpc),
    Solana(SolanaRpc),
}

impl Reader {
    fn of(config: &ChainConfig) -> Self {
        let (chain, urls, rate) = (config.chain, &config.rpc_urls, config.reconcile_max_rps);
        match config.family() {
            Family::Evm => {
                Reader::Evm(EvmRpc::paced(chain, urls, config.max_block_range, config.batch_size, rate))
            }
            Family::Solana => Reader::Solana(SolanaRpc::paced(chain, urls, rate)),
        }
    }

    /// Every watched address and wallet, as `reconcile` without arguments.
    async fn reconcile(&self, store: &Store, config: &ChainConfig) -> Result<Report, ReconcileError> {
        let ask = evm::Ask::default();
        match self {
            Reader::Evm(rpc) => evm::reconcile(store, rpc, config, &ask).await,
            Reader::Solana(rpc) => solana::reconcile(store, rpc, config, &ask).await,
        }
    }
}

/// Records newly watched addresses' baselines (EVM: Solana serves no
/// balance at a past slot); a failure waits for the next try.
async fn record_baselines(store: &Store, rpc: &Reader, config: &ChainConfig) {
    let chain = config.chain;
    let Reader::Evm(rpc) = rpc else { return };
    match baselines::record_new(store, rpc, config).await {
        Ok(0) => {}
        Ok(recorded) => debug!(%chain, recorded, "baselines recorded at watch starts"),
        Err(error) => debug!(%chain, %error, "cannot record baselines at watch starts yet"),
    }
}

/// One reconciliation of every watched address, kept with its alarms.
async fn pass(
    store: &Store,
    rpc: &Reader,
    config: &ChainConfig,
    deferrals: &mut Deferrals,
) -> Result<Run, ReconcileError> {
    let started = std::time::Instant::now();
    let report = rpc.reconcile(store, config).await?;
    let differing: Vec<_> = report.lines.iter().filter(|l| l.difference != "0").collect();
    let debits: Vec<Debit> = differing.iter().flat_map(|l| rules::unexplained_debits(l)).collect();
    let debits = alarmed_now(store, config, debits, deferrals).await?;
    let now = now_micros();
    let run = Run {
        chain: config.chain.as_str().to_string(),
        at: format_time(&crate::store::time(now)?),
        at_micros: now,
        took_ms: started.elapsed().as_millis() as u64,
        at_block: report.lines.first().map_or(report.settled, |l| l.at_block),
        lines: report.lines.len() as u64,
        differ: differing.len() as u64,
        failed: report.failed.len() as u64,
        skipped: report.skipped.len() as u64,
        detail: serde_json::json!({ "differences": differing, "failed": report.failed, "skipped": report.skipped }),
    };
    let new = keep(store, &run, &debits, now).await?;
    let mut by_asset: BTreeMap<&str, u64> = config.assets.iter().map(|a| (a.symbol.as_str(), 0)).collect();
    by_asset.insert(config.native.symbol.as_str(), 0);
    for line in &differing {
        *by_asset.entry(line.asset.as_str()).or_default() += 1;
    }
    for (asset, count) in by_asset {
        metrics::gauge!("custody_indexer_reconcile_differences", "chain" => config.chain.as_str(), "asset" => asset.to_string())
            .set(count as f64);
    }
    for debit in &new {
        metrics::counter!("custody_indexer_unexplained_debits_total", "chain" => config.chain.as_str(), "asset" => debit.asset.clone())
            .increment(1);
        error!(chain = %config.chain, address = debit.address, account = debit.account_id, wallet = debit.wallet, asset = debit.asset,
            block = debit.block, change = debit.change, transactions = ?debit.transactions,
            "money left a watched address without the platform");
    }
    Ok(run)
}

/// When a pass first deferred each debit (by its audit target), while it
/// is deferred.
type Deferrals = std::collections::HashMap<String, std::time::Instant>;

/// The debits to alarm now: one naming only the platform's own
/// transactions whose inclusion the sender has not recorded yet waits for
/// a later pass, for [`rules::DEFER_AT_MOST`] at most ([`rules::deferred`]).
async fn alarmed_now(
    store: &Store,
    config: &ChainConfig,
    debits: Vec<Debit>,
    deferrals: &mut Deferrals,
) -> Result<Vec<Debit>, StoreError> {
    let before = std::mem::take(deferrals);
    let (mut now, mut seen) = (Vec::new(), std::collections::HashSet::new());
    for debit in debits {
        let unsettled = store.unsettled_platform_transactions(config.chain, &debit.transactions).await?;
        let target = debit_target(&debit);
        let since = before.get(&target).copied().unwrap_or_else(std::time::Instant::now);
        seen.insert(target.clone());
        if rules::deferred(&debit, &unsettled, since.elapsed()) {
            info!(chain = %config.chain, address = debit.address, block = debit.block, transactions = ?debit.transactions,
                "a debit by the platform's own transactions not recorded as included yet: seen again next pass");
            deferrals.insert(target, since);
            continue;
        }
        now.push(debit);
    }
    deferrals.extend(unseen_kept(before, &seen, std::time::Instant::now()));
    Ok(now)
}

/// The deferrals of `before` a pass did not see (their address skipped, a
/// read failed), kept for twice [`rules::DEFER_AT_MOST`] since they began,
/// so that a debit seen again does not start its wait over.
fn unseen_kept(
    before: Deferrals,
    seen: &std::collections::HashSet<String>,
    now: std::time::Instant,
) -> Deferrals {
    let keep = |since: &std::time::Instant| now.saturating_duration_since(*since) < 2 * rules::DEFER_AT_MOST;
    before.into_iter().filter(|(target, since)| !seen.contains(target) && keep(since)).collect()
}

/// The audit entry's target of an unexplained debit.
fn debit_target(debit: &Debit) -> String {
    format!("{}:{}:{}:{}", debit.chain, debit.address, debit.asset, debit.block)
}

/// Keeps the run and each debit not seen before, each new one in the
/// audit log, in one transaction; the new debits.
async fn keep(store: &Store, run: &Run, debits: &[Debit], now: i64) -> Result<Vec<Debit>, StoreError> {
    let mut tx = store.begin_fenced().await?;
    reconcile_runs::record_run(&mut tx, run).await?;
    let mut new = Vec::new();
    for debit in debits {
        reconcile_runs::record_debit(&mut tx, debit, now).await?;
        let target = debit_target(debit);
        if reconcile_runs::alarmed(&mut tx, &target).await? {
            continue;
        }
        let whose = match &debit.wallet {
            Some(wallet) => format!("the {wallet} wallet {}", debit.address),
            None => debit.address.clone(),
        };
        let reason = format!(
            "{} {} left {} in block {} without the platform (transactions: {})",
            debit.change.trim_start_matches('-'),
            debit.asset,
            whose,
            debit.block,
            if debit.transactions.is_empty() {
                "none seen".to_string()
            } else {
                debit.transactions.join(", ")
            },
        );
        let record = Record {
            actor: &Actor::System,
            action: "reconcile.unexplained_debit",
            target_kind: "address",
            target_id: &target,
            organization_id: None,
            reason: Some(&reason),
            request_id: None,
            detail: None,
        };
        audit::append(&mut tx, store.cipher().ok(), record).await?;
        new.push(debit.clone());
    }
    tx.commit().await?;
    Ok(new)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_deferral_a_pass_did_not_see_is_kept_so_its_wait_does_not_start_over() {
        let now = Instant::now() + 3 * rules::DEFER_AT_MOST;
        let ago = |d: Duration| now - d;
        let before: Deferrals = [
            ("seen".to_string(), ago(Duration::ZERO)),
            ("unseen, recent".to_string(), ago(rules::DEFER_AT_MOST)),
            ("unseen, old".to_string(), ago(2 * rules::DEFER_AT_MOST)),
        ]
        .into_iter()
        .collect();
        let seen = std::collections::HashSet::from(["seen".to_string()]);
        let kept = unseen_kept(before, &seen, now);
        let mut targets: Vec<&str> = kept.keys().map(String::as_str).collect();
        targets.sort();
        assert_eq!(targets, ["unseen, recent"], "the seen one is decided by the pass, the old one dropped");
    }
}
