//! A tenant's API keys managed: created, revoked, paired with a public key
//! and unpaired, each change with its audit entry (`api_key.created`,
//! `api_key.revoked`, `api_key.paired`, `api_key.unpaired`) in one
//! transaction. Doing again what is done (revoking a revoked key, unpairing
//! an unpaired one) writes nothing.

use super::NewSecret;
use crate::{
    audit::{self, Actor, Detail, Record},
    request_signature::PublicKey,
    store::{ApiKey, Store, StoreError, Tx, organizations, request_signatures},
};

/// Creates a key named `name` for `organization`, by `actor`; its token is
/// shown once.
pub async fn create(
    store: &Store,
    organization: &str,
    name: &str,
    actor: &Actor,
) -> Result<(ApiKey, NewSecret), StoreError> {
    let secret = super::generate();
    let key = create_with(store, organization, name, (&secret.id, &secret.hash), actor).await?;
    Ok((key, secret))
}

/// Creates a key whose id and SHA-256 are given (`dev`'s documented key);
/// it is stored as [`super::stored`] keeps it.
pub async fn create_with(
    store: &Store,
    organization: &str,
    name: &str,
    (id, hash): (&str, &str),
    actor: &Actor,
) -> Result<ApiKey, StoreError> {
    let mut tx = store.begin().await?;
    let key = store.create_api_key_in(&mut tx, organization, name, id, &super::stored(hash)).await?;
    // A new key's state, so that the log of a store with no operator yet
    // already says which keys it made (see `audit::adopt`).
    let detail = Detail { live: Some(true), paired: Some(false), ..Detail::default() };
    append(&mut tx, store, actor, ("api_key.created", Some(detail)), &key.id, organization).await?;
    tx.commit().await?;
    Ok(key)
}

/// Revokes key `id`, by `actor`: every later request with it is refused.
pub async fn revoke(store: &Store, id: &str, actor: &Actor) -> Result<ApiKey, StoreError> {
    let mut tx = store.begin().await?;
    if let Some(organization) = organizations::revoke_api_key(&mut tx, id).await? {
        append(&mut tx, store, actor, ("api_key.revoked", None), id, &organization).await?;
    }
    tx.commit().await?;
    store.api_key(id).await
}

/// Pairs the active key `id` with `public_key`, by `actor`: from then on
/// every request with it must be signed. A revoked key is a conflict.
pub async fn pair(
    store: &Store,
    id: &str,
    public_key: &PublicKey,
    actor: &Actor,
) -> Result<ApiKey, StoreError> {
    let mut tx = store.begin().await?;
    let Some(organization) = request_signatures::pair_api_key(&mut tx, id, public_key).await? else {
        drop(tx);
        store.api_key(id).await?;
        return Err(StoreError::Refused(format!("API key {id} is revoked")));
    };
    let fingerprint = super::sha256_hex(public_key.pem().as_bytes());
    let detail = Detail { public_key_sha256: Some(fingerprint), ..Detail::default() };
    append(&mut tx, store, actor, ("api_key.paired", Some(detail)), id, &organization).await?;
    tx.commit().await?;
    store.api_key(id).await
}

/// Removes key `id`'s public key, by `actor`.
pub async fn unpair(store: &Store, id: &str, actor: &Actor) -> Result<ApiKey, StoreError> {
    let mut tx = store.begin().await?;
    if let Some(organization) = request_signatures::unpair_api_key(&mut tx, id).await? {
        append(&mut tx, store, actor, ("api_key.unpaired", None), id, &organization).await?;
    }
    tx.commit().await?;
    store.api_key(id).await
}

/// Appends `action`, with its detail, for key `id` of `organization`.
async fn append(
    tx: &mut Tx,
    store: &Store,
    actor: &Actor,
    (action, detail): (&str, Option<Detail>),
    id: &str,
    organization: &str,
) -> Result<(), StoreError> {
    let record = Record {
        actor,
        action,
        target_kind: "api_key",
        target_id: id,
        organization_id: Some(organization),
        reason: None,
        request_id: None,
        detail,
    };
    audit::append(tx, store.cipher().ok(), record).await?;
    Ok(())
}
