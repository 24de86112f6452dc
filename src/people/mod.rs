//! People: the console's users (a tenant's, and each operator's own
//! sign-in), invited, enrolled from their one-time link with a password and
//! an optional second factor (TOTP), signed in and out, their roles changed,
//! removed. The console's pages and the operator API both call this wing;
//! each change is one transaction with its audit entry.

mod enrol;
mod invite;
mod members;
pub mod resource;
pub mod rules;
pub mod sign_in;
pub mod totp;

use argon2::{
    Argon2,
    password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash},
};

pub use enrol::{Enrolment, add_second_factor, enrol, enrol_in, offer_second_factor, offered_second_factor};
pub use invite::{
    Invited, Link, invite, invite_in, invite_operator, operator_link, operator_link_in, reissue,
};
pub use members::{remove, set_role};

use crate::{
    audit::{Actor, Record},
    store::{StoreError, keyring},
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

/// A random token of 32 bytes, URL-safe.
pub fn token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The stored form of a session's token: keyed under the pepper's session
/// key, so that a session row inserted with SQL signs no one in (see
/// [`crate::store::keyring`]).
pub fn session_hash(token: &str) -> String {
    keyring::token_hash(keyring::SESSION, token)
}

/// The stored form of a one-time enrol link's token, keyed as
/// [`session_hash`] under a key of its own.
pub fn link_hash(token: &str) -> String {
    keyring::token_hash(keyring::LINK, token)
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
pub(crate) fn record<'a>(
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
