//! Signing in and out. A sign-in checks the delays of its failed tries
//! first (of its email from its client address, and of its client address
//! whatever the emails), then the password (an unknown email costs the
//! same hashing as a known one), then the TOTP code when the user has a
//! second factor (each code accepted once). Every try counts against both
//! before it is checked (tries sent at once cannot all pass one delay), and
//! every failure answers alike; a success forgets its email's count from
//! that address and starts a new session (a new id and CSRF token: nothing
//! from before sign-in is kept). Counts older than
//! [`rules::FAILURES_KEPT`] start again and are purged.

use std::{fmt, net::IpAddr, sync::LazyLock, time::Duration};

use tokio::sync::Semaphore;

use super::{
    resource::{Session, User, email_key},
    rules, session_hash, token, totp,
};
use crate::{
    audit::{self, Actor, Record},
    store::{Store, StoreError, Tx, console as rows, console_sessions as sessions, now_micros},
};

/// Why a sign-in did not start a session.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// Wrong email, password or code: which one is never said.
    #[error("the email, password or code is not right")]
    Wrong,
    /// Too many failed tries for this email: the next may come after this.
    #[error("too many failed sign-ins for this email: try again in {} s", .0.as_secs().max(1))]
    Wait(Duration),
    /// Too many failed tries from this client address, whatever the emails.
    #[error("too many failed sign-ins from this address: try again in {} s", .0.as_secs().max(1))]
    WaitAddress(Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A started session: the cookie's token (shown to the browser only) and
/// its user. `Debug` leaves the token out.
pub struct Started {
    pub token: String,
    pub user: User,
}

impl fmt::Debug for Started {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Started").field("user", &self.user.id).finish_non_exhaustive()
    }
}

/// Password checks at once, at most: each costs argon2's memory and time,
/// so a flood of sign-ins waits here instead of exhausting the machine.
static HASHING: Semaphore = Semaphore::const_new(4);

/// What an unknown email's password is checked against, so that it takes
/// as long as a known one's.
static UNKNOWN: LazyLock<String> =
    LazyLock::new(|| super::hash_password("no user has this password").unwrap_or_default());

/// The failed tries counted under `key` as of `now`: the stored count and
/// the count that holds (none once the last failure is older than
/// [`rules::FAILURES_KEPT`]), and the last failure's time.
async fn failures(store: &Store, key: &str, now: i64) -> Result<(i64, i64, i64), StoreError> {
    let (stored, last_failed) = store.sign_in_failures(key).await?;
    let kept = i64::try_from(rules::FAILURES_KEPT.as_micros()).unwrap_or(i64::MAX);
    let holds = if now.saturating_sub(last_failed) > kept { 0 } else { stored };
    Ok((stored, holds, last_failed))
}

/// Signs `email` in from `client` with `password` and, for a user with a
/// second factor, `code`.
pub async fn sign_in(
    store: &Store,
    email: &str,
    password: &str,
    code: &str,
    client: IpAddr,
) -> Result<Started, SignInError> {
    let checked = check(store, email, password, code, client).await?;
    let token = token();
    // The session records the factor that opened it: a second factor
    // given now, not one the user's row says it has.
    let user = checked.user;
    let session =
        Opened { id_hash: &session_hash(&token), user: &user, factor: user.totp, rehashed: checked.rehashed };
    succeeded(store, (&checked.pair, &checked.from), session).await?;
    Ok(Started { token, user })
}

/// A signed-in `user` giving their password and second factor again (to
/// make a key in the console): checked as a sign-in is, with its delays
/// and counts, opening no session. A user without a second factor is
/// refused as a wrong code is.
pub async fn confirm(
    store: &Store,
    user: &User,
    password: &str,
    code: &str,
    client: IpAddr,
) -> Result<(), SignInError> {
    let checked = check(store, &user.email, password, code, client).await?;
    if checked.user.id != user.id || !checked.user.totp {
        return Err(SignInError::Wrong);
    }
    let mut tx = store.begin().await?;
    sessions::clear_sign_in_failures(&mut tx, &checked.pair).await?;
    sessions::uncount_sign_in_try(&mut tx, &checked.from).await?;
    if let Some(hash) = &checked.rehashed {
        rows::rehash_password(&mut tx, &user.id, hash).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// A sign-in's checks passed: its user, the password hashed again when
/// its hash was made without the pepper, and the keys its tries count
/// under (the email from the address, the address).
struct Checked {
    user: User,
    rehashed: Option<String>,
    pair: String,
    from: String,
}

/// A sign-in's delays, counts and checks (see the module's text).
async fn check(
    store: &Store,
    email: &str,
    password: &str,
    code: &str,
    client: IpAddr,
) -> Result<Checked, SignInError> {
    let key = email_key(email);
    // No email is this long: refused without a row of its own.
    if key.len() > super::MAX_EMAIL || password.chars().count() > rules::MAX_PASSWORD {
        return Err(SignInError::Wrong);
    }
    let (pair, from) = (format!("{key} from {client}"), format!("from {client}"));
    let now = now_micros();
    let (pair_stored, pair_failures, pair_last) = failures(store, &pair, now).await?;
    let (from_stored, from_failures, from_last) = failures(store, &from, now).await?;
    if let Some(wait) = rules::wait(rules::delay(pair_failures), pair_last, now) {
        return Err(SignInError::Wait(wait));
    }
    if let Some(wait) = rules::wait(rules::client_delay(from_failures), from_last, now) {
        return Err(SignInError::WaitAddress(wait));
    }
    // Counted before it is checked: another try meanwhile finds the new
    // count, and the delay it sets.
    if !claim_try(store, &pair, pair_stored, pair_failures + 1, now).await? {
        return Err(SignInError::Wait(rules::delay(pair_failures + 1).max(Duration::from_secs(1))));
    }
    if !claim_try(store, &from, from_stored, from_failures + 1, now).await? {
        let wait = rules::client_delay(from_failures + 1).max(Duration::from_secs(1));
        return Err(SignInError::WaitAddress(wait));
    }
    let credentials = store.console_credentials(&key).await?;
    let stored = credentials.as_ref().and_then(|c| c.password_hash.clone());
    let given = password.to_string();
    let checked = stored.clone().unwrap_or_else(|| UNKNOWN.clone());
    let permit = HASHING.acquire().await.expect("the semaphore is never closed");
    let matches =
        tokio::task::spawn_blocking(move || super::verify_password(&given, &checked)).await.unwrap_or(false);
    drop(permit);
    let withdrawn = match &credentials {
        Some(found) => crate::audit::withdrawn::console_user(store, &found.user).await?,
        None => false,
    };
    let user = match credentials {
        Some(credentials) if matches && stored.is_some() && !withdrawn => {
            second_factor(store, &credentials.user, credentials.totp_secret.as_deref(), code).await?
        }
        _ => None,
    };
    let Some(user) = user else {
        return Err(SignInError::Wrong);
    };
    let rehashed = match stored.as_deref() {
        Some(stored) if super::needs_rehash(stored) => rehash(password).await,
        _ => None,
    };
    Ok(Checked { user, rehashed, pair, from })
}

/// `password` hashed under the pepper, off the runtime's threads.
async fn rehash(password: &str) -> Option<String> {
    let password = password.to_string();
    let permit = HASHING.acquire().await.expect("the semaphore is never closed");
    let hashed = tokio::task::spawn_blocking(move || super::hash_password(&password)).await.ok()?.ok();
    drop(permit);
    hashed
}

/// A session a sign-in opens: its token's keyed hash, its user, whether a
/// second factor was given, and the password hashed again under the
/// pepper when the stored hash was made without it.
struct Opened<'a> {
    id_hash: &'a str,
    user: &'a User,
    factor: bool,
    rehashed: Option<String>,
}

/// Counts a try under `key` as failed before it is checked, setting the
/// count to `next` if it is still `seen`: `false` when another try counted
/// meanwhile, so that tries sent at once cannot all pass the same delay.
async fn claim_try(store: &Store, key: &str, seen: i64, next: i64, now: i64) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let claimed = sessions::claim_sign_in_try(&mut tx, key, seen, next, now).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// A sign-in that passed: its email's failures from its address forgotten,
/// the try the address's count took as failed given back, and session
/// `id_hash` of `user_id` started.
async fn succeeded(store: &Store, (pair, from): (&str, &str), opened: Opened<'_>) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    sessions::clear_sign_in_failures(&mut tx, pair).await?;
    // The address's count took this try as failed before it was checked.
    sessions::uncount_sign_in_try(&mut tx, from).await?;
    let id = opened.user.id.as_str();
    if let Some(hash) = &opened.rehashed {
        rows::rehash_password(&mut tx, id, hash).await?;
    }
    sessions::insert_session(&mut tx, opened.id_hash, (id, opened.factor), &super::token(), now_micros())
        .await?;
    // The client's address is the entry's reason, sealed with personal data.
    logged(&mut tx, store, opened.user, "console_user.signed_in", Some(from)).await?;
    tx.commit().await?;
    Ok(())
}

/// Forgets the failed sign-ins whose last one came before `before`
/// (micros): counts no longer held. How many.
pub async fn purge_failures(store: &Store, before: i64) -> Result<u64, StoreError> {
    let mut tx = store.begin().await?;
    let purged = sessions::purge_sign_in_failures(&mut tx, before).await?;
    tx.commit().await?;
    Ok(purged)
}

/// `user` when it has no second factor or `code` is its current one, used
/// for the first time.
async fn second_factor(
    store: &Store,
    user: &User,
    secret: Option<&str>,
    code: &str,
) -> Result<Option<User>, StoreError> {
    let Some(secret) = secret else { return Ok(Some(user.clone())) };
    let Some(step) = totp::step(secret, code, now_micros()) else { return Ok(None) };
    let mut tx = store.begin().await?;
    let fresh = rows::accept_totp_step(&mut tx, &user.id, i64::try_from(step).unwrap_or(i64::MAX)).await?;
    tx.commit().await?;
    Ok(fresh.then(|| user.clone()))
}

/// The live session whose cookie token is `token`: one idle longer than
/// [`rules::IDLE`], or older than [`rules::LIFETIME`], is ended instead. Its last use is recorded to the minute.
pub async fn session(store: &Store, token: &str) -> Result<Option<Session>, StoreError> {
    let id_hash = session_hash(token);
    let Some(session) = store.session(&id_hash).await? else { return Ok(None) };
    if crate::audit::withdrawn::console_user(store, &session.user).await? {
        return Ok(None);
    }
    let now = now_micros();
    if !rules::live(session.started_at, session.last_seen_at, now) {
        let mut tx = store.begin().await?;
        sessions::end_session(&mut tx, &id_hash, now).await?;
        let why = Some("idle too long, or past its lifetime");
        logged(&mut tx, store, &session.user, "console_user.session_ended", why).await?;
        tx.commit().await?;
        return Ok(None);
    }
    if now - session.last_seen_at > 60_000_000 {
        let mut tx = store.begin().await?;
        sessions::touch_session(&mut tx, &id_hash, now).await?;
        tx.commit().await?;
    }
    Ok(Some(session))
}

/// Ends `session`; with `everywhere`, every session of its user.
pub async fn sign_out(store: &Store, session: &Session, everywhere: bool) -> Result<(), StoreError> {
    let now = now_micros();
    let mut tx = store.begin().await?;
    if everywhere {
        rows::end_sessions_of(&mut tx, &session.user.id, now).await?;
    } else {
        sessions::end_session(&mut tx, &session.id_hash, now).await?;
    }
    let why = everywhere.then_some("everywhere");
    logged(&mut tx, store, &session.user, "console_user.signed_out", why).await?;
    tx.commit().await?;
    Ok(())
}

/// Appends the entry of `user`'s session `action` in `tx`.
async fn logged(
    tx: &mut Tx,
    store: &Store,
    user: &User,
    action: &str,
    reason: Option<&str>,
) -> Result<(), StoreError> {
    let actor = Actor::User(user.id.clone());
    let entry = Record {
        organization_id: user.organization(),
        ..super::record(&actor, action, &user.id, None, reason)
    };
    audit::append(tx, store.cipher().ok(), entry).await.map(drop)
}

/// Ends session `id_hash`, on every instance.
pub async fn end_session(store: &Store, id_hash: &str, now: i64) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    sessions::end_session(&mut tx, id_hash, now).await?;
    tx.commit().await?;
    Ok(())
}
