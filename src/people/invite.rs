//! An invitation: a person added with a one-time enrol link, shown once
//! or mailed; a new link for one who has not enrolled yet.

use super::{
    ENROL_PATH, PeopleError, check_email, link_hash,
    members::member_of,
    record,
    resource::{Member, User, email_key},
    rules::{self, TenantRole},
    token,
};
use crate::{
    audit::{self, Actor, Detail, Record},
    mail::Invitations,
    pii::Cipher,
    store::{Store, StoreError, Tx, console as rows, now_micros},
};

/// A user just invited and its enrol link's path, shown once, or mailed
/// to the user's address (`mailed_to`; `production`). `Debug` leaves the
/// path out.
pub struct Invited {
    pub user: User,
    pub enrol_path: String,
    pub mailed_to: Option<String>,
}

impl std::fmt::Debug for Invited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invited").field("user", &self.user.id).finish_non_exhaustive()
    }
}

/// A one-time enrol link: its token (shown or mailed once) and the hash
/// the store keeps, which the audit entry that made the link records, so
/// that a link row written with plain SQL enrols no one.
pub struct Link {
    token: String,
    pub hash: String,
}

impl Link {
    pub fn new() -> Self {
        let token = token();
        Link { hash: link_hash(&token), token }
    }

    /// `/console/enrol/<token>`.
    pub fn path(&self) -> String {
        format!("{ENROL_PATH}{}", self.token)
    }

    /// What the entry that made the link records of it.
    pub fn detail(&self) -> Detail {
        Detail { link_sha256: Some(self.hash.clone()), ..Detail::default() }
    }
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}

/// Invites `email` to `organization`'s console with `role`, by `actor`
/// (the organization's admin, or an operator admin inviting its first
/// one); the link mailed when `mail` is given.
pub async fn invite(
    store: &Store,
    organization: &str,
    (email, role): (&str, TenantRole),
    actor: &Actor,
    mail: Option<&Invitations>,
) -> Result<Invited, PeopleError> {
    let mut tx = store.begin().await?;
    if crate::store::organizations::lock_organization(&mut tx, organization).await?.is_none() {
        return Err(StoreError::NotFound(format!("organization {organization}")).into());
    }
    let invited = invite_in(&mut tx, store.cipher().ok(), organization, (email, role), actor, mail).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(invited)
}

/// [`invite`] in the caller's transaction, of an organization it checked.
pub async fn invite_in(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    organization: &str,
    (email, role): (&str, TenantRole),
    actor: &Actor,
    mail: Option<&Invitations>,
) -> Result<Invited, PeopleError> {
    let email = check_email(email)?;
    let user = fresh(&email, Member::Tenant { organization_id: organization.into(), role });
    let link = Link::new();
    let entry = record(actor, "console_user.invited", &user.id, Some(organization), Some(role.as_str()));
    audit::append(tx, cipher, Record { detail: Some(link.detail()), ..entry }).await?;
    let invited = insert(tx, user, &link).await?;
    mailed(tx, cipher, invited, mail, organization).await
}

/// `invited`, its link queued to its address when `mail` is given.
async fn mailed(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    mut invited: Invited,
    mail: Option<&Invitations>,
    organization: &str,
) -> Result<Invited, PeopleError> {
    let Some(invitations) = mail else { return Ok(invited) };
    let role = invited.user.role().map_or("a user", |role| role.as_str());
    let what = format!("{role} of the console of organization {organization}");
    let (to, path) = (invited.user.email.clone(), invited.enrol_path.as_str());
    crate::mail::queue_invitation(tx, cipher, invitations, (&to, &to), path, &what).await?;
    invited.mailed_to = Some(to);
    Ok(invited)
}

/// Adds the console sign-in of operator `operator_id` in `tx`, the
/// operator's own creation, whose entry recorded `link`.
pub async fn invite_operator(
    tx: &mut Tx,
    operator_id: &str,
    email: &str,
    link: &Link,
) -> Result<Invited, PeopleError> {
    let email = check_email(email)?;
    insert(tx, fresh(&email, Member::Operator { operator_id: operator_id.into() }), link).await
}

fn fresh(email: &str, member: Member) -> User {
    User {
        id: format!("usr_{}", uuid::Uuid::new_v4().simple()),
        email: email.to_string(),
        member,
        enrolled: false,
        totp: false,
        created_at: chrono::DateTime::from_timestamp_micros(now_micros()).unwrap_or_default(),
        removed_at: None,
    }
}

async fn insert(tx: &mut Tx, user: User, link: &Link) -> Result<Invited, PeopleError> {
    rows::insert_user(tx, &user, &email_key(&user.email)).await?;
    let expires = now_micros() + rules::ENROL_VALID.as_micros() as i64;
    rows::insert_enrolment(tx, &link.hash, &user.id, expires).await?;
    Ok(Invited { user, enrol_path: link.path(), mailed_to: None })
}

/// A new enrol link for tenant user `target`, who has not enrolled yet (its
/// earlier links no longer work), by `actor`; mailed when `mail` is given.
pub async fn reissue(
    store: &Store,
    organization: &str,
    target: &str,
    actor: &Actor,
    mail: Option<&Invitations>,
) -> Result<Invited, PeopleError> {
    let mut tx = store.begin().await?;
    let link = Link::new();
    let entry = record(actor, "console_user.link_reissued", target, Some(organization), None);
    audit::append(&mut tx, store.cipher().ok(), Record { detail: Some(link.detail()), ..entry }).await?;
    let user = member_of(&mut tx, organization, target).await?;
    // The link goes to the address the service recorded, or nowhere.
    rows::check_sealed(&mut tx, target).await?;
    if user.enrolled {
        return Err(PeopleError::Refused(format!("{} has enrolled already", user.email)));
    }
    rows::void_enrolments(&mut tx, target, now_micros()).await?;
    let expires = now_micros() + rules::ENROL_VALID.as_micros() as i64;
    rows::insert_enrolment(&mut tx, &link.hash, target, expires).await?;
    let invited = Invited { user, enrol_path: link.path(), mailed_to: None };
    let invited = mailed(&mut tx, store.cipher().ok(), invited, mail, organization).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(invited)
}

/// A new enrol link for the console sign-in of operator `operator_id`, who
/// has not enrolled yet (its earlier links no longer work), by `actor`:
/// the link its owner alone receives. Answers the sign-in's email and the
/// link's path.
pub async fn operator_link(store: &Store, operator_id: &str, actor: &Actor) -> Result<String, PeopleError> {
    let mut tx = store.begin().await?;
    let (_, path) = operator_link_in(&mut tx, store.cipher().ok(), operator_id, actor).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(path)
}

/// [`operator_link`] in the caller's transaction: the email and the path.
pub async fn operator_link_in(
    tx: &mut Tx,
    cipher: Option<&crate::pii::Cipher>,
    operator_id: &str,
    actor: &Actor,
) -> Result<(String, String), PeopleError> {
    let user = rows::lock_operator_user(tx, operator_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("the console sign-in of operator {operator_id}")))?;
    rows::check_sealed(tx, &user.id).await?;
    let link = Link::new();
    let entry = record(actor, "console_user.link_reissued", &user.id, None, None);
    audit::append(tx, cipher, Record { detail: Some(link.detail()), ..entry }).await?;
    if user.enrolled {
        return Err(PeopleError::Refused(format!("{} has enrolled already", user.email)));
    }
    rows::void_enrolments(tx, &user.id, now_micros()).await?;
    let expires = now_micros() + rules::ENROL_VALID.as_micros() as i64;
    rows::insert_enrolment(tx, &link.hash, &user.id, expires).await?;
    Ok((user.email, link.path()))
}
