//! Grants: a new operator, roles added to an operator, a disabled operator
//! enabled. In `sandbox` an admin applies one alone; in `production` it is
//! a proposed [`Change`] that another admin approves ([`super::changes`]),
//! except an admin added during [`genesis`]. A roles set, and taking power
//! away (roles removed, an operator disabled), are in [`super::taking`].

use super::{
    genesis,
    manage::{self, By, Created, NewOperator, OperatorError, actor, authority, locked, record},
    resource::{Change, ChangeKind, ChangeStatus, Operator, Proposal, Role, roles_text},
    rules::{self, Action, Grant},
};
use crate::{
    audit::{self, Actor, Detail, Record},
    environment::Environment,
    mail::Invitations,
    pii::Cipher,
    store::{Store, StoreError, Tx, now_micros, operator_changes as changes, operators as rows},
};

/// What a grant did: applied at once, or proposed for another admin; what
/// taking power away did: applied at once, or its target suspended while
/// the change waits (see [`super::suspension`]).
#[derive(Debug)]
pub enum Outcome<T> {
    Applied(T),
    Proposed(Box<Change>),
    Suspended(Box<Change>),
}

/// Creates an operator on `admin`'s authority, or proposes it.
pub async fn create(
    store: &Store,
    (environment, invitations): (Environment, Option<&Invitations>),
    admin: &Operator,
    new: NewOperator,
) -> Result<Outcome<Created>, OperatorError> {
    rules::permits(admin, Action::Operators)?;
    new.check()?;
    let mailer = manage::mailer(environment, invitations)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let operator = manage::fresh(&new);
    let outcome = match grant(&mut tx, cipher, environment, ChangeKind::Create, &new.roles).await? {
        Grant::Propose => {
            taken(&mut tx, &operator.email).await?;
            let proposal = Proposal {
                name: Some(operator.name.clone()),
                email: Some(operator.email.clone()),
                roles: Some(operator.roles.clone()),
                from_roles: None,
            };
            let change = propose(&mut tx, cipher, admin, (ChangeKind::Create, &operator.id), proposal, None);
            Outcome::Proposed(Box::new(change.await?))
        }
        grant => {
            let action =
                if grant == Grant::Genesis { "operator.genesis_created" } else { "operator.created" };
            let roles = roles_text(&operator.roles);
            let by = By { actor: &actor(admin), action, reason: Some(roles.as_str()), change_id: None };
            let keyed = environment == Environment::Sandbox;
            let created = manage::insert(&mut tx, cipher, by, operator, (environment, keyed)).await?;
            if let Some(invitations) = mailer {
                manage::mail_invitation(&mut tx, cipher, invitations, &created.operator, &created.enrol_path)
                    .await?;
            }
            Outcome::Applied(created)
        }
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(outcome)
}

/// Enables the disabled operator `target` on `admin`'s authority, as a
/// grant: its keys that were live work again.
pub async fn enable(
    store: &Store,
    environment: Environment,
    admin: &Operator,
    target: &str,
    reason: &str,
) -> Result<Outcome<Operator>, OperatorError> {
    rules::may_disable(admin, target)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let current = locked(&mut tx, target).await?;
    if current.is_enabled() {
        return Err(OperatorError::Invalid(format!("operator {target} is enabled")));
    }
    let outcome = match grant(&mut tx, cipher, environment, ChangeKind::Enable, &[]).await? {
        Grant::Propose => {
            // Who comes back, as the approver reads it: name, address, roles.
            let proposal = Proposal {
                name: Some(current.name),
                email: Some(current.email),
                roles: Some(current.roles),
                from_roles: None,
            };
            let to = (ChangeKind::Enable, target);
            let change = propose(&mut tx, cipher, admin, to, proposal, Some(reason));
            Outcome::Proposed(Box::new(change.await?))
        }
        _ => Outcome::Applied(apply_enable(&mut tx, cipher, &actor(admin), target, (reason, None)).await?),
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(outcome)
}

/// How a grant goes now: genesis is read (and ended when two admins have
/// enrolled) in `production` only.
pub(super) async fn grant(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    environment: Environment,
    kind: ChangeKind,
    roles: &[Role],
) -> Result<Grant, OperatorError> {
    let open = environment == Environment::Production && genesis::open(tx, cipher).await?;
    Ok(rules::grant(environment, open, kind, roles)?)
}

/// Refuses a new operator's email when an operator or a pending proposal
/// has it.
async fn taken(tx: &mut Tx, email: &str) -> Result<(), OperatorError> {
    if changes::email_pending(tx, email).await? {
        return Err(
            StoreError::Waiting(format!("a pending change proposes an operator with email {email}")).into()
        );
    }
    if rows::email_taken(tx, email).await? {
        return Err(StoreError::taken(
            format!("operator_email:{email}"),
            format!("an operator with email {email} exists"),
        )
        .into());
    }
    Ok(())
}

/// Writes a pending change of `kind` about `target`, with its entry.
pub(super) async fn propose(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    admin: &Operator,
    (kind, target): (ChangeKind, &str),
    proposal: Proposal,
    reason: Option<&str>,
) -> Result<Change, OperatorError> {
    let change = Change {
        id: format!("chg_{}", uuid::Uuid::new_v4().simple()),
        kind,
        status: ChangeStatus::Pending,
        proposed_by: admin.id.clone(),
        target: target.to_string(),
        created_at: chrono::DateTime::from_timestamp_micros(now_micros()).unwrap_or_default(),
        decided_by: None,
        decided_at: None,
        proposal,
        reason: reason.map(str::to_string),
        decision_reason: None,
    };
    let text = describe(&change);
    let by = actor(admin);
    let entry = manage::on_change(&by, "operator_change.proposed", &change.id, Some(&text));
    let detail = Detail { proposal_sha256: Some(change.digest()), ..Detail::default() };
    audit::append(tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    changes::insert(tx, &change).await?;
    Ok(change)
}

/// A change as its entries' reason says it: its kind, its target, what it
/// proposes and why.
pub(super) fn describe(change: &Change) -> String {
    let mut text = format!("{} of {}", change.kind.as_str(), change.target);
    let proposal = &change.proposal;
    match (&proposal.name, &proposal.email) {
        (Some(name), Some(email)) => text.push_str(&format!(" ({name}, {email})")),
        (None, Some(email)) => text.push_str(&format!(" ({email})")),
        _ => {}
    }
    if let Some(roles) = &proposal.roles {
        text.push_str(&format!(" with roles {}", roles_text(roles)));
    }
    if let Some(reason) = &change.reason {
        text.push_str(&format!(": {reason}"));
    }
    text
}

/// Sets `target`'s roles, with its entry by `by` (for `reason`, applying
/// the approved change `change_id` if any); the service keeps an enabled
/// admin.
pub(super) async fn apply_roles(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: &Actor,
    target: &str,
    roles: &[Role],
    (reason, change_id): (&str, Option<&str>),
) -> Result<Operator, OperatorError> {
    let reason = format!("{}: {reason}", roles_text(roles));
    let entry = record(by, "operator.roles_set", target, Some(&reason));
    let detail = Detail { change_id: change_id.map(str::to_string), ..Detail::roles(roles) };
    audit::append(tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    locked(tx, target).await?;
    rows::set_roles(tx, target, roles).await?;
    let operator = locked(tx, target).await?;
    rules::keeps_an_admin(rows::enabled_admins(tx, now_micros()).await?)?;
    Ok(operator)
}

/// Enables `target`, with its entry by `by` (for `reason`, applying the
/// approved change `change_id` if any).
pub(super) async fn apply_enable(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: &Actor,
    target: &str,
    (reason, change_id): (&str, Option<&str>),
) -> Result<Operator, OperatorError> {
    let detail = change_id.map(|id| Detail { change_id: Some(id.to_string()), ..Detail::default() });
    audit::append(tx, cipher, Record { detail, ..record(by, "operator.enabled", target, Some(reason)) })
        .await?;
    rows::enable(tx, target).await?;
    locked(tx, target).await
}
