//! Proposed changes of operators decided: approved (and applied in the
//! same transaction) or refused by another enabled admin than the
//! proposer and the change's target, or expired after
//! [`rules::CHANGE_VALID`] undecided. Each step is an audit entry; a change
//! whose proposal the log does not hold (a row written with plain SQL) is
//! never applied.

use super::{
    grants,
    manage::{self, Created, OperatorError, actor, authority, on_change},
    resource::{Change, ChangeKind, ChangeStatus, Operator},
    rules::{self, Refused},
    suspension, taking, tenants,
};
use crate::{
    audit::{self, Actor},
    environment::Environment,
    mail::Invitations,
    pii::Cipher,
    store::{
        Organization, Store, StoreError, Tx, conditions, now_micros, operator_changes as rows,
        operators as ops,
    },
};

/// What an approval applied.
#[derive(Debug)]
pub enum Applied {
    Created(Created),
    Changed(Operator),
    /// An organization's contact address set.
    Organization(Organization),
    /// A tenant's first admin invited: the address the link was mailed to.
    Invited(String),
}

/// The changes, newest first (only pending ones when asked), after those
/// past their time are expired.
pub async fn list(store: &Store, pending_only: bool, limit: i64) -> Result<Vec<Change>, OperatorError> {
    expire(store).await?;
    Ok(store.operator_changes(pending_only, limit).await?)
}

/// Expires every pending change past its time, each with its entry.
pub async fn expire(store: &Store) -> Result<(), OperatorError> {
    expire_at(store, now_micros()).await
}

/// Expires every pending change past its time at `now`, each with its
/// entry (and a suspension's lapse, see [`taking::lapse`]).
pub async fn expire_at(store: &Store, now: i64) -> Result<(), OperatorError> {
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    let before = now - rules::CHANGE_VALID.as_micros() as i64;
    for id in rows::pending_before(&mut tx, before).await? {
        expire_one(&mut tx, store.cipher().ok(), &id, now).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// Expires every pending change proposed before the log's
/// authentication (its proposal's entry carries no MAC: it could never be
/// decided), each with its entry, so that it is proposed again. Answers
/// how many.
pub async fn expire_unauthenticated(store: &Store) -> Result<usize, OperatorError> {
    let Some(since) = store.audit_authority().await?.authenticated_at() else { return Ok(0) };
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    let now = now_micros();
    let mut expired = 0;
    for id in rows::pending_before(&mut tx, i64::MAX).await? {
        let proposed = crate::store::audit::entry_about(&mut tx, "operator_change.proposed", &id).await?;
        if proposed.is_some_and(|entry| entry.seq <= since) {
            expire_one(&mut tx, store.cipher().ok(), &id, now).await?;
            expired += 1;
        }
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(expired)
}

async fn expire_one(tx: &mut Tx, cipher: Option<&Cipher>, id: &str, now: i64) -> Result<(), OperatorError> {
    let change = rows::lock(tx, id).await?;
    if rows::decide(tx, id, ChangeStatus::Expired, None, None, now).await? {
        audit::append(tx, cipher, on_change(&Actor::System, "operator_change.expired", id, None)).await?;
        if let Some(change) = change.filter(|c| c.kind.suspends()) {
            taking::lapse(tx, cipher, &change).await?;
        }
    }
    Ok(())
}

/// Lapses every suspension past its time at `now` (its change expired,
/// with `operator.suspension_lapsed`), and raises again, with a warning in
/// the log, every one still in force: the alarm lasts as the suspension
/// does. Answers how many are in force.
pub async fn sweep(store: &Store, now: i64) -> Result<usize, OperatorError> {
    expire_at(store, now).await?;
    let mut tx = store.begin().await?;
    // Under the head's lock, as every step of a suspension: an alarm is
    // never raised again for one that ended meanwhile.
    audit::lock(&mut tx).await?;
    let pending = rows::pending_suspensions(&mut tx, None, taking::since(now)).await?;
    let swept = now_micros();
    for change in &pending {
        let message = taking::alarm(change);
        conditions::raise(&mut tx, None, suspension::CONDITION, &change.target, &message).await?;
        tracing::warn!(operator = %change.target, change = %change.id, "{message}");
    }
    conditions::clear_unseen(&mut tx, suspension::CONDITION, swept).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(pending.len())
}

/// Approves change `id` on `admin`'s authority and applies it.
pub async fn approve(
    store: &Store,
    (environment, invitations): (Environment, Option<&Invitations>),
    admin: &Operator,
    id: &str,
) -> Result<(Change, Applied), OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    let mailer = manage::mailer(environment, invitations)?;
    expire(store).await?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    let change = decidable(&mut tx, admin, id).await?;
    // Its proposer still an enabled admin: the proposal of an admin since
    // disabled or demoted is refused, not approved (those of a key since
    // revoked were refused with the revocation).
    let proposer = ops::lock(&mut tx, &change.proposed_by).await?;
    if !proposer.is_some_and(|p| p.is_enabled() && p.has(super::resource::Role::Admin)) {
        return Err(Refused::ProposerGone(change.proposed_by.clone()).into());
    }
    let (by, text) = (actor(admin), grants::describe(&change));
    audit::append(&mut tx, cipher, on_change(&by, "operator_change.approved", id, Some(&text))).await?;
    let applied = apply(&mut tx, (cipher, mailer), environment, admin, &change).await?;
    if let (Applied::Created(created), Some(invitations)) = (&applied, mailer) {
        manage::mail_invitation(&mut tx, cipher, invitations, &created.operator, &created.enrol_path).await?;
    }
    rows::decide(&mut tx, id, ChangeStatus::Applied, Some(&admin.id), None, now_micros()).await?;
    let change =
        rows::lock(&mut tx, id).await?.ok_or_else(|| StoreError::NotFound(format!("change {id}")))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok((change, applied))
}

/// Refuses change `id` on `admin`'s authority, for `reason`.
pub async fn refuse(
    store: &Store,
    admin: &Operator,
    id: &str,
    reason: &str,
) -> Result<Change, OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    expire(store).await?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    let change = decidable(&mut tx, admin, id).await?;
    let by = actor(admin);
    audit::append(&mut tx, cipher, on_change(&by, "operator_change.refused", id, Some(reason))).await?;
    rows::decide(&mut tx, id, ChangeStatus::Refused, Some(&admin.id), Some(reason), now_micros()).await?;
    if change.kind.suspends() {
        manage::suspension_ended(&mut tx, cipher, &change, ("operator.suspension_ended", Some(reason)))
            .await?;
    }
    let change =
        rows::lock(&mut tx, id).await?.ok_or_else(|| StoreError::NotFound(format!("change {id}")))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(change)
}

/// Change `id` locked, as `admin` may decide it: the head locked first,
/// the admin still an enabled admin, the change pending and in time, its
/// proposal in the log (the caller expired those past their time just
/// before; one that passed it since is refused all the same).
async fn decidable(tx: &mut Tx, admin: &Operator, id: &str) -> Result<Change, OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    audit::lock(tx).await?;
    authority(tx, admin).await?;
    let change = rows::lock(tx, id).await?.ok_or_else(|| StoreError::NotFound(format!("change {id}")))?;
    rules::may_decide(admin, &change)?;
    if rules::expired(change.created_at.timestamp_micros(), now_micros()) {
        return Err(Refused::Decided { id: id.to_string(), status: ChangeStatus::Expired.as_str() }.into());
    }
    manage::recorded(tx, &change).await?;
    Ok(change)
}

async fn apply(
    tx: &mut Tx,
    (cipher, mailer): (Option<&Cipher>, Option<&Invitations>),
    environment: Environment,
    admin: &Operator,
    change: &Change,
) -> Result<Applied, OperatorError> {
    let by = actor(admin);
    let why = format!("change {} proposed by {}", change.id, change.proposed_by);
    let proposal = &change.proposal;
    let missing =
        |what: &str| StoreError::Corrupt(format!("change {}: its proposal has no {what}", change.id));
    Ok(match change.kind {
        ChangeKind::Create => {
            let roles = proposal.roles.clone().ok_or_else(|| missing("roles"))?;
            let mut operator = manage::fresh(&manage::NewOperator {
                name: proposal.name.clone().ok_or_else(|| missing("name"))?,
                email: proposal.email.clone().ok_or_else(|| missing("email"))?,
                roles,
            });
            operator.id = change.target.clone();
            let reason = format!("{}: {why}", super::resource::roles_text(&operator.roles));
            let keyed = environment == Environment::Sandbox;
            let change_id = Some(change.id.as_str());
            let by = manage::By { actor: &by, action: "operator.created", reason: Some(&reason), change_id };
            Applied::Created(manage::insert(tx, cipher, by, operator, (environment, keyed)).await?)
        }
        ChangeKind::Roles => {
            let roles = proposal.roles.as_deref().ok_or_else(|| missing("roles"))?;
            let current = manage::locked(tx, &change.target).await?;
            let mut from = proposal.from_roles.clone().unwrap_or_default();
            from.sort();
            if current.roles != from {
                return Err(Refused::Stale(change.target.clone()).into());
            }
            Applied::Changed(
                grants::apply_roles(tx, cipher, &by, &change.target, roles, (&why, Some(&change.id))).await?,
            )
        }
        ChangeKind::Enable => Applied::Changed(
            grants::apply_enable(tx, cipher, &by, &change.target, (&why, Some(&change.id))).await?,
        ),
        ChangeKind::Contact => {
            let email = proposal.email.as_deref().ok_or_else(|| missing("email"))?;
            let to = (change.target.as_str(), email);
            Applied::Organization(tenants::apply_contact(tx, (cipher, mailer), &by, to, &why).await?)
        }
        ChangeKind::FirstAdmin => {
            Applied::Invited(tenants::apply_first_admin(tx, cipher, &by, change, mailer).await?)
        }
        ChangeKind::Disable | ChangeKind::Demote => {
            Applied::Changed(taking::apply(tx, cipher, &by, change, &why).await?.operator)
        }
    })
}
