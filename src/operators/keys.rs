//! Operator keys: authenticated on every request (a revoked, expired or
//! disabled operator's key stops working at once), made by their owner in
//! `production` (the first at enrolment, further ones with a second
//! factor, never outliving the key that asked), by an admin in `sandbox`,
//! revoked with every key made with them, and bounded once at the first
//! production start of this release.

use super::{
    key_rules,
    manage::{OperatorError, actor, authority, locked, record},
    resource::Operator,
    rules::{self, Refused},
};
use crate::{
    api_key::{self, NewSecret, OPERATOR_PREFIX},
    audit::{self, Actor, Detail, Record},
    environment::Environment,
    people::totp,
    pii::Cipher,
    store::{Store, StoreError, Tx, console as people_rows, now_micros, operators as rows},
};

/// What a presented operator key is.
#[derive(Debug)]
pub enum KeyCheck {
    /// The live key `key_id` of the enabled `operator`, expiring at
    /// `expires_at` (`None`: never).
    Live { operator: Operator, key_id: String, expires_at: Option<i64> },
    /// A key that was live and has expired.
    Expired,
    /// A live key of an operator suspended by change `change` (see
    /// [`super::suspension`]).
    Suspended { operator: String, change: String },
    /// Anything else: a tenant's key, a revoked key, a disabled operator's.
    Unknown,
}

/// What the key `token` is, now.
pub async fn check(store: &Store, token: &str) -> Result<KeyCheck, StoreError> {
    let Some(id) = api_key::key_id_with(OPERATOR_PREFIX, token) else { return Ok(KeyCheck::Unknown) };
    let Some((operator, hash, expires_at)) = store.operator_by_key(id).await? else {
        return Ok(KeyCheck::Unknown);
    };
    if !api_key::matches(token, &hash) {
        return Ok(KeyCheck::Unknown);
    }
    if let Some(change) = super::suspension::of(store, &operator.id).await? {
        return Ok(KeyCheck::Suspended { operator: operator.id, change: change.id });
    }
    if crate::audit::withdrawn::operator_key(store, &operator, id, expires_at).await? {
        return Ok(KeyCheck::Unknown);
    }
    if key_rules::key_expired(expires_at, now_micros()) {
        return Ok(KeyCheck::Expired);
    }
    Ok(KeyCheck::Live { operator, key_id: id.to_string(), expires_at })
}

/// The enabled operator whose live key `token` is; `None` for any other
/// token (a tenant's key, a revoked or expired key, a disabled operator's).
pub async fn authenticate(store: &Store, token: &str) -> Result<Option<Operator>, StoreError> {
    Ok(match check(store, token).await? {
        KeyCheck::Live { operator, .. } => Some(operator),
        KeyCheck::Expired | KeyCheck::Suspended { .. } | KeyCheck::Unknown => None,
    })
}

/// Creates a key for `target` on `admin`'s authority (`sandbox` only); its
/// token is shown once. In `production` an operator's keys are their own.
pub async fn create_key(
    store: &Store,
    environment: Environment,
    admin: &Operator,
    target: &str,
) -> Result<NewSecret, OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    if environment == Environment::Production {
        return Err(Refused::KeysByOwner.into());
    }
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let operator = locked(&mut tx, target).await?;
    if !operator.is_enabled() {
        return Err(OperatorError::Invalid(format!("operator {target} is disabled: it gets no new key")));
    }
    let key = insert(&mut tx, store.cipher().ok(), &actor(admin), target, (None, None)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(key)
}

/// A key `operator` makes for itself with the key `parent` it
/// authenticated with and a current code of its second factor (required
/// in `production`; in `sandbox` only when it has one): it expires after
/// `days` (see [`rules::key_expiry`]), never after `parent`.
pub async fn create_own(
    store: &Store,
    environment: Environment,
    (operator, parent): (&Operator, &str),
    code: Option<&str>,
    days: Option<u32>,
) -> Result<(NewSecret, Option<i64>), OperatorError> {
    // The days checked before the code is taken: a refused request spends
    // no code.
    key_rules::key_expiry(environment, now_micros(), days, None)?;
    second_factor(store, environment, &operator.id, code).await?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    if !locked(&mut tx, &operator.id).await?.is_enabled() {
        return Err(Refused::NoLongerAdmin(operator.id.clone()).into());
    }
    let now = now_micros();
    let parent_expiry = rows::live_key_expiry(&mut tx, parent, now)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("live operator key {parent}")))?;
    let expires_at = key_rules::key_expiry(environment, now, days, parent_expiry)?;
    let key = insert(&mut tx, cipher, &actor(operator), &operator.id, (expires_at, Some(parent))).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok((key, expires_at))
}

/// A key `operator`, signed in to the console and having given its
/// password and second factor again ([`crate::people::sign_in::confirm`]),
/// makes for itself when none of its keys is live (all expired or
/// revoked): shown once, to that person, expiring as a first key does.
/// With a live key the operator makes one with it instead.
pub async fn renew(
    store: &Store,
    environment: Environment,
    operator: &Operator,
) -> Result<(NewSecret, Option<i64>), OperatorError> {
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    if !locked(&mut tx, &operator.id).await?.is_enabled() || !rows::sealed(&mut tx, &operator.id).await? {
        return Err(Refused::NoLongerAdmin(operator.id.clone()).into());
    }
    let now = now_micros();
    if rows::live_keys(&mut tx, &operator.id, now).await? > 0 {
        return Err(OperatorError::Invalid(
            "a key of yours is live: make the new one with it (POST /operator/v1/me/keys)".into(),
        ));
    }
    let expires_at = key_rules::key_expiry(environment, now, None, None)?;
    let key = insert(&mut tx, cipher, &actor(operator), &operator.id, (expires_at, None)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok((key, expires_at))
}

/// Makes a key of `operator_id` in `tx`, with its entry by `by`: its
/// expiry and the key it was made with.
pub(super) async fn insert(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    by: &Actor,
    operator_id: &str,
    (expires_at, parent): (Option<i64>, Option<&str>),
) -> Result<NewSecret, OperatorError> {
    let key = api_key::generate_with(OPERATOR_PREFIX);
    let entry = record(by, "operator_key.created", operator_id, Some(&key.id));
    let detail = Detail { expires_at, ..Detail::key(&key.id) };
    audit::append(tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    let hash = api_key::stored(&key.hash);
    let created_at = now_micros();
    let row = rows::NewKey { id: &key.id, operator_id, hash: &hash, created_at, expires_at, parent };
    rows::insert_key(tx, row).await?;
    Ok(key)
}

/// Checks `code` against the second factor of `operator_id`'s console
/// sign-in, accepting each code once.
async fn second_factor(
    store: &Store,
    environment: Environment,
    operator_id: &str,
    code: Option<&str>,
) -> Result<(), OperatorError> {
    let (user_id, secret) = store.console_operator_factor(operator_id).await?.unwrap_or_default();
    let Some(secret) = secret else {
        return match environment {
            Environment::Production => Err(Refused::NoSecondFactor.into()),
            Environment::Sandbox => Ok(()),
        };
    };
    let step = code.and_then(|code| totp::step(&secret, code, now_micros())).ok_or(Refused::WrongCode)?;
    let mut tx = store.begin().await?;
    let fresh =
        people_rows::accept_totp_step(&mut tx, &user_id, i64::try_from(step).unwrap_or(i64::MAX)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    if !fresh {
        return Err(Refused::WrongCode.into());
    }
    Ok(())
}

/// Revokes key `key_id` on `admin`'s authority, and every key made with it.
pub async fn revoke_key(store: &Store, admin: &Operator, key_id: &str) -> Result<(), OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    let by = actor(admin);
    // The head's lock first, as an append takes it: one change of operators
    // at a time; the entry names the key's operator, known once revoked.
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let now = now_micros();
    let operator = rows::revoke_key(&mut tx, key_id, now)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("live operator key {key_id}")))?;
    let entry = record(&by, "operator_key.revoked", &operator, Some(key_id));
    audit::append(&mut tx, cipher, Record { detail: Some(Detail::key(key_id)), ..entry }).await?;
    let mut owners = vec![operator.clone()];
    for (child, owner) in rows::revoke_made_with(&mut tx, key_id, now).await? {
        let why = format!("{child}: made with {key_id}");
        let entry = record(&by, "operator_key.revoked", &owner, Some(&why));
        audit::append(&mut tx, cipher, Record { detail: Some(Detail::key(&child)), ..entry }).await?;
        owners.push(owner);
    }
    // What a revoked key may have proposed is refused: its holder proposes
    // again with a key of their own.
    owners.dedup();
    for owner in &owners {
        let why = format!("proposed by {owner}, whose key {key_id} (or one made with it) was revoked");
        super::manage::refuse_pending_of(&mut tx, cipher, owner, &why).await?;
    }
    rules::keeps_an_admin(rows::enabled_admins(&mut tx, now).await?)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// At a `production` start: every live key without an expiry (made before
/// keys expired) expires [`key_rules::KEY_DAYS`] days from now, each with its
/// entry. Answers how many.
pub async fn bound_existing(store: &Store) -> Result<usize, StoreError> {
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    let Some(expires_at) =
        key_rules::key_expiry(Environment::Production, now_micros(), None, None).ok().flatten()
    else {
        return Ok(0);
    };
    let bounded = rows::bound_unbounded(&mut tx, expires_at).await?;
    for (key, operator) in &bounded {
        let entry = record(&Actor::System, "operator_key.expiry_set", operator, Some(key));
        let detail = Detail { expires_at: Some(expires_at), ..Detail::key(key) };
        audit::append(&mut tx, cipher, Record { detail: Some(detail), ..entry }).await?;
    }
    tx.commit().await?;
    Ok(bounded.len())
}
