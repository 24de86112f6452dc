//! The alarms of `run`'s reconciliation: money that left a watched
//! address without the platform, once per block: counted, logged at ERROR
//! and written to the audit log, in the transaction that keeps the slice
//! that saw it (and, for a pass's last slice, the pass). A debit naming
//! only the platform's own transactions whose inclusion its sender has not
//! recorded yet waits for a later slice first ([`rules::deferred`]).

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use tracing::{error, info};

use super::{Debit, Run, rules, slices::Slice};
use crate::{
    audit::{self, Actor, Record},
    config::ChainConfig,
    store::{Store, StoreError, reconcile_runs},
};

/// A debit waiting for a later slice: since when, and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Deferral {
    since: Instant,
    address: String,
}

/// The deferred debits, by audit target.
pub(super) type Deferrals = HashMap<String, Deferral>;

/// The debits of `slice` to alarm now: one naming only the platform's own
/// transactions whose inclusion the sender has not recorded yet waits for
/// a later pass, for [`rules::DEFER_AT_MOST`] at most ([`rules::deferred`]).
/// The deferrals of other slices are left as they are.
pub(super) async fn alarmed_now(
    store: &Store,
    config: &ChainConfig,
    (debits, slice): (Vec<Debit>, Slice),
    deferrals: &mut Deferrals,
) -> Result<Vec<Debit>, StoreError> {
    let (before, others): (Deferrals, Deferrals) =
        std::mem::take(deferrals).into_iter().partition(|(_, d)| slice.holds(&d.address));
    *deferrals = others;
    let (mut now, mut seen) = (Vec::new(), HashSet::new());
    for debit in debits {
        let unsettled = store.unsettled_platform_transactions(config.chain, &debit.transactions).await?;
        let target = debit_target(&debit);
        let since = before.get(&target).map_or_else(Instant::now, |d| d.since);
        seen.insert(target.clone());
        if rules::deferred(&debit, &unsettled, since.elapsed()) {
            info!(chain = %config.chain, address = debit.address, block = debit.block, transactions = ?debit.transactions,
                "a debit by the platform's own transactions not recorded as included yet: seen again next pass");
            deferrals.insert(target, Deferral { since, address: debit.address.clone() });
            continue;
        }
        now.push(debit);
    }
    let keep_for = 2 * config.reconcile_every.max(rules::DEFER_AT_MOST);
    deferrals.extend(unseen_kept(before, &seen, Instant::now(), keep_for));
    Ok(now)
}

/// The deferrals of `before` a slice did not see (their address skipped,
/// a read failed), kept for `keep_for` since they began (two periods, or
/// twice [`rules::DEFER_AT_MOST`] when longer), so that a debit seen
/// again does not start its wait over.
fn unseen_kept(before: Deferrals, seen: &HashSet<String>, now: Instant, keep_for: Duration) -> Deferrals {
    let keep = |d: &Deferral| now.saturating_duration_since(d.since) < keep_for;
    before.into_iter().filter(|(target, d)| !seen.contains(target) && keep(d)).collect()
}

/// The audit entry's target of an unexplained debit.
fn debit_target(debit: &Debit) -> String {
    format!("{}:{}:{}:{}", debit.chain, debit.address, debit.asset, debit.block)
}

/// Keeps each debit not seen before, each new one in the audit log, and
/// the pass's `run` when it ended, in one transaction; the new debits.
pub(super) async fn keep(
    store: &Store,
    run: Option<&Run>,
    debits: &[Debit],
    now: i64,
) -> Result<Vec<Debit>, StoreError> {
    let mut tx = store.begin().await?;
    if let Some(run) = run {
        reconcile_runs::record_run(&mut tx, run).await?;
    }
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

/// Counts and logs the debits alarmed for the first time.
pub(super) fn announce(config: &ChainConfig, new: &[Debit]) {
    for debit in new {
        metrics::counter!("custody_indexer_unexplained_debits_total", "chain" => config.chain.as_str(), "asset" => debit.asset.clone())
            .increment(1);
        error!(chain = %config.chain, address = debit.address, account = debit.account_id, wallet = debit.wallet, asset = debit.asset,
            block = debit.block, change = debit.change, transactions = ?debit.transactions,
            "money left a watched address without the platform");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferral_a_slice_did_not_see_is_kept_so_its_wait_does_not_start_over() {
        let keep_for = 2 * rules::DEFER_AT_MOST;
        let now = Instant::now() + 3 * keep_for;
        let deferral = |ago: Duration| Deferral { since: now - ago, address: "0xabc".into() };
        let before: Deferrals = [
            ("seen".to_string(), deferral(Duration::ZERO)),
            ("unseen, recent".to_string(), deferral(rules::DEFER_AT_MOST)),
            ("unseen, old".to_string(), deferral(keep_for)),
        ]
        .into_iter()
        .collect();
        let seen = HashSet::from(["seen".to_string()]);
        let kept = unseen_kept(before, &seen, now, keep_for);
        let mut targets: Vec<&str> = kept.keys().map(String::as_str).collect();
        targets.sort();
        assert_eq!(targets, ["unseen, recent"], "the seen one is decided by the slice, the old one dropped");
    }
}
