//! `/v2/webhooks`: register, list, delete, rotate signing keys and revoke
//! the rotated-out ones at once; and
//! `GET /v2/events`, the pull API over the same events.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiState, Body, ErrorBody, auth::Caller, params::Params};
use crate::{events::signing::Secret, store::Webhook, webhooks};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// An `https` URL that does not resolve to a private, loopback or link-local address.
    pub url: String,
    #[serde(default)]
    pub label: String,
}

/// A webhook with its signing secret, shown only when created or rotated.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookWithSecret {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// `whsec_…`: verify signatures with it; it is not shown again.
    pub signing_secret: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<Webhook>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Empty {}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventList {
    /// Envelopes `{ "id", "type", "data" }` in commit order.
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<serde_json::Value>,
    /// The last event's id: pass it as `after` to continue. Absent only when
    /// there are no events at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Registers a webhook; every later event of the organization is delivered to it.
#[utoipa::path(post, operation_id = "createWebhook", path = "/v2/webhooks", tag = "webhooks", request_body = NewWebhook,
    responses(
        (status = 201, description = "Registered; the signing secret is shown once", body = WebhookWithSecret),
        (status = 400, description = "Malformed body or a URL webhooks may not reach", body = ErrorBody),
        (status = 409, description = "ORGANIZATION_LIMIT_REACHED: the organization holds as many webhooks as it may", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(new): Body<NewWebhook>,
) -> Result<(StatusCode, Json<WebhookWithSecret>), ApiError> {
    let url =
        state.0.webhook_policy.check(&new.url).await.map_err(|e| ApiError::invalid(format!("url: {e}")))?;
    let secret = Secret::generate();
    let target = (url.as_str(), new.label.as_str());
    let webhook =
        webhooks::register(state.store(), &caller.organization, target, secret.expose(), &caller.actor())
            .await?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookWithSecret { webhook, signing_secret: secret.expose().to_string() }),
    ))
}

/// The organization's webhooks.
#[utoipa::path(get, operation_id = "listWebhooks", path = "/v2/webhooks", tag = "webhooks",
    responses(
        (status = 200, description = "The webhooks", body = WebhookList),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<WebhookList>, ApiError> {
    Ok(Json(WebhookList { webhooks: state.store().webhooks(Some(&caller.organization)).await? }))
}

/// Deletes a webhook: it gets no further deliveries.
#[utoipa::path(delete, operation_id = "deleteWebhook", path = "/v2/webhooks/{webhook_id}", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "Deleted", body = Empty),
        (status = 404, description = "No such webhook in the organization", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    webhooks::delete(state.store(), Some(&caller.organization), &id, &caller.actor()).await?;
    Ok(Json(Empty {}))
}

/// Replaces the signing key. The replaced key keeps signing for 24 hours and
/// keys rotated out before it until their own expiry, so deliveries carry
/// one signature per valid key (three at most) and receivers can switch
/// without losing events; `previous_key_expires_at` is the latest expiry.
/// A rotation while two previous keys are still valid drops the older of
/// them at once.
#[utoipa::path(post, operation_id = "rotateWebhookSigningKey", path = "/v2/webhooks/{webhook_id}/rotate-signing-key", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "Rotated; the new secret is shown once", body = WebhookWithSecret),
        (status = 404, description = "No such webhook in the organization", body = ErrorBody),
    ))]
pub async fn rotate(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<WebhookWithSecret>, ApiError> {
    let overlap = state.0.key_overlap;
    let (webhook, secret) =
        webhooks::rotate(state.store(), Some(&caller.organization), &id, overlap, &caller.actor()).await?;
    Ok(Json(WebhookWithSecret { webhook, signing_secret: secret.expose().to_string() }))
}

/// Ends every rotated-out signing key at once, whatever its expiry (a key
/// that leaked): deliveries from then on carry the current key's signature
/// alone, and `previous_key_expires_at` is `null`. Revoking when there is
/// none changes nothing. An extension of the reference.
#[utoipa::path(post, operation_id = "revokePreviousWebhookKeys", path = "/v2/webhooks/{webhook_id}/revoke-previous-keys", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "Revoked; the webhook as it now signs", body = Webhook),
        (status = 404, description = "No such webhook in the organization", body = ErrorBody),
    ))]
pub async fn revoke_previous_keys(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<Webhook>, ApiError> {
    let actor = caller.actor();
    Ok(Json(webhooks::revoke_previous_keys(state.store(), Some(&caller.organization), &id, &actor).await?))
}

/// The organization's events in commit order, for receivers that poll or
/// catch up: pass the last event id seen as `after`.
#[utoipa::path(get, operation_id = "listEvents", path = "/v2/events", tag = "webhooks",
    params(
        ("after" = Option<String>, Query, description = "Only events committed after this event"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
    ),
    responses(
        (status = 200, description = "Events in commit order", body = EventList),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 404, description = "`after` is not an event of the organization", body = ErrorBody),
    ))]
pub async fn events(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<EventList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["after", "limit"])?;
    let limit = params.limit("limit", 25, 100)?;
    let after = params.one("after")?.filter(|a| !a.is_empty());
    let events = state.store().events_after(&caller.organization, after, limit).await?;
    let cursor = events.last().map(|e| e.id().to_string()).or(after.map(String::from));
    Ok(Json(EventList { events: events.into_iter().map(|e| e.envelope).collect(), cursor }))
}
