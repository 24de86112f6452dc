//! Repairs through the service, as production makes them: a treasury
//! operator asks (`POST /operator/v1/reconciliation/repairs`), the service
//! reconciles the chain itself and records the missed credits it finds,
//! at once when they are worth at most `--repair-second-operator-above`,
//! otherwise once a second treasury operator approves. Every step is an
//! audit entry in the transaction that makes it. At the approval the
//! service reconciles again and records only the credits both
//! reconciliations found, so a row rewritten meanwhile can take credits
//! away but never add one; the requester, whom the approver must not be,
//! is read from the hash-chained audit log, never from the row.

use super::{
    Credit, ReconcileError, Repair, RepairScope, RepairStatus, Report, evm,
    repair::{commit_of, settled_missed},
    rules,
};
use crate::{
    audit::{self, Actor, Record},
    config::ChainConfig,
    deposits::resource::Detected,
    evm::rpc::EvmRpc,
    operators::rules::{Refused, second_pair},
    store::{self, Store, StoreError, Tx, now_micros, reconcile_repairs},
};

/// Why a repair was not made.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reads of the reconciliation failed: nothing is recorded on a
    /// partial answer.
    #[error("the reconciliation could not read {0}; nothing was recorded, try again later")]
    ReadFailed(String),
    /// The approver is the requester.
    #[error("repair {id}: {refusal}")]
    FourEyes { id: String, refusal: Refused },
}

impl RepairError {
    /// Whether the same request may succeed later: a node or the store
    /// that did not answer, never a refusal.
    pub fn retryable(&self) -> bool {
        match self {
            RepairError::Reconcile(e) => e.retryable(),
            RepairError::Store(e) => !e.is_refusal(),
            RepairError::ReadFailed(_) => true,
            RepairError::FourEyes { .. } => false,
        }
    }
}

/// A repair request: what to reconcile, who asks and why.
pub struct Request<'a> {
    pub scope: &'a RepairScope,
    pub by: &'a Actor,
    pub reason: &'a str,
    /// Micro-dollars above which a second treasury operator decides.
    pub second_operator_above: u128,
}

/// Reconciles `config`'s chain within the request's scope and keeps a
/// repair of the missed credits found: applied at once when worth at most
/// the threshold, awaiting a second operator otherwise.
pub async fn request(
    store: &Store,
    rpc: &EvmRpc,
    config: &ChainConfig,
    ask: &Request<'_>,
) -> Result<Repair, RepairError> {
    let (report, missed) = reconciled(store, rpc, config, ask.scope).await?;
    if missed.is_empty() {
        return Err(StoreError::Conflict(format!(
            "the reconciliation of {} finds no missed credit at or below block {} to repair",
            config.chain, report.settled
        ))
        .into());
    }
    let credits: Vec<Credit> = missed.iter().map(Credit::of).collect();
    let worth = rules::repair_worth(&valued(config, &missed), config.transfers.native_usd_micros());
    let id = uuid::Uuid::new_v4().to_string();
    let (by, now) = (ask.by.recorded(), now_micros());
    let mut tx = store.begin().await?;
    let new = reconcile_repairs::NewRepair {
        id: &id,
        chain: config.chain.as_str(),
        scope: ask.scope,
        credits: &credits,
        usd_micros: worth.map(|w| i64::try_from(w).unwrap_or(i64::MAX)),
        requested_by: &by,
        reason: ask.reason,
        now,
    };
    reconcile_repairs::insert(&mut tx, &new).await?;
    append(&mut tx, store, ask.by, "reconcile.repair_requested", &id, Some(ask.reason)).await?;
    let wrote = if rules::needs_second_operator(worth, ask.second_operator_above) {
        false
    } else {
        apply(&mut tx, store, config, (&id, ask.by), report.settled, missed).await?;
        true
    };
    tx.commit().await.map_err(StoreError::from)?;
    if wrote {
        store.wake_deliveries();
    }
    Ok(store.reconcile_repair(&id).await?)
}

/// Approves (recording the credits a new reconciliation finds again) or
/// refuses repair `id`, as `by`: another treasury operator than its
/// requester.
pub async fn decide(
    store: &Store,
    rpc: &EvmRpc,
    config: &ChainConfig,
    (id, by): (&str, &Actor),
    approve: bool,
    reason: Option<&str>,
) -> Result<Repair, RepairError> {
    let repair = awaiting(store, id, by).await?;
    let tx = if approve {
        let (report, found) = reconciled(store, rpc, config, &repair.scope).await?;
        let again: Vec<Detected> =
            found.into_iter().filter(|d| repair.credits.contains(&Credit::of(d))).collect();
        let mut tx = store.begin().await?;
        apply(&mut tx, store, config, (id, by), report.settled, again).await?;
        tx
    } else {
        let mut tx = store.begin().await?;
        if !reconcile_repairs::decide(&mut tx, id, RepairStatus::Refused, &by.recorded(), &[], now_micros())
            .await?
        {
            return Err(not_awaiting(id));
        }
        append(&mut tx, store, by, "reconcile.repair_refused", id, reason).await?;
        tx
    };
    tx.commit().await.map_err(StoreError::from)?;
    if approve {
        store.wake_deliveries();
    }
    Ok(store.reconcile_repair(id).await?)
}

/// Repair `id` as it stands, awaiting approval, with `by` not its
/// requester as the audit log names it.
async fn awaiting(store: &Store, id: &str, by: &Actor) -> Result<Repair, RepairError> {
    let mut tx = store.begin().await?;
    let repair = reconcile_repairs::repair_in(&mut tx, id).await?;
    let requested = store::audit::entry_about(&mut tx, "reconcile.repair_requested", id).await?;
    tx.rollback().await.map_err(StoreError::from)?;
    let Some(requested) = requested else {
        return Err(StoreError::Conflict(format!("repair {id} has no request in the audit log")).into());
    };
    second_pair(&Actor::from_recorded(&requested.actor), by)
        .map_err(|refusal| RepairError::FourEyes { id: id.to_string(), refusal })?;
    if repair.status != RepairStatus::AwaitingApproval {
        return Err(not_awaiting(id));
    }
    Ok(repair)
}

fn not_awaiting(id: &str) -> RepairError {
    StoreError::Conflict(format!("repair {id} does not await approval")).into()
}

/// Records `missed` as deposits and the repair as applied by `by`, with
/// its audit entry, inside `tx`.
async fn apply(
    tx: &mut Tx,
    store: &Store,
    config: &ChainConfig,
    (id, by): (&str, &Actor),
    settled: u64,
    missed: Vec<Detected>,
) -> Result<(), RepairError> {
    let written = match commit_of(config, settled, missed) {
        Some(commit) => store::scan_in(tx, &commit).await?,
        None => Vec::new(),
    };
    let deposits: Vec<String> = written.into_iter().map(|(id, _)| id).collect();
    if !reconcile_repairs::decide(tx, id, RepairStatus::Applied, &by.recorded(), &deposits, now_micros())
        .await?
    {
        return Err(not_awaiting(id));
    }
    append(tx, store, by, "reconcile.repair_applied", id, None).await
}

/// The reconciliation of the scope at the settled height, and the missed
/// credits it found there; refused when any read failed.
async fn reconciled(
    store: &Store,
    rpc: &EvmRpc,
    config: &ChainConfig,
    scope: &RepairScope,
) -> Result<(Report, Vec<Detected>), RepairError> {
    let ask = evm::Ask {
        account: scope.account_id.clone(),
        address: scope.address.clone(),
        asset: scope.asset.clone(),
        at_block: None,
    };
    let report = evm::reconcile(store, rpc, config, &ask).await?;
    if !report.failed.is_empty() {
        return Err(RepairError::ReadFailed(report.failed.join("; ")));
    }
    let missed = settled_missed(&report);
    Ok((report, missed))
}

/// Each credit as its worth is figured: raw amount, decimals, native.
fn valued(config: &ChainConfig, missed: &[Detected]) -> Vec<(alloy::primitives::U256, u8, bool)> {
    missed
        .iter()
        .map(|d| (d.amount.raw(), d.amount.decimals(), d.currency_symbol == config.native.symbol))
        .collect()
}

async fn append(
    tx: &mut Tx,
    store: &Store,
    actor: &Actor,
    action: &str,
    id: &str,
    reason: Option<&str>,
) -> Result<(), RepairError> {
    let record = Record {
        actor,
        action,
        target_kind: "repair",
        target_id: id,
        organization_id: None,
        reason,
        request_id: None,
        detail: None,
    };
    audit::append(tx, store.cipher().ok(), record).await?;
    Ok(())
}
