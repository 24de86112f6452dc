//! Power taken away from operators: an operator disabled, or roles removed
//! from it (a roles set that adds one is a grant, [`super::grants`]). It applies at once,
//! except an admin taken away while two admins hold the platform, which is
//! a suspension ([`super::suspension`]): another admin approves it
//! ([`super::changes`]), its proposer completes it by breaking glass
//! ([`complete`]), or it lapses ([`sweep`]). Each step is one transaction
//! with its audit entries, the chain's head locked first.

use serde::Serialize;
use utoipa::ToSchema;

use super::{
    grants::{self, Outcome},
    manage::{self, OperatorError, actor, authority, locked, on_change, record},
    resource::{Change, ChangeKind, ChangeStatus, Operator, Proposal, Role},
    rules::{self, Grant, Refused},
    suspension::{self, CONDITION, Taking},
};
use crate::{
    audit::{self, Actor, Detail, Record},
    environment::Environment,
    pii::Cipher,
    store::{
        Store, StoreError, Tx, conditions, console as people_rows, now_micros,
        operator_changes as change_rows, operators as rows,
    },
};

/// An operator some power was taken from, and what that left nobody to do.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Taken {
    #[serde(flatten)]
    pub operator: Operator,
    /// The money roles the change left with no enabled holder (see
    /// [`suspension::last_holder`]); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Disables `target` on `admin`'s authority: its keys stop working at
/// once, its console sessions end and its enrol link is void; an admin
/// while two admins hold the platform is suspended instead.
pub async fn disable(
    store: &Store,
    environment: Environment,
    admin: &Operator,
    target: &str,
    reason: &str,
) -> Result<Outcome<Taken>, OperatorError> {
    rules::may_disable(admin, target)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let current = locked(&mut tx, target).await?;
    let outcome = match how((&mut tx, store), environment, &current, false).await? {
        Taking::Suspend => {
            let to = (ChangeKind::Disable, &current);
            Outcome::Suspended(Box::new(
                suspend(&mut tx, cipher, admin, to, Proposal::default(), reason).await?,
            ))
        }
        Taking::AtOnce => {
            Outcome::Applied(apply_disable(&mut tx, cipher, &actor(admin), target, (reason, None)).await?)
        }
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(outcome)
}

/// Sets `target`'s roles on `admin`'s authority: when the set only removes
/// roles, power taken away (see [`super::taking`]), otherwise as a grant.
pub async fn set_roles(
    store: &Store,
    environment: Environment,
    admin: &Operator,
    target: &str,
    roles: &[Role],
    reason: &str,
) -> Result<Outcome<Taken>, OperatorError> {
    rules::may_set_roles(admin, target, roles)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let current = locked(&mut tx, target).await?;
    let outcome = if !rules::adds_role(&current.roles, roles) {
        remove_roles((&mut tx, store), (cipher, environment), admin, &current, (roles, reason)).await?
    } else {
        match grants::grant(&mut tx, cipher, environment, ChangeKind::Roles, roles).await? {
            Grant::Propose => {
                let proposal = Proposal {
                    roles: Some(roles.to_vec()),
                    from_roles: Some(current.roles.clone()),
                    ..Proposal::default()
                };
                let change = grants::propose(
                    &mut tx,
                    cipher,
                    admin,
                    (ChangeKind::Roles, target),
                    proposal,
                    Some(reason),
                );
                Outcome::Proposed(Box::new(change.await?))
            }
            _ => {
                let by = actor(admin);
                let operator =
                    grants::apply_roles(&mut tx, cipher, &by, target, roles, (reason, None)).await?;
                Outcome::Applied(Taken { operator, warnings: Vec::new() })
            }
        }
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(outcome)
}

/// Sets the roles of `current` to `roles`, which only removes, on
/// `admin`'s authority, in `tx`: at once, or as a suspension when it
/// removes `admin` while two admins hold the platform.
async fn remove_roles(
    (tx, store): (&mut Tx, &Store),
    (cipher, environment): (Option<&Cipher>, Environment),
    admin: &Operator,
    current: &Operator,
    (roles, reason): (&[Role], &str),
) -> Result<Outcome<Taken>, OperatorError> {
    let keeps_admin = roles.contains(&Role::Admin);
    Ok(match how((tx, store), environment, current, keeps_admin).await? {
        Taking::Suspend => {
            let proposal = Proposal {
                roles: Some(roles.to_vec()),
                from_roles: Some(current.roles.clone()),
                ..Proposal::default()
            };
            let to = (ChangeKind::Demote, current);
            Outcome::Suspended(Box::new(suspend(tx, cipher, admin, to, proposal, reason).await?))
        }
        Taking::AtOnce => {
            let operator =
                grants::apply_roles(tx, cipher, &actor(admin), &current.id, roles, (reason, None)).await?;
            let lost: Vec<Role> = current.roles.iter().filter(|r| !roles.contains(r)).copied().collect();
            Outcome::Applied(Taken { warnings: warnings(tx, &current.id, &lost).await?, operator })
        }
    })
}

/// How taking power from `target` goes, `keeps_admin` when the change
/// leaves it the `admin` role: refused while it is suspended already, or
/// when its last suspension ended uncompleted within a suspension's time; a
/// suspension when it takes an admin away and the enabled, enrolled admins
/// not suspended would be one. Where a row and the log disagree (a row a
/// writer rolled back or broke), it fails closed: the target is an enabled
/// admin if either says so, and another admin counts only when the log
/// explains its row.
async fn how(
    (tx, store): (&mut Tx, &Store),
    environment: Environment,
    target: &Operator,
    keeps_admin: bool,
) -> Result<Taking, OperatorError> {
    let now = now_micros();
    let pending = change_rows::pending_suspensions(tx, None, since(now)).await?;
    if let Some(change) = pending.iter().find(|c| c.target == target.id) {
        return Err(Refused::Suspended(target.id.clone(), change.id.clone()).into());
    }
    if environment != Environment::Production || keeps_admin {
        return Ok(Taking::AtOnce);
    }
    let (logged_enabled, logged_admin) = crate::audit::withdrawn::logged(store, &target.id).await?;
    let admin = target.has(Role::Admin) || logged_admin;
    if !admin || !(target.is_enabled() || logged_enabled) {
        return Ok(Taking::AtOnce);
    }
    let mut admins = 1;
    for id in rows::enrolled_admins(tx, now).await? {
        if id == target.id || pending.iter().any(|c| c.target == id) {
            continue;
        }
        let Some(other) = rows::lock(tx, &id).await? else { continue };
        admins += usize::from(!crate::audit::withdrawn::operator(store, &other).await?);
    }
    let taking = suspension::taking(environment, true, admins);
    if taking == Taking::Suspend {
        protected(tx, &target.id, now).await?;
    }
    Ok(taking)
}

/// Refuses a suspension of `target` within a suspension's time after its
/// last one ended uncompleted (lapsed, or refused): one admin cannot keep
/// the other out by suspending it again and again.
async fn protected(tx: &mut Tx, target: &str, now: i64) -> Result<(), OperatorError> {
    let ends = ("operator.suspension_lapsed", "operator.suspension_ended");
    let last = crate::store::audit::last_entry_about(tx, ends, target).await?;
    match last.map(|entry| suspension::lapses_at(entry.at)) {
        Some(until) if now < until => Err(Refused::Protected(target.to_string(), rfc3339(until)).into()),
        _ => Ok(()),
    }
}

/// `at` (microseconds) as RFC 3339, to the second.
fn rfc3339(at: i64) -> String {
    let at = chrono::DateTime::from_timestamp_micros(at).unwrap_or_default();
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The earliest time a suspension still in force was made at, at `now`.
pub(super) fn since(now: i64) -> i64 {
    now.saturating_sub(suspension::LAPSES_AFTER.as_micros() as i64)
}

/// Suspends `target` by a change of `kind` proposed by `admin`, in `tx`:
/// the proposal's entry and `operator.suspended` (naming the change and
/// when it lapses), its sessions ended, its own pending proposals
/// refused, and the condition raised.
async fn suspend(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    admin: &Operator,
    (kind, target): (ChangeKind, &Operator),
    proposal: Proposal,
    reason: &str,
) -> Result<Change, OperatorError> {
    let change = grants::propose(tx, cipher, admin, (kind, &target.id), proposal, Some(reason)).await?;
    let until = suspension::lapses_at(change.created_at.timestamp_micros());
    let detail = Detail { change_id: Some(change.id.clone()), expires_at: Some(until), ..Detail::default() };
    let by = actor(admin);
    let entry = record(&by, "operator.suspended", &target.id, Some(reason));
    audit::append(tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    people_rows::end_operator(tx, &target.id, now_micros()).await?;
    manage::refuse_pending_of(tx, cipher, &target.id, "its proposer was suspended").await?;
    let message = alarm(&change);
    conditions::raise(tx, None, CONDITION, &target.id, &message).await?;
    tracing::warn!(operator = %target.id, change = %change.id, "{message}");
    Ok(change)
}

/// What a suspension's condition says, and how it ends.
pub(super) fn alarm(change: &Change) -> String {
    let until = suspension::lapses_at(change.created_at.timestamp_micros());
    let until = chrono::DateTime::from_timestamp_micros(until).unwrap_or_default().to_rfc3339();
    let command = match change.kind {
        ChangeKind::Demote => "operators roles set",
        _ => "operators disable",
    };
    format!(
        "operator {target} is suspended by {by} ({kind}, change {id}): another enabled admin approves the \
         change, or {by} completes it on the store with `{command} {target} … --break-glass`; it lapses at \
         {until}, and {target} acts again",
        target = change.target,
        by = change.proposed_by,
        kind = change.kind.as_str(),
        id = change.id,
    )
}

/// Completes the suspension of `target` of `kind` that operator `by`
/// proposed (a demotion's `roles` those it leaves), by breaking glass
/// (`by` authenticated by its own key on the store, with the pepper): its
/// change applied, recorded as `break-glass:<by>` (so the log's next
/// checkpoint is due at once).
pub async fn complete(
    store: &Store,
    by: &Operator,
    (kind, target, roles): (ChangeKind, &str, Option<&[Role]>),
    reason: &str,
) -> Result<Taken, OperatorError> {
    rules::permits(by, rules::Action::Operators)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, by).await?;
    let now = now_micros();
    let pending = change_rows::pending_suspensions(&mut tx, Some(target), since(now)).await?;
    let change = pending
        .into_iter()
        .find(|c| c.kind == kind && c.proposed_by == by.id)
        .ok_or_else(|| Refused::NotOwnSuspension(target.to_string()))?;
    let change = change_rows::lock(&mut tx, &change.id).await?.unwrap_or(change);
    suspension::may_complete(&by.id, &change, now)?;
    manage::recorded(&mut tx, &change).await?;
    if let Some(roles) = roles {
        leaves(&change, roles)?;
    }
    let glass = Actor::break_glass(&by.id, &by.name);
    audit::append(&mut tx, cipher, on_change(&glass, "operator_change.completed", &change.id, Some(reason)))
        .await?;
    let why = format!("change {} completed by its proposer, breaking glass: {reason}", change.id);
    let taken = apply(&mut tx, cipher, &glass, &change, &why).await?;
    change_rows::decide(&mut tx, &change.id, ChangeStatus::Applied, Some(&by.id), Some(reason), now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(taken)
}

/// Whether the demotion `change` leaves `roles` (in any order).
fn leaves(change: &Change, roles: &[Role]) -> Result<(), OperatorError> {
    let mut asked = roles.to_vec();
    asked.sort();
    let mut left = change.proposal.roles.clone().unwrap_or_default();
    left.sort();
    if asked == left {
        return Ok(());
    }
    let (id, target, left) = (&change.id, &change.target, super::resource::roles_text(&left));
    Err(OperatorError::Invalid(format!("change {id} leaves {target} the roles {left}: pass --role {left}")))
}

/// Applies the suspension `change` in `tx`, by `by` (the approving admin,
/// or its proposer breaking glass), for `why`; its condition cleared.
pub(super) async fn apply(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: &Actor,
    change: &Change,
    why: &str,
) -> Result<Taken, OperatorError> {
    let target = change.target.as_str();
    let applying = (why, Some(change.id.as_str()));
    let taken = match change.kind {
        ChangeKind::Disable => apply_disable(tx, cipher, by, target, applying).await?,
        ChangeKind::Demote => {
            let roles = change.proposal.roles.as_deref().unwrap_or_default();
            let current = locked(tx, target).await?;
            let mut from = change.proposal.from_roles.clone().unwrap_or_default();
            from.sort();
            if current.roles != from || roles.is_empty() {
                return Err(Refused::Stale(target.to_string()).into());
            }
            let operator = grants::apply_roles(tx, cipher, by, target, roles, applying).await?;
            let lost: Vec<Role> = from.iter().filter(|r| !roles.contains(r)).copied().collect();
            Taken { warnings: warnings(tx, target, &lost).await?, operator }
        }
        kind => {
            return Err(StoreError::Corrupt(format!(
                "change {}: {} suspends no one",
                change.id,
                kind.as_str()
            ))
            .into());
        }
    };
    conditions::clear(tx, None, CONDITION, target).await?;
    Ok(taken)
}

/// Disables `target` in `tx`, with its entry by `by` (for `reason`,
/// applying the suspension `change_id` if any).
async fn apply_disable(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: &Actor,
    target: &str,
    (reason, change_id): (&str, Option<&str>),
) -> Result<Taken, OperatorError> {
    let detail = change_id.map(|id| Detail { change_id: Some(id.to_string()), ..Detail::default() });
    audit::append(tx, cipher, Record { detail, ..record(by, "operator.disabled", target, Some(reason)) })
        .await?;
    let before = locked(tx, target).await?;
    let now = now_micros();
    rows::disable(tx, target, reason, now).await?;
    people_rows::end_operator(tx, target, now).await?;
    let operator = locked(tx, target).await?;
    rules::keeps_an_admin(rows::enabled_admins(tx, now).await?)?;
    Ok(Taken { warnings: warnings(tx, target, &before.roles).await?, operator })
}

/// The warnings, logged, for the money roles in `lost` that `target` was
/// the last enabled holder of.
async fn warnings(tx: &mut Tx, target: &str, lost: &[Role]) -> Result<Vec<String>, StoreError> {
    let mut warnings = Vec::new();
    for role in lost.iter().filter(|role| **role != Role::Admin) {
        if let Some(warning) = suspension::last_holder(target, *role, rows::holders(tx, *role).await?) {
            tracing::warn!(operator = %target, role = role.as_str(), "{warning}");
            warnings.push(warning);
        }
    }
    Ok(warnings)
}

/// In `tx`, the entries of suspension `change` lapsed (its
/// `operator_change.expired` written by the caller): `operator.suspension_lapsed`,
/// logged, and its condition cleared.
pub(super) async fn lapse(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    change: &Change,
) -> Result<(), OperatorError> {
    manage::suspension_ended(tx, cipher, change, ("operator.suspension_lapsed", None)).await
}
