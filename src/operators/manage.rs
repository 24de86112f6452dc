//! Operators managed: the bootstrap from the store alone, invitations
//! (grants, which may wait for another admin, are in [`super::grants`];
//! power taken away in [`super::taking`]). Each change is one transaction with
//! its audit entry; the chain's head is locked first, so that concurrent
//! changes are ordered (two bootstraps cannot both find no admin).

use super::{
    genesis, key_rules,
    resource::{Change, ChangeStatus, Operator, Role},
    rules::{self, Refused},
};
use crate::{
    api_key::{self, NewSecret, OPERATOR_PREFIX},
    audit::{self, Actor, Detail, Record},
    environment::Environment,
    mail::{self, Invitations},
    people::{self, PeopleError},
    pii::Cipher,
    store::{Store, StoreError, Tx, audit as log, now_micros, operator_changes, operators as rows},
};

/// Why a change of operators did not happen.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An operator to create.
#[derive(Debug, Clone)]
pub struct NewOperator {
    pub name: String,
    pub email: String,
    pub roles: Vec<Role>,
}

/// A created operator, its console enrol link's path and, outside
/// `production` (and for the bootstrap's admin), its first key, both shown
/// once to their owner only. `Debug` shows neither.
pub struct Created {
    pub operator: Operator,
    pub enrol_path: String,
    pub key: Option<NewSecret>,
}

impl std::fmt::Debug for Created {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Created")
            .field("operator", &self.operator.id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl NewOperator {
    pub(super) fn check(&self) -> Result<(), OperatorError> {
        if self.name.trim().is_empty() {
            return Err(OperatorError::Invalid("name: an operator needs a name".into()));
        }
        people::check_email(&self.email).map_err(people_error)?;
        if self.roles.is_empty() {
            return Err(Refused::NoRole.into());
        }
        Ok(())
    }
}

/// Creates an operator from the store alone, recorded as a bootstrap by
/// `actor` (a local one): in `production` one admin, once ever (see
/// [`genesis`]), with its key, that person's own; in `sandbox` while no
/// enabled admin with a live key exists.
pub async fn bootstrap(
    store: &Store,
    environment: Environment,
    actor: &Actor,
    new: NewOperator,
) -> Result<Created, OperatorError> {
    new.check()?;
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    let existed = environment == Environment::Production && genesis::admin_existed(&mut tx).await?;
    rules::may_bootstrap_in(
        environment,
        &new.roles,
        existed,
        rows::enabled_admins(&mut tx, now_micros()).await?,
    )?;
    let by = By { actor, action: "operator.bootstrapped", reason: None, change_id: None };
    let created = insert(&mut tx, store.cipher().ok(), by, fresh(&new), (environment, true)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(created)
}

/// The audit actor of an operator.
pub fn actor(operator: &Operator) -> Actor {
    Actor::Operator { id: operator.id.clone(), name: operator.name.clone() }
}

pub(super) fn fresh(new: &NewOperator) -> Operator {
    Operator {
        id: format!("op_{}", uuid::Uuid::new_v4().simple()),
        name: new.name.trim().to_string(),
        email: new.email.trim().to_string(),
        roles: new.roles.clone(),
        disabled_at: None,
        created_at: chrono::DateTime::from_timestamp_micros(now_micros()).unwrap_or_default(),
    }
}

/// Who grants, and how: an entry's actor, action and reason, and the
/// approved change it applies, if any.
pub(super) struct By<'a> {
    pub actor: &'a Actor,
    pub action: &'a str,
    pub reason: Option<&'a str>,
    pub change_id: Option<&'a str>,
}

/// Writes `operator` with its entry (the actor, the action and the
/// entry's reason) and its console sign-in; with its first key when
/// `keyed`.
pub(super) async fn insert(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: By<'_>,
    operator: Operator,
    (environment, keyed): (Environment, bool),
) -> Result<Created, OperatorError> {
    let By { actor, action, reason, change_id } = by;
    let key = keyed.then(|| api_key::generate_with(OPERATOR_PREFIX));
    let now = operator.created_at.timestamp_micros();
    let expires_at = key_rules::key_expiry(environment, now, None, None)?;
    let link = people::Link::new();
    let entry = record(actor, action, &operator.id, reason);
    let detail = Detail {
        key_id: key.as_ref().map(|k| k.id.clone()),
        expires_at: key.as_ref().and(expires_at),
        link_sha256: Some(link.hash.clone()),
        change_id: change_id.map(str::to_string),
        ..Detail::roles(&operator.roles)
    };
    audit::append(tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    rows::insert(tx, &operator, now).await?;
    let invited =
        people::invite_operator(tx, &operator.id, &operator.email, &link).await.map_err(people_error)?;
    if let Some(key) = &key {
        let hash = api_key::stored(&key.hash);
        let row = rows::NewKey {
            id: &key.id,
            operator_id: &operator.id,
            hash: &hash,
            created_at: now,
            expires_at,
            parent: None,
        };
        rows::insert_key(tx, row).await?;
    }
    Ok(Created { operator, enrol_path: invited.enrol_path, key })
}

/// How a production invitation reaches its owner: mail, required (a
/// `sandbox` answer shows the link instead).
pub(super) fn mailer(
    environment: Environment,
    invitations: Option<&Invitations>,
) -> Result<Option<&Invitations>, Refused> {
    match (environment, invitations) {
        (Environment::Production, None) => Err(Refused::NoMail),
        (Environment::Production, Some(invitations)) => Ok(Some(invitations)),
        (Environment::Sandbox, _) => Ok(None),
    }
}

/// Queues `operator`'s invitation to `enrol_path` in `tx`, to the
/// operator's recorded address.
pub(super) async fn mail_invitation(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    invitations: &Invitations,
    operator: &Operator,
    enrol_path: &str,
) -> Result<(), OperatorError> {
    let what = format!("an operator ({})", super::resource::roles_text(&operator.roles));
    let to = (operator.email.as_str(), operator.name.as_str());
    mail::queue_invitation(tx, cipher, invitations, to, enrol_path, &what).await?;
    Ok(())
}

/// How an invitation went: mailed to the operator's recorded address, or
/// (`sandbox` without mail) its link shown.
#[derive(Debug)]
pub enum Invitation {
    Sent { to: String },
    Shown { enrol_path: String },
}

/// A fresh enrol link for operator `target`, who has not enrolled, on
/// `admin`'s authority: mailed to the recorded address (required in
/// `production`), its earlier links void.
pub async fn invite(
    store: &Store,
    (environment, invitations): (Environment, Option<&Invitations>),
    admin: &Operator,
    target: &str,
) -> Result<Invitation, OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    let mailer = mailer(environment, invitations)?.or(invitations);
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let operator = locked(&mut tx, target).await?;
    if !operator.is_enabled() {
        return Err(OperatorError::Invalid(format!("operator {target} is disabled: it is invited no more")));
    }
    // Mailed to the address the service recorded, or to no one.
    if !rows::sealed(&mut tx, target).await? {
        return Err(StoreError::Refused(format!(
            "operator {target}'s row was written outside the service: it is invited no more (see `audit verify`)"
        ))
        .into());
    }
    let (email, path) =
        people::operator_link_in(&mut tx, cipher, target, &actor(admin)).await.map_err(|e| match e {
            PeopleError::Store(error) => OperatorError::Store(error),
            other => OperatorError::Invalid(other.to_string()),
        })?;
    let invitation = match mailer {
        Some(invitations) => {
            mail_invitation(&mut tx, cipher, invitations, &operator, &path).await?;
            Invitation::Sent { to: email }
        }
        None => Invitation::Shown { enrol_path: path },
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(invitation)
}

fn people_error(error: PeopleError) -> OperatorError {
    match error {
        PeopleError::Store(error) => OperatorError::Store(error),
        other => OperatorError::Invalid(other.to_string()),
    }
}

/// `admin` as the store holds it now, its row locked: still enabled and an
/// admin, and not suspended (a change committed since its request was
/// authenticated counts).
pub(super) async fn authority(tx: &mut Tx, admin: &Operator) -> Result<(), OperatorError> {
    let now = locked(tx, &admin.id).await?;
    if !now.is_enabled() || !now.has(Role::Admin) || !rows::sealed(tx, &admin.id).await? {
        return Err(Refused::NoLongerAdmin(admin.id.clone()).into());
    }
    let since = now_micros().saturating_sub(super::suspension::LAPSES_AFTER.as_micros() as i64);
    let suspended = operator_changes::pending_suspensions(tx, Some(&admin.id), since).await?;
    if let Some(change) = suspended.first() {
        return Err(Refused::Suspended(admin.id.clone(), change.id.clone()).into());
    }
    Ok(())
}

pub(super) async fn locked(tx: &mut Tx, id: &str) -> Result<Operator, OperatorError> {
    Ok(rows::lock(tx, id).await?.ok_or_else(|| StoreError::NotFound(format!("operator {id}")))?)
}

/// Whether `change` is the one its proposal's entry recorded (its
/// proposer and digest), and no entry decided it yet: a change row written
/// or bent with plain SQL is refused.
pub(super) async fn recorded(tx: &mut Tx, change: &Change) -> Result<(), OperatorError> {
    let id = change.id.as_str();
    let proposed = log::entry_about(tx, "operator_change.proposed", id).await?;
    let recorded = proposed.is_some_and(|entry| {
        let detail = entry.detail.as_deref().and_then(crate::audit::Detail::parse);
        let digest = detail.and_then(|d| d.proposal_sha256);
        entry.actor == format!("operator:{}", change.proposed_by) && digest == Some(change.digest())
    });
    let mut decided = false;
    for action in DECIDING {
        decided |= log::has_entry(tx, action, id).await?;
    }
    if !recorded || decided {
        return Err(Refused::Unrecorded(id.to_string()).into());
    }
    Ok(())
}

/// The entries that end a change.
const DECIDING: [&str; 4] = [
    "operator_change.approved",
    "operator_change.refused",
    "operator_change.expired",
    "operator_change.completed",
];

/// Refuses every pending change `proposer` proposed, in `tx`, for
/// `reason`, each with its entry by the service.
pub(super) async fn refuse_pending_of(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    proposer: &str,
    reason: &str,
) -> Result<(), OperatorError> {
    for id in operator_changes::pending_of(tx, proposer).await? {
        let change = operator_changes::lock(tx, &id).await?;
        if operator_changes::decide(tx, &id, ChangeStatus::Refused, None, Some(reason), now_micros()).await? {
            audit::append(
                tx,
                cipher,
                on_change(&Actor::System, "operator_change.refused", &id, Some(reason)),
            )
            .await?;
            if let Some(change) = change.filter(|c| c.kind.suspends()) {
                suspension_ended(tx, cipher, &change, ("operator.suspension_ended", Some(reason))).await?;
            }
        }
    }
    Ok(())
}

/// In `tx`, the suspension `change` ended otherwise than by its
/// completion: `action` (`operator.suspension_ended` when refused,
/// `operator.suspension_lapsed`) recorded with the change's id, which the
/// log's replay reads as the suspension's end, and its alarm cleared.
pub(super) async fn suspension_ended(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    change: &Change,
    (action, reason): (&str, Option<&str>),
) -> Result<(), OperatorError> {
    let detail = Detail { change_id: Some(change.id.clone()), ..Detail::default() };
    let entry = record(&Actor::System, action, &change.target, reason);
    audit::append(tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    crate::store::conditions::clear(tx, None, super::suspension::CONDITION, &change.target).await?;
    tracing::warn!(operator = %change.target, change = %change.id, action, "a suspension ended uncompleted: the operator acts again");
    Ok(())
}

/// An entry about change `id`.
pub(super) fn on_change<'a>(
    actor: &'a Actor,
    action: &'a str,
    id: &'a str,
    reason: Option<&'a str>,
) -> Record<'a> {
    Record { target_kind: "operator_change", ..record(actor, action, id, reason) }
}

pub(super) fn record<'a>(
    actor: &'a Actor,
    action: &'a str,
    target: &'a str,
    reason: Option<&'a str>,
) -> Record<'a> {
    Record {
        actor,
        action,
        target_kind: "operator",
        target_id: target,
        organization_id: None,
        reason,
        request_id: None,
        detail: None,
    }
}
