//! A tenant's webhooks changed, whichever door the change came through
//! (the API with a key, the console with a user, the command line on the
//! store, `dev`'s seeding): registered, deleted, their signing key rotated,
//! their previous keys revoked, a delivery sent again. Each change is one
//! transaction holding its audit entry (`webhook.registered`,
//! `webhook.deleted`, `webhook.key_rotated`, `webhook.previous_keys_revoked`,
//! `webhook_delivery.resent`) with who made it; the store has no other way
//! to change a webhook.

use std::time::Duration;

use crate::{
    audit::{self, Actor, Record},
    events::signing::Secret,
    store::{Store, StoreError, Tx, Webhook},
};

/// Registers a webhook of `organization` at `url` (already checked against
/// the webhook policy), signing with `secret`.
pub async fn register(
    store: &Store,
    organization: &str,
    (url, label): (&str, &str),
    secret: &str,
    actor: &Actor,
) -> Result<Webhook, StoreError> {
    let mut tx = store.begin().await?;
    let id = store.create_webhook_in(&mut tx, organization, url, label, secret).await?;
    append(&mut tx, store, actor, ("webhook.registered", "webhook", &id), organization).await?;
    tx.commit().await?;
    store.webhook(Some(organization), &id).await
}

/// Deletes webhook `id`, if it is `organization`'s (any when `None`): it
/// gets no new events and its pending deliveries end.
pub async fn delete(
    store: &Store,
    organization: Option<&str>,
    id: &str,
    actor: &Actor,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let owner = store.delete_webhook_in(&mut tx, organization, id).await?;
    append(&mut tx, store, actor, ("webhook.deleted", "webhook", id), &owner).await?;
    tx.commit().await?;
    Ok(())
}

/// Replaces webhook `id`'s signing key with a new one, shown once; the
/// replaced key keeps signing for `overlap`.
pub async fn rotate(
    store: &Store,
    organization: Option<&str>,
    id: &str,
    overlap: Duration,
    actor: &Actor,
) -> Result<(Webhook, Secret), StoreError> {
    let secret = Secret::generate();
    let mut tx = store.begin().await?;
    let owner = store.rotate_signing_key_in(&mut tx, organization, id, secret.expose(), overlap).await?;
    append(&mut tx, store, actor, ("webhook.key_rotated", "webhook", id), &owner).await?;
    tx.commit().await?;
    Ok((store.webhook(organization, id).await?, secret))
}

/// Ends every rotated-out signing key of webhook `id` at once.
pub async fn revoke_previous_keys(
    store: &Store,
    organization: Option<&str>,
    id: &str,
    actor: &Actor,
) -> Result<Webhook, StoreError> {
    let mut tx = store.begin().await?;
    let owner = store.revoke_previous_keys_in(&mut tx, organization, id).await?;
    append(&mut tx, store, actor, ("webhook.previous_keys_revoked", "webhook", id), &owner).await?;
    tx.commit().await?;
    store.webhook(organization, id).await
}

/// Sends delivery `id` again: one of `organization`'s, delivered or
/// dead-lettered, of an active webhook.
pub async fn resend(store: &Store, organization: &str, id: &str, actor: &Actor) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    if !store.resend_in(&mut tx, organization, id).await? {
        return Err(StoreError::NotFound(format!("delivered or failed delivery {id} of an active webhook")));
    }
    append(&mut tx, store, actor, ("webhook_delivery.resent", "webhook_delivery", id), organization).await?;
    tx.commit().await?;
    store.wake_deliveries();
    Ok(())
}

/// Sends the dead-lettered delivery `id` of any organization's active
/// webhook again (an operator on the store: `webhooks redeliver`).
pub async fn redeliver(store: &Store, id: &str, actor: &Actor) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let organization = store.redeliver_in(&mut tx, id).await?;
    append(&mut tx, store, actor, ("webhook_delivery.resent", "webhook_delivery", id), &organization).await?;
    tx.commit().await?;
    store.wake_deliveries();
    Ok(())
}

async fn append(
    tx: &mut Tx,
    store: &Store,
    actor: &Actor,
    (action, kind, id): (&str, &str, &str),
    organization: &str,
) -> Result<(), StoreError> {
    let record = Record {
        actor,
        action,
        target_kind: kind,
        target_id: id,
        organization_id: Some(organization),
        reason: None,
        request_id: None,
        detail: None,
    };
    audit::append(tx, store.cipher().ok(), record).await?;
    Ok(())
}
