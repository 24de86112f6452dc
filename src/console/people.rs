//! The console's people managed: invited (a tenant's users by an operator
//! admin or the tenant's admin; an operator's sign-in with the operator),
//! enrolled from their one-time link, their roles changed, removed. Each
//! change is one transaction with its audit entry.

use argon2::{
    Argon2,
    password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash},
};

use super::{
    resource::{Member, User, email_key},
    rules::{self, TenantRole},
};
use crate::{
    api_key::sha256_hex,
    audit::{self, Actor, Detail, Record},
    mail::Invitations,
    pii::{Cipher, Place},
    store::{Store, StoreError, Tx, console as rows, now_micros},
};

/// The longest email.
pub const MAX_EMAIL: usize = 254;

/// Where an enrol link points: `/console/enrol/<token>`.
pub const ENROL_PATH: &str = "/console/enrol/";

/// Why a change of the console's people did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PeopleError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

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

/// A random token of 32 bytes, URL-safe.
pub fn token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The stored form of a link's or a session's token.
pub fn hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
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
        Link { hash: hash(&token), token }
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

/// `email` when it is one plain address (no display name, no comment):
/// the address mail is sent to is the one recorded and shown.
pub fn check_email(email: &str) -> Result<String, PeopleError> {
    let email = email.trim();
    let plain = email.parse::<lettre::Address>().is_ok()
        && !email.contains(['<', '>', '"', '(', ')', ',', ';', ' '])
        && email.split_once('@').is_some_and(|(user, host)| !user.is_empty() && host.contains('.'));
    if !plain || email.chars().any(char::is_whitespace) || email.len() > MAX_EMAIL {
        return Err(PeopleError::Invalid(format!("email: {email:?} is not an email address")));
    }
    Ok(email.to_string())
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

/// What a person chose on the enrol page.
pub struct Enrolment<'a> {
    pub token: &'a str,
    pub password: &'a str,
    pub again: &'a str,
    /// The second factor's secret shown on the page (base32) and a code
    /// from it, when the person added one.
    pub totp: Option<(&'a str, &'a str)>,
    /// Whether the store is `production`, where everyone who can move
    /// money or make keys enrols with a second factor.
    pub production: bool,
}

/// Sets the password (and second factor) of the user whose link `token` is:
/// once per link, within its 24 hours.
pub async fn enrol(store: &Store, enrolment: Enrolment<'_>) -> Result<User, PeopleError> {
    let mut tx = store.begin().await?;
    let user = enrol_in(&mut tx, store, enrolment).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(user)
}

/// [`enrol`] in the caller's transaction, which commits it.
pub async fn enrol_in(tx: &mut Tx, store: &Store, enrolment: Enrolment<'_>) -> Result<User, PeopleError> {
    rules::password(enrolment.password, enrolment.again).map_err(|e| PeopleError::Invalid(e.to_string()))?;
    let step = match enrolment.totp {
        Some((secret, code)) => Some(super::totp::step(secret, code, now_micros()).ok_or_else(|| {
            PeopleError::Invalid(
                "the code does not match the second factor's secret: enter the 6 digits your app shows now"
                    .into(),
            )
        })?),
        None => None,
    };
    let password_hash = hash_password(enrolment.password)?;
    let gone = || PeopleError::Refused("this enrol link was used, has expired or does not exist".into());
    let link_hash = hash(enrolment.token);
    let user_id = rows::use_enrolment(tx, &link_hash, now_micros()).await?.ok_or_else(gone)?;
    // A link row the log holds no entry for, about this very person, was
    // not issued by the service.
    let person = rows::lock_user(tx, &user_id).await?.ok_or_else(gone)?;
    let about: Vec<&str> = [Some(user_id.as_str()), person.operator()].into_iter().flatten().collect();
    if !crate::store::audit::has_link(tx, &link_hash, &about).await? {
        return Err(gone());
    }
    let totp = match (enrolment.totp, store.cipher()) {
        (None, _) => None,
        (Some((secret, _)), Ok(cipher)) => Some(
            cipher.seal(secret.as_bytes(), Place { column: "console_users.totp_secret", row: &[&user_id] }),
        ),
        // A handle that cannot seal never writes the secret in the clear on
        // a store that seals.
        (Some(_), Err(locked)) if crate::store::audit::seals(tx).await? => return Err(locked.into()),
        (Some((secret, _)), Err(_)) => Some(secret.to_string()),
    };
    let step = step.map(|s| i64::try_from(s).unwrap_or(i64::MAX));
    rows::set_password(tx, &user_id, &password_hash, totp.as_deref().zip(step)).await?;
    let entry = Record {
        actor: &Actor::User(user_id.clone()),
        action: "console_user.enrolled",
        target_kind: "console_user",
        target_id: &user_id,
        organization_id: None,
        reason: None,
        request_id: None,
        detail: None,
    };
    let user = rows::lock_user(tx, &user_id).await?.ok_or_else(gone)?;
    if rules::factor_required(enrolment.production, user.role()) && enrolment.totp.is_none() {
        return Err(PeopleError::Invalid(
            "a second factor is required: scan the code with your authenticator app and enter the 6 digits it shows"
                .into(),
        ));
    }
    let entry = Record { organization_id: user.organization(), ..entry };
    audit::append(tx, store.cipher().ok(), entry).await?;
    Ok(user)
}

/// Adds the second factor `secret`, whose current code is `code`, to user
/// `user_id`, who has none (a production admin, developer or operator who
/// enrolled without one, or whose role now needs one). Every session of
/// the user ends (none opened with the password alone lives on), and with
/// `notify` the user's address is told by mail.
pub async fn add_second_factor(
    store: &Store,
    user_id: &str,
    (secret, code): (&str, &str),
    notify: bool,
) -> Result<User, PeopleError> {
    let step = super::totp::step(secret, code, now_micros()).ok_or_else(|| {
        PeopleError::Invalid(
            "the code does not match the second factor's secret: enter the 6 digits your app shows now"
                .into(),
        )
    })?;
    let sealed = store.cipher()?.seal(
        secret.as_bytes(),
        Place { column: "console_users.totp_secret", row: &rows::totp_place(user_id) },
    );
    let mut tx = store.begin().await?;
    let user = rows::lock_user(&mut tx, user_id)
        .await?
        .filter(|user| user.enrolled && user.removed_at.is_none())
        .ok_or_else(|| StoreError::NotFound(format!("user {user_id}")))?;
    if user.totp {
        return Err(PeopleError::Refused("this sign-in has a second factor already".into()));
    }
    rows::set_totp(&mut tx, user_id, &sealed, i64::try_from(step).unwrap_or(i64::MAX)).await?;
    rows::end_sessions_of(&mut tx, user_id, now_micros()).await?;
    if notify {
        let body = "A second factor was just added to your custody-indexer console sign-in. From now on each \
                    sign-in asks for its code.\r\n\r\nIf you did not add it, someone else holds your password: \
                    tell your administrators at once.\r\n";
        let subject = "A second factor was added to your sign-in";
        crate::mail::queue(&mut tx, store.cipher().ok(), &user.email, subject, body).await?;
    }
    let actor = Actor::User(user_id.to_string());
    let entry = record(&actor, "console_user.second_factor_added", user_id, None, None);
    let entry = Record { organization_id: user.organization(), ..entry };
    audit::append(&mut tx, store.cipher().ok(), entry).await?;
    let user =
        rows::lock_user(&mut tx, user_id).await?.ok_or_else(|| StoreError::NotFound(user_id.into()))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(user)
}

/// A second factor's secret offered to the person of link `token` (kept,
/// sealed, with the link: the enrolment's code is checked against it);
/// `None` when the link is used, expired or unknown.
pub async fn offer_second_factor(store: &Store, token: &str) -> Result<Option<(User, String)>, PeopleError> {
    let link = hash(token);
    let Some(user) = store.enrolment_user(&link, now_micros()).await? else { return Ok(None) };
    let secret = super::totp::new_secret();
    let cipher = store.cipher()?;
    let sealed =
        cipher.seal(secret.as_bytes(), Place { column: "console_enrolments.totp_secret", row: &[&link] });
    Ok(rows::offer_totp(store, &link, &sealed, now_micros()).await?.then_some((user, secret)))
}

/// The secret [`offer_second_factor`] offered for link `token`.
pub async fn offered_second_factor(store: &Store, token: &str) -> Result<Option<String>, PeopleError> {
    let link = hash(token);
    let Some(sealed) = rows::offered_totp(store, &link).await? else { return Ok(None) };
    let place = Place { column: "console_enrolments.totp_secret", row: &[&link] };
    Ok(Some(store.cipher()?.open_text(&sealed, place).map_err(StoreError::from)?))
}

/// The argon2id PHC string of `password`.
pub fn hash_password(password: &str) -> Result<String, PeopleError> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| PeopleError::Invalid(format!("the password cannot be hashed: {e}")))
}

/// Whether `password` is the one `stored` hashes.
pub fn verify_password(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored)
        .is_ok_and(|hash| Argon2::default().verify_password(password.as_bytes(), &hash).is_ok())
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

/// Sets tenant user `target`'s role, by the organization's admin `actor`
/// (or an operator admin); the last admin keeps its role.
pub async fn set_role(
    store: &Store,
    organization: &str,
    target: &str,
    role: TenantRole,
    actor: &Actor,
) -> Result<User, PeopleError> {
    let mut tx = store.begin().await?;
    let entry = record(actor, "console_user.role_set", target, Some(organization), Some(role.as_str()));
    audit::append(&mut tx, store.cipher().ok(), entry).await?;
    member_of(&mut tx, organization, target).await?;
    rows::set_role(&mut tx, target, role).await?;
    keeps_an_admin(&mut tx, organization).await?;
    let user = member_of(&mut tx, organization, target).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(user)
}

/// Removes tenant user `target`, by `actor`: its sessions end at once.
pub async fn remove(
    store: &Store,
    organization: &str,
    target: &str,
    actor: &Actor,
) -> Result<(), PeopleError> {
    let mut tx = store.begin().await?;
    audit::append(
        &mut tx,
        store.cipher().ok(),
        record(actor, "console_user.removed", target, Some(organization), None),
    )
    .await?;
    member_of(&mut tx, organization, target).await?;
    rows::remove(&mut tx, target, now_micros()).await?;
    keeps_an_admin(&mut tx, organization).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// The present user `target` of `organization`, locked; another
/// organization's user is not found.
async fn member_of(tx: &mut Tx, organization: &str, target: &str) -> Result<User, PeopleError> {
    rows::lock_user(tx, target)
        .await?
        .filter(|user| user.organization() == Some(organization) && user.removed_at.is_none())
        .ok_or_else(|| StoreError::NotFound(format!("user {target}")).into())
}

async fn keeps_an_admin(tx: &mut Tx, organization: &str) -> Result<(), PeopleError> {
    if rows::tenant_admins(tx, organization).await? == 0 {
        return Err(PeopleError::Refused(
            "this would leave the organization without an admin: make another user admin first".into(),
        ));
    }
    Ok(())
}

fn record<'a>(
    actor: &'a Actor,
    action: &'a str,
    target: &'a str,
    organization: Option<&'a str>,
    reason: Option<&'a str>,
) -> Record<'a> {
    Record {
        actor,
        action,
        target_kind: "console_user",
        target_id: target,
        organization_id: organization,
        reason,
        request_id: None,
        detail: None,
    }
}
