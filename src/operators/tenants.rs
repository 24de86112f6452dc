//! Operators and tenants: an organization made with its contact address,
//! the address changed, and a tenant's first console admin invited. In
//! `production` the last two are changes another admin approves
//! ([`super::changes`]) and the invitation is mailed to the contact
//! address; an operator never invites anyone into an organization that has
//! console users (its own admins invite their team). In `sandbox` an admin
//! applies them alone and the link is shown.

use super::{
    grants::{self, Outcome},
    manage::{self, OperatorError, actor, authority},
    resource::{Change, ChangeKind, Operator, Proposal},
    rules::{self, Action, Refused},
};
use crate::{
    audit::{self, Actor, Detail, Record},
    environment::Environment,
    mail::Invitations,
    people::{self, Invited, PeopleError, resource::email_key, rules::TenantRole},
    pii::Cipher,
    store::{
        Organization, Store, StoreError, Tx, audit as log, console as users, now_micros,
        organizations::{insert_organization, lock_organization, set_contact as write_contact},
    },
};

/// How an invitation of a tenant's first admin went.
#[derive(Debug)]
pub enum FirstAdmin {
    /// `sandbox`: invited at once, the link shown.
    Invited(Invited),
    /// `production`: waits for another admin.
    Proposed(Box<Change>),
}

/// Creates organization `id` with `name` and `contact` (its contact
/// address), by `actor`, with its audit entry.
pub async fn create_organization(
    store: &Store,
    (id, name, contact): (&str, Option<&str>, Option<&str>),
    actor: &Actor,
) -> Result<Organization, OperatorError> {
    let contact = contact.map(checked).transpose()?;
    let mut tx = store.begin().await?;
    let organization = insert_organization(&mut tx, id, name, contact.as_deref()).await?;
    let text = format!("{} (contact {})", organization.name, contact.as_deref().unwrap_or("none"));
    let entry = on_organization(actor, "organization.created", id, Some(&text));
    let detail = contact.as_deref().map(|contact| contact_detail(id, contact));
    audit::append(&mut tx, store.cipher().ok(), Record { detail, ..entry }).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(organization)
}

/// Creates an organization (without a contact address, nor an audit
/// entry): `dev`'s seed, and the tests' tenants. Ids are short machine
/// names: letters, digits, `-` and `_`.
pub async fn create_bare_organization(
    store: &Store,
    id: &str,
    name: Option<&str>,
) -> Result<Organization, StoreError> {
    let mut tx = store.begin().await?;
    let organization = insert_organization(&mut tx, id, name, None).await?;
    tx.commit().await?;
    Ok(organization)
}

/// Sets `organization`'s contact address on `admin`'s authority: at once
/// in `sandbox`, a change another admin approves in `production`.
pub async fn set_contact(
    store: &Store,
    environment: Environment,
    admin: &Operator,
    (organization, email): (&str, &str),
    reason: Option<&str>,
) -> Result<Outcome<Organization>, OperatorError> {
    rules::permits(admin, Action::Tenants)?;
    let email = checked(email)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    locked(&mut tx, organization).await?;
    let outcome = match environment {
        Environment::Sandbox => {
            let why = reason.unwrap_or("set by an admin");
            let to = (organization, email.as_str());
            Outcome::Applied(apply_contact(&mut tx, (cipher, None), &actor(admin), to, why).await?)
        }
        Environment::Production => {
            let proposal = Proposal { email: Some(email), ..Proposal::default() };
            let target = (ChangeKind::Contact, organization);
            Outcome::Proposed(Box::new(
                grants::propose(&mut tx, cipher, admin, target, proposal, reason).await?,
            ))
        }
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(outcome)
}

/// Invites `email` as `organization`'s first console admin on `admin`'s
/// authority: refused once the organization has a console user; in
/// `production` a change another admin approves, at the organization's
/// contact address only, mailed there when approved.
pub async fn invite_first_admin(
    store: &Store,
    (environment, invitations): (Environment, Option<&Invitations>),
    admin: &Operator,
    (organization, email, role): (&str, &str, TenantRole),
) -> Result<FirstAdmin, OperatorError> {
    rules::permits(admin, Action::Tenants)?;
    let email = checked(email)?;
    manage::mailer(environment, invitations)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let found = locked(&mut tx, organization).await?;
    untouched(&mut tx, cipher, organization).await?;
    if role != TenantRole::Admin {
        return Err(Refused::FirstUserAdmin.into());
    }
    let outcome = match environment {
        Environment::Sandbox => {
            let who = (email.as_str(), TenantRole::Admin);
            let invited = people::invite_in(&mut tx, cipher, organization, who, &actor(admin), None).await;
            FirstAdmin::Invited(invited.map_err(people_error)?)
        }
        Environment::Production => {
            let contact = held(&mut tx, &found).await?;
            if email_key(&email) != email_key(&contact) {
                return Err(Refused::NotContact(contact).into());
            }
            let proposal = Proposal { email: Some(contact), ..Proposal::default() };
            let target = (ChangeKind::FirstAdmin, organization);
            FirstAdmin::Proposed(Box::new(
                grants::propose(&mut tx, cipher, admin, target, proposal, None).await?,
            ))
        }
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(outcome)
}

/// Applies an approved `organization.contact` change in `tx`. With
/// `mailer` (`production`) the change is mailed, in `tx`, to the previous
/// contact address as well as the new one: the tenant hears of a change
/// made to take its address away.
pub(super) async fn apply_contact(
    tx: &mut Tx,
    (cipher, mailer): (Option<&Cipher>, Option<&Invitations>),
    by: &Actor,
    (organization, email): (&str, &str),
    why: &str,
) -> Result<Organization, OperatorError> {
    let before = locked(tx, organization).await?;
    let text = format!("{email}: {why}");
    let entry = on_organization(by, "organization.contact_set", organization, Some(&text));
    let detail = Some(contact_detail(organization, email));
    audit::append(tx, cipher, Record { detail, ..entry }).await?;
    write_contact(tx, organization, email).await?;
    if mailer.is_some() {
        let previous = before.contact_email.filter(|previous| email_key(previous) != email_key(email));
        let (subject, body) = crate::mail::contact_changed(organization, previous.as_deref(), email);
        for to in previous.as_deref().into_iter().chain([email]) {
            crate::mail::queue(tx, cipher, to, &subject, &body).await?;
        }
    }
    locked(tx, organization).await
}

/// Applies an approved `organization.first_admin` change in `tx`: the
/// organization still without console users and its contact address the
/// one proposed; the invitation mailed there. Answers the address.
pub(super) async fn apply_first_admin(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: &Actor,
    change: &Change,
    invitations: Option<&Invitations>,
) -> Result<String, OperatorError> {
    let organization = locked(tx, &change.target).await?;
    untouched(tx, cipher, &organization.id).await?;
    let proposed = change.proposal.email.as_deref().unwrap_or_default();
    if held(tx, &organization).await? != proposed {
        return Err(Refused::ContactChanged(organization.id).into());
    }
    let invitations = invitations.ok_or(Refused::NoMail)?;
    let who = (proposed, TenantRole::Admin);
    let invited = people::invite_in(tx, cipher, &organization.id, who, by, Some(invitations)).await;
    Ok(invited.map_err(people_error)?.mailed_to.unwrap_or_default())
}

/// Refused once `organization` has a console user. Invitations that
/// lapsed unused (never enrolled, no link alive) are removed first, each
/// with its entry, so that a tenant whose first admin never came is not
/// locked out.
async fn untouched(tx: &mut Tx, cipher: Option<&Cipher>, organization: &str) -> Result<(), OperatorError> {
    for user in users::lapsed_invitations(tx, organization, now_micros()).await? {
        let entry = Record {
            actor: &Actor::System,
            action: "console_user.removed",
            target_kind: "console_user",
            target_id: &user,
            organization_id: Some(organization),
            reason: Some("the invitation lapsed unused"),
            request_id: None,
            detail: None,
        };
        audit::append(tx, cipher, entry).await?;
        users::remove(tx, &user, now_micros()).await?;
    }
    if users::tenant_users(tx, organization).await? > 0 {
        return Err(Refused::TenantsOwnTeam(organization.into()).into());
    }
    Ok(())
}

/// What the entries about an organization's contact address record of it:
/// the SHA-256 of the organization's id and the address (compared as
/// emails are).
pub fn contact_digest(organization: &str, email: &str) -> String {
    let fields = serde_json::json!([organization, email_key(email)]);
    crate::api_key::sha256_hex(fields.to_string().as_bytes())
}

fn contact_detail(organization: &str, email: &str) -> Detail {
    Detail { contact_sha256: Some(contact_digest(organization, email)), ..Detail::default() }
}

/// `organization`'s contact address, when the last entry that set it
/// recorded this very address: one written with plain SQL is refused.
async fn held(tx: &mut Tx, organization: &Organization) -> Result<String, OperatorError> {
    let contact =
        organization.contact_email.clone().ok_or_else(|| Refused::NoContact(organization.id.clone()))?;
    let actions = ("organization.created", "organization.contact_set");
    let last = log::last_entry_about(tx, actions, &organization.id).await?;
    let recorded =
        last.and_then(|e| e.detail.as_deref().and_then(Detail::parse)).and_then(|d| d.contact_sha256);
    if recorded != Some(contact_digest(&organization.id, &contact)) {
        return Err(Refused::ContactUnrecorded(organization.id.clone()).into());
    }
    Ok(contact)
}

async fn locked(tx: &mut Tx, organization: &str) -> Result<Organization, OperatorError> {
    Ok(lock_organization(tx, organization)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("organization {organization}")))?)
}

fn checked(email: &str) -> Result<String, OperatorError> {
    people::check_email(email).map_err(people_error)
}

fn people_error(error: PeopleError) -> OperatorError {
    match error {
        PeopleError::Store(error) => OperatorError::Store(error),
        PeopleError::Refused(message) => OperatorError::Store(StoreError::Refused(message)),
        PeopleError::Invalid(message) => OperatorError::Invalid(message),
    }
}

fn on_organization<'a>(
    actor: &'a Actor,
    action: &'a str,
    id: &'a str,
    reason: Option<&'a str>,
) -> Record<'a> {
    Record {
        target_kind: "organization",
        organization_id: Some(id),
        ..manage::record(actor, action, id, reason)
    }
}
