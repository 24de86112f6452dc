//! Enrolment: a password (and a second factor) set from a one-time link,
//! and a second factor added later.

use super::{PeopleError, hash_password, link_hash, record, resource::User, rules};
use crate::{
    audit::{self, Actor, Record},
    pii::Place,
    store::{Store, StoreError, Tx, console as rows, now_micros},
};

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
    let link_hash = link_hash(enrolment.token);
    let user_id = rows::use_enrolment(tx, &link_hash, now_micros()).await?.ok_or_else(gone)?;
    // A link row the log holds no entry for, about this very person, was
    // not issued by the service.
    let person = rows::lock_user(tx, &user_id).await?.ok_or_else(gone)?;
    let about: Vec<&str> = [Some(user_id.as_str()), person.operator()].into_iter().flatten().collect();
    if !crate::store::audit::has_link(tx, &link_hash, &about).await? {
        return Err(gone());
    }
    // Enrolled once: a row rolled back to before it enrols no one again.
    if crate::store::audit::has_entry(tx, "console_user.enrolled", &user_id).await? {
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
    let link = link_hash(token);
    let Some(user) = store.enrolment_user(&link, now_micros()).await? else { return Ok(None) };
    let secret = super::totp::new_secret();
    let cipher = store.cipher()?;
    let sealed =
        cipher.seal(secret.as_bytes(), Place { column: "console_enrolments.totp_secret", row: &[&link] });
    let mut tx = store.begin().await?;
    let offered = rows::offer_totp(&mut tx, &link, &sealed, now_micros()).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(offered.then_some((user, secret)))
}

/// The secret [`offer_second_factor`] offered for link `token`.
pub async fn offered_second_factor(store: &Store, token: &str) -> Result<Option<String>, PeopleError> {
    let link = link_hash(token);
    let Some(sealed) = rows::offered_totp(store, &link).await? else { return Ok(None) };
    let place = Place { column: "console_enrolments.totp_secret", row: &[&link] };
    Ok(Some(store.cipher()?.open_text(&sealed, place).map_err(StoreError::from)?))
}
