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
    Algorithm, Argon2, KeyId, Params, ParamsBuilder, Version,
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

/// The `keyid` a password hash made under the pepper's password key
/// carries in its PHC string (`keyid=…`), so that it is told from a hash
/// made without it.
const PEPPERED: &[u8] = b"pepper1";

/// The argon2id PHC string of `password`: under the pepper's password key
/// (argon2's secret) when the process has a pepper, so that a hash
/// written with SQL matches no password.
pub fn hash_password(password: &str) -> Result<String, PeopleError> {
    let refused =
        |e: &dyn std::fmt::Display| PeopleError::Invalid(format!("the password cannot be hashed: {e}"));
    let Some(secret) = password_key() else {
        return Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| refused(&e));
    };
    let keyid = KeyId::new(PEPPERED).map_err(|e| refused(&e))?;
    let params = ParamsBuilder::new().keyid(keyid).build().map_err(|e| refused(&e))?;
    let argon2 = Argon2::new_with_secret(secret.bytes(), Algorithm::Argon2id, Version::V0x13, params)
        .map_err(|e| refused(&e))?;
    argon2.hash_password(password.as_bytes()).map(|h| h.to_string()).map_err(|e| refused(&e))
}

/// Whether `password` is the one `stored` hashes: under the pepper's
/// password key when the hash says so (and never without the pepper).
pub fn verify_password(password: &str, stored: &str) -> bool {
    let Ok(hash) = PasswordHash::new(stored) else { return false };
    if !is_peppered(stored) {
        return Argon2::default().verify_password(password.as_bytes(), &hash).is_ok();
    }
    let Some(secret) = password_key() else { return false };
    Argon2::new_with_secret(secret.bytes(), Algorithm::Argon2id, Version::V0x13, Params::DEFAULT)
        .is_ok_and(|argon2| argon2.verify_password(password.as_bytes(), &hash).is_ok())
}

/// Whether `stored` should be hashed again under the pepper (it was made
/// without it, and this process has it): done at its owner's next sign-in.
pub fn needs_rehash(stored: &str) -> bool {
    password_key().is_some() && !is_peppered(stored)
}

fn is_peppered(stored: &str) -> bool {
    PasswordHash::new(stored)
        .ok()
        .and_then(|hash| Params::try_from(&hash).ok())
        .is_some_and(|params| params.keyid() == PEPPERED)
}

fn password_key() -> Option<keyring::Derived> {
    keyring::process().ok().flatten().map(|pepper| pepper.derive(keyring::PASSWORD))
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
