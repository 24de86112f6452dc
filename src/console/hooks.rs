//! A tenant's webhooks changed from the console: registered, their signing
//! key rotated, a delivery resent. Each change is one transaction with its
//! audit entry (`webhook.registered`, `webhook.key_rotated`,
//! `webhook_delivery.resent`) by the console user.

use std::time::Duration;

use crate::{
    audit::{self, Actor, Record},
    events::signing::Secret,
    store::{Store, StoreError, Tx, Webhook},
};

/// Registers a webhook at `url` (already checked against the policy); its
/// signing secret is shown once.
pub async fn register(
    store: &Store,
    organization: &str,
    url: &str,
    label: &str,
    actor: &Actor,
) -> Result<(Webhook, Secret), StoreError> {
    let secret = Secret::generate();
    let mut tx = store.begin().await?;
    let id = store.create_webhook_in(&mut tx, organization, url, label, secret.expose()).await?;
    append(&mut tx, store, actor, ("webhook.registered", "webhook", &id), organization).await?;
    tx.commit().await?;
    Ok((store.webhook(Some(organization), &id).await?, secret))
}

/// Replaces webhook `id`'s signing key; the replaced key keeps signing for
/// `overlap`. The new secret is shown once.
pub async fn rotate(
    store: &Store,
    organization: &str,
    id: &str,
    overlap: Duration,
    actor: &Actor,
) -> Result<(Webhook, Secret), StoreError> {
    let secret = Secret::generate();
    let mut tx = store.begin().await?;
    store.rotate_signing_key_in(&mut tx, Some(organization), id, secret.expose(), overlap).await?;
    append(&mut tx, store, actor, ("webhook.key_rotated", "webhook", id), organization).await?;
    tx.commit().await?;
    Ok((store.webhook(Some(organization), id).await?, secret))
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
