//! Operators managed: created (the bootstrap from the store alone while no
//! admin exists, then by an admin), their roles set, disabled, their keys
//! created and revoked. Each change is one transaction with its audit
//! entry; the entry is appended first, so its lock on the chain's head
//! orders concurrent changes (two bootstraps cannot both find no admin).

use super::{
    resource::{Operator, Role},
    rules::{self, Refused},
};
use crate::{
    api_key::{self, NewSecret, OPERATOR_PREFIX},
    audit::{self, Actor, Detail, Record},
    console::people::{self, PeopleError},
    store::{Store, StoreError, Tx, now_micros, operators as rows},
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

/// A created operator, its console enrol link's path and its first key,
/// both shown once. `Debug` shows neither.
pub struct Created {
    pub operator: Operator,
    pub enrol_path: String,
    pub key: NewSecret,
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
    fn check(&self) -> Result<(), OperatorError> {
        if self.name.trim().is_empty() {
            return Err(OperatorError::Invalid("name: an operator needs a name".into()));
        }
        let email = self.email.trim();
        let valid = email.split_once('@').is_some_and(|(user, host)| !user.is_empty() && host.contains('.'));
        if !valid || email.chars().any(char::is_whitespace) {
            return Err(OperatorError::Invalid(format!("email: {email:?} is not an email address")));
        }
        if self.roles.is_empty() {
            return Err(Refused::NoRole.into());
        }
        Ok(())
    }
}

/// Creates the first operator from the store alone: refused once an
/// enabled admin exists. Recorded as a bootstrap by `actor` (a local one).
pub async fn bootstrap(store: &Store, actor: &Actor, new: NewOperator) -> Result<Created, OperatorError> {
    new.check()?;
    let mut tx = store.begin().await?;
    let (operator, key) = (fresh(&new), api_key::generate_with(OPERATOR_PREFIX));
    let record = record(actor, "operator.bootstrapped", &operator.id, None);
    let detail = created_detail(&operator, &key);
    audit::append(&mut tx, store.cipher().ok(), Record { detail, ..record }).await?;
    rules::may_bootstrap(rows::enabled_admins(&mut tx).await?)?;
    let created = insert(&mut tx, operator, key).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(created)
}

/// Creates an operator on `admin`'s authority.
pub async fn create(store: &Store, admin: &Operator, new: NewOperator) -> Result<Created, OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    new.check()?;
    let mut tx = store.begin().await?;
    let (operator, key) = (fresh(&new), api_key::generate_with(OPERATOR_PREFIX));
    let roles = super::resource::roles_text(&new.roles);
    let by = actor(admin);
    let record = record(&by, "operator.created", &operator.id, Some(&roles));
    let detail = created_detail(&operator, &key);
    audit::append(&mut tx, store.cipher().ok(), Record { detail, ..record }).await?;
    authority(&mut tx, admin).await?;
    let created = insert(&mut tx, operator, key).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(created)
}

/// Sets `target`'s roles on `admin`'s authority.
pub async fn set_roles(
    store: &Store,
    admin: &Operator,
    target: &str,
    roles: &[Role],
    reason: &str,
) -> Result<Operator, OperatorError> {
    rules::may_set_roles(admin, target, roles)?;
    let mut tx = store.begin().await?;
    let reason = format!("{}: {reason}", super::resource::roles_text(roles));
    let by = actor(admin);
    let record = record(&by, "operator.roles_set", target, Some(&reason));
    audit::append(&mut tx, store.cipher().ok(), Record { detail: Some(Detail::roles(roles)), ..record })
        .await?;
    authority(&mut tx, admin).await?;
    locked(&mut tx, target).await?;
    rows::set_roles(&mut tx, target, roles).await?;
    let operator = locked(&mut tx, target).await?;
    rules::keeps_an_admin(rows::enabled_admins(&mut tx).await?)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(operator)
}

/// Disables `target` on `admin`'s authority: its keys stop working at once,
/// its console sessions end and its enrol link is void.
pub async fn disable(
    store: &Store,
    admin: &Operator,
    target: &str,
    reason: &str,
) -> Result<Operator, OperatorError> {
    rules::may_disable(admin, target)?;
    let mut tx = store.begin().await?;
    audit::append(
        &mut tx,
        store.cipher().ok(),
        record(&actor(admin), "operator.disabled", target, Some(reason)),
    )
    .await?;
    authority(&mut tx, admin).await?;
    locked(&mut tx, target).await?;
    rows::disable(&mut tx, target, reason, now_micros()).await?;
    crate::store::console::end_operator(&mut tx, target, now_micros()).await?;
    let operator = locked(&mut tx, target).await?;
    rules::keeps_an_admin(rows::enabled_admins(&mut tx).await?)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(operator)
}

/// Creates a key for `target` on `admin`'s authority; its token is shown once.
pub async fn create_key(store: &Store, admin: &Operator, target: &str) -> Result<NewSecret, OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    let mut tx = store.begin().await?;
    let key = api_key::generate_with(OPERATOR_PREFIX);
    let by = actor(admin);
    let entry = record(&by, "operator_key.created", target, Some(&key.id));
    audit::append(&mut tx, store.cipher().ok(), Record { detail: Some(Detail::key(&key.id)), ..entry })
        .await?;
    authority(&mut tx, admin).await?;
    let operator = locked(&mut tx, target).await?;
    if !operator.is_enabled() {
        return Err(OperatorError::Invalid(format!("operator {target} is disabled: it gets no new key")));
    }
    rows::insert_key(&mut tx, &key.id, target, &api_key::stored(&key.hash), now_micros()).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(key)
}

/// Revokes key `key_id` on `admin`'s authority.
pub async fn revoke_key(store: &Store, admin: &Operator, key_id: &str) -> Result<(), OperatorError> {
    rules::permits(admin, rules::Action::Operators)?;
    let mut tx = store.begin().await?;
    let by = actor(admin);
    // The head's lock first, as an append takes it: one change of operators
    // at a time; the entry names the key's operator, known once revoked.
    audit::lock(&mut tx).await?;
    authority(&mut tx, admin).await?;
    let operator = rows::revoke_key(&mut tx, key_id, now_micros())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("live operator key {key_id}")))?;
    let entry = record(&by, "operator_key.revoked", &operator, Some(key_id));
    audit::append(&mut tx, store.cipher().ok(), Record { detail: Some(Detail::key(key_id)), ..entry })
        .await?;
    rules::keeps_an_admin(rows::enabled_admins(&mut tx).await?)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// The enabled operator whose live key `token` is; `None` for any other
/// token (a tenant's key, a revoked key, a disabled operator's).
pub async fn authenticate(store: &Store, token: &str) -> Result<Option<Operator>, StoreError> {
    let Some(id) = api_key::key_id_with(OPERATOR_PREFIX, token) else { return Ok(None) };
    Ok(store.operator_by_key(id).await?.filter(|(_, hash)| api_key::matches(token, hash)).map(|(o, _)| o))
}

/// The audit actor of an operator.
pub fn actor(operator: &Operator) -> Actor {
    Actor::Operator { id: operator.id.clone(), name: operator.name.clone() }
}

fn fresh(new: &NewOperator) -> Operator {
    Operator {
        id: format!("op_{}", uuid::Uuid::new_v4().simple()),
        name: new.name.trim().to_string(),
        email: new.email.trim().to_string(),
        roles: new.roles.clone(),
        disabled_at: None,
        created_at: chrono::DateTime::from_timestamp_micros(now_micros()).unwrap_or_default(),
    }
}

/// What a new operator's entry records: its roles and its first key.
fn created_detail(operator: &Operator, key: &NewSecret) -> Option<Detail> {
    Some(Detail { key_id: Some(key.id.clone()), ..Detail::roles(&operator.roles) })
}

async fn insert(tx: &mut Tx, operator: Operator, key: NewSecret) -> Result<Created, OperatorError> {
    let now = operator.created_at.timestamp_micros();
    rows::insert(tx, &operator, now).await?;
    let invited = people::invite_operator(tx, &operator.id, &operator.email).await.map_err(|e| match e {
        PeopleError::Store(error) => OperatorError::Store(error),
        other => OperatorError::Invalid(other.to_string()),
    })?;
    rows::insert_key(tx, &key.id, &operator.id, &api_key::stored(&key.hash), now).await?;
    Ok(Created { operator, enrol_path: invited.enrol_path, key })
}

/// `admin` as the store holds it now, its row locked: still enabled and an
/// admin (a change committed since its request was authenticated counts).
async fn authority(tx: &mut Tx, admin: &Operator) -> Result<(), OperatorError> {
    let now = locked(tx, &admin.id).await?;
    if !now.is_enabled() || !now.has(Role::Admin) {
        return Err(Refused::NoLongerAdmin(admin.id.clone()).into());
    }
    Ok(())
}

async fn locked(tx: &mut Tx, id: &str) -> Result<Operator, OperatorError> {
    Ok(rows::lock(tx, id).await?.ok_or_else(|| StoreError::NotFound(format!("operator {id}")))?)
}

fn record<'a>(actor: &'a Actor, action: &'a str, target: &'a str, reason: Option<&'a str>) -> Record<'a> {
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
