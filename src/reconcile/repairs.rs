//! Repairs through the service, as production makes them: a treasury
//! operator asks (`POST /operator/v1/reconciliation/repairs`), the service
//! reconciles the chain itself and records the missed credits it finds,
//! at once when they are worth at most `--repair-second-operator-above`,
//! otherwise once a second treasury operator approves. Every step is an
//! audit entry in the transaction that makes it. Repairs one operator
//! applied alone in the last day count toward the threshold, so splitting
//! one does not get around it. The request's entry holds the digest of
//! what was asked (chain, scope, credits, worth): a row rewritten
//! afterwards is refused at the decision. At the approval the service
//! reconciles again and records only the credits both reconciliations
//! found; the requester, whom the approver must not be, is read from the
//! hash-chained audit log, never from the row.

use super::{
    Credit, ReconcileError, Repair, RepairScope, RepairStatus, Report, evm,
    repair::{commit_of, settled_missed},
    rules,
};
use crate::{
    audit::{self, Actor, Detail, Record},
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
            RepairError::Store(e) => e.retryable(),
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
        return Err(StoreError::Refused(format!(
            "the reconciliation of {} finds no missed credit at or below block {} to repair",
            config.chain, report.settled
        ))
        .into());
    }
    let credits: Vec<Credit> = missed.iter().map(Credit::of).collect();
    let worth = rules::repair_worth(&valued(config, &missed));
    let id = uuid::Uuid::new_v4().to_string();
    let (by, now) = (ask.by.recorded(), now_micros());
    let mut tx = store.begin().await?;
    // The audit log's head first, as every repair takes it: requests and
    // decisions (and the day's sum below) come one at a time.
    audit::lock(&mut tx).await?;
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
    let kept = reconcile_repairs::repair_in(&mut tx, &id).await?;
    let detail = Detail { repair_sha256: Some(digest(&kept)), ..Detail::default() };
    let request = (ask.by, "reconcile.repair_requested", id.as_str());
    append(&mut tx, store, request, Some(ask.reason), Some(detail)).await?;
    let alone =
        reconcile_repairs::applied_alone_since(&mut tx, config.chain.as_str(), now - DAY_MICROS).await?;
    let wrote = if rules::needs_second_operator(worth, alone, ask.second_operator_above) {
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
        if again.is_empty() {
            return Err(StoreError::Refused(format!(
                "the reconciliation finds none of repair {id}'s credits missed any more: refuse it"
            ))
            .into());
        }
        let mut tx = store.begin().await?;
        audit::lock(&mut tx).await?;
        apply(&mut tx, store, config, (id, by), report.settled, again).await?;
        tx
    } else {
        let mut tx = store.begin().await?;
        audit::lock(&mut tx).await?;
        if !reconcile_repairs::decide(&mut tx, id, RepairStatus::Refused, &by.recorded(), &[], now_micros())
            .await?
        {
            return Err(not_awaiting(id));
        }
        append(&mut tx, store, (by, "reconcile.repair_refused", id), reason, None).await?;
        tx
    };
    tx.commit().await.map_err(StoreError::from)?;
    if approve {
        store.wake_deliveries();
    }
    Ok(store.reconcile_repair(id).await?)
}

/// What ends what was asked before the audit log's authentication.
pub const ASK_AGAIN: &str =
    "asked before the audit log was authenticated, so its request is no authority: ask again";

/// Refuses, by the service, every repair awaiting approval whose request
/// was recorded before the log's authentication (its entry carries no
/// MAC: it could never be approved), each with its entry. Answers how many.
pub async fn refuse_unauthenticated(store: &Store) -> Result<usize, RepairError> {
    let Some(since) = store.audit_authority().await?.authenticated_at() else { return Ok(0) };
    let awaiting = store.reconcile_repairs(None).await?;
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    let mut refused = 0;
    for repair in awaiting.iter().filter(|r| r.status == RepairStatus::AwaitingApproval) {
        let requested = store::audit::entry_about(&mut tx, "reconcile.repair_requested", &repair.id).await?;
        if requested.is_none_or(|entry| entry.seq > since) {
            continue;
        }
        let by = Actor::System;
        if reconcile_repairs::decide(
            &mut tx,
            &repair.id,
            RepairStatus::Refused,
            &by.recorded(),
            &[],
            now_micros(),
        )
        .await?
        {
            append(&mut tx, store, (&by, "reconcile.repair_refused", &repair.id), Some(ASK_AGAIN), None)
                .await?;
            refused += 1;
        }
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(refused)
}

/// Repair `id` as it stands, awaiting approval, with `by` not its
/// requester as the audit log names it.
async fn awaiting(store: &Store, id: &str, by: &Actor) -> Result<Repair, RepairError> {
    let mut tx = store.begin().await?;
    let repair = reconcile_repairs::repair_in(&mut tx, id).await?;
    let requested = store::audit::entry_about(&mut tx, "reconcile.repair_requested", id).await?;
    tx.rollback().await.map_err(StoreError::from)?;
    let Some(requested) = requested else {
        return Err(StoreError::Refused(format!("repair {id} has no request in the audit log")).into());
    };
    second_pair(&Actor::from_recorded(&requested.actor), by)
        .map_err(|refusal| RepairError::FourEyes { id: id.to_string(), refusal })?;
    let asked = requested.detail.as_deref().and_then(Detail::parse).and_then(|d| d.repair_sha256);
    if asked.as_deref() != Some(digest(&repair).as_str()) {
        return Err(StoreError::Refused(format!(
            "repair {id} is not what its request in the audit log asked for: refuse it and ask again"
        ))
        .into());
    }
    if repair.status != RepairStatus::AwaitingApproval {
        return Err(not_awaiting(id));
    }
    Ok(repair)
}

fn not_awaiting(id: &str) -> RepairError {
    StoreError::Refused(format!("repair {id} does not await approval")).into()
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
    append(tx, store, (by, "reconcile.repair_applied", id), None, None).await
}

/// A day in microseconds: the window of repairs applied alone that count
/// toward the threshold.
const DAY_MICROS: i64 = 24 * 3600 * 1_000_000;

/// What a repair's request entry holds of it: its chain, scope, credits
/// and worth, bound to its id. A row rewritten afterwards no longer matches.
pub fn digest(repair: &Repair) -> String {
    let fields = serde_json::json!([repair.id, repair.chain, repair.scope, repair.credits, repair.usd]);
    crate::api_key::sha256_hex(fields.to_string().as_bytes())
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
        slice: None,
    };
    let report = evm::reconcile(store, rpc, config, &ask).await?;
    if !report.failed.is_empty() {
        return Err(RepairError::ReadFailed(report.failed.join("; ")));
    }
    let missed = settled_missed(&report);
    Ok((report, missed))
}

/// Each credit as its worth is figured: raw amount, decimals, and the
/// micro-dollars a whole unit is worth (the native coin's `native_usd`, a
/// token's `usd`; none when the chain file gives none).
fn valued(config: &ChainConfig, missed: &[Detected]) -> Vec<(alloy::primitives::U256, u8, Option<u128>)> {
    let price = |symbol: &str| {
        if symbol == config.native.symbol {
            return config.transfers.native_usd_micros();
        }
        let usd = config.assets.iter().find(|a| a.symbol == symbol)?.usd.as_deref()?;
        crate::amount::Amount::parse(usd, 6).ok().map(|a| a.raw().to::<u128>())
    };
    missed.iter().map(|d| (d.amount.raw(), d.amount.decimals(), price(&d.currency_symbol))).collect()
}

/// The audit entry of `actor`'s `action` on repair `id`.
async fn append(
    tx: &mut Tx,
    store: &Store,
    (actor, action, id): (&Actor, &str, &str),
    reason: Option<&str>,
    detail: Option<Detail>,
) -> Result<(), RepairError> {
    let record = Record {
        actor,
        action,
        target_kind: "repair",
        target_id: id,
        organization_id: None,
        reason,
        request_id: None,
        detail,
    };
    audit::append(tx, store.cipher().ok(), record).await?;
    Ok(())
}
