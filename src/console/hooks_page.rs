//! The webhooks tab: register (URL, label; the signing secret shown once),
//! list, rotate the signing key, each webhook's deliveries with every
//! attempt (time, HTTP status, latency), resend one, the dead letters.

use std::collections::HashMap;

use askama::Template;
use axum::{
    Form,
    extract::{Path, State},
    http::StatusCode,
    response::{Redirect, Response},
};
use serde::Deserialize;

use super::{
    frame::{Frame, when},
    web::{Page, Tenant, render},
};
use crate::people::rules::TenantAction;
use crate::{api::ApiState, audit::Actor, events::signing::Secret, store::Webhook, webhooks};

/// The deliveries a webhook's page shows.
const SHOWN: i64 = 50;

#[derive(Template)]
#[template(path = "console/webhooks.html")]
struct WebhooksPage {
    frame: Frame,
    webhooks: Vec<Webhook>,
    may_manage: bool,
}

/// `GET /console/webhooks`.
pub async fn list(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let page = WebhooksPage {
        frame: Frame::of(&state, &tenant.session, "/console/webhooks"),
        webhooks: state.store().webhooks(Some(&tenant.organization)).await?,
        may_manage: tenant.role.may(TenantAction::Webhooks),
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Template)]
#[template(path = "console/webhook_secret.html")]
struct SecretPage {
    frame: Frame,
    webhook: Webhook,
    secret: String,
    rotated: bool,
}

#[derive(Deserialize)]
pub struct RegisterForm {
    url: String,
    #[serde(default)]
    label: String,
}

/// `POST /console/webhooks`: the signing secret, on this answer only.
pub async fn register(
    State(state): State<ApiState>,
    tenant: Tenant,
    Form(form): Form<RegisterForm>,
) -> Result<Response, Page> {
    tenant.may(TenantAction::Webhooks)?;
    let url = state
        .webhook_policy()
        .check(form.url.trim())
        .await
        .map_err(|e| Page::Error(StatusCode::UNPROCESSABLE_ENTITY, format!("url: {e}")))?;
    let actor = Actor::User(tenant.session.user.id.clone());
    let secret = Secret::generate();
    let target = (url.as_str(), form.label.trim());
    let webhook =
        webhooks::register(state.store(), &tenant.organization, target, secret.expose(), &actor).await?;
    let frame = Frame::of(&state, &tenant.session, "/console/webhooks");
    let page = SecretPage { frame, webhook, secret: secret.expose().to_string(), rotated: false };
    Ok(render(StatusCode::CREATED, &page))
}

/// `POST /console/webhooks/{id}/rotate`: the new secret, on this answer only.
pub async fn rotate(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, Page> {
    tenant.may(TenantAction::Webhooks)?;
    let actor = Actor::User(tenant.session.user.id.clone());
    let (webhook, secret) =
        webhooks::rotate(state.store(), Some(&tenant.organization), &id, state.key_overlap(), &actor).await?;
    let frame = Frame::of(&state, &tenant.session, "/console/webhooks");
    let page = SecretPage { frame, webhook, secret: secret.expose().to_string(), rotated: true };
    Ok(render(StatusCode::OK, &page))
}

/// One attempt as the page shows it.
#[derive(Clone)]
struct AttemptView {
    number: u32,
    at: String,
    status: String,
    latency_ms: u64,
}

/// One delivery and its attempts.
struct DeliveryView {
    id: String,
    event_type: String,
    event_id: String,
    state: String,
    attempts: Vec<AttemptView>,
    may_resend: bool,
}

/// A list of deliveries on the page.
struct Section {
    title: &'static str,
    id: &'static str,
    caption: &'static str,
    deliveries: Vec<DeliveryView>,
}

#[derive(Template)]
#[template(path = "console/webhook.html")]
struct WebhookPage {
    frame: Frame,
    webhook: Webhook,
    sections: [Section; 2],
    may_manage: bool,
}

/// `GET /console/webhooks/{id}`: its deliveries, each attempt, its dead letters.
pub async fn show(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, Page> {
    let store = state.store();
    let webhook = store.webhook(Some(&tenant.organization), &id).await?;
    let may_manage = tenant.role.may(TenantAction::Webhooks);
    let recent = store.newest_deliveries(Some(&id), false, SHOWN).await?;
    let dead = store.newest_deliveries(Some(&id), true, SHOWN).await?;
    let ids: Vec<String> = recent.iter().chain(&dead).map(|d| d.id.clone()).collect();
    let mut attempts: HashMap<String, Vec<AttemptView>> = HashMap::new();
    for (delivery, attempt) in store.attempts_of(&ids).await? {
        let status = match (attempt.status_code, attempt.error) {
            (Some(code), _) => code.to_string(),
            (None, Some(error)) => format!("no answer: {error}"),
            (None, None) => "no answer".into(),
        };
        let at = chrono::DateTime::from_timestamp_micros(attempt.at).unwrap_or_default();
        let view =
            AttemptView { number: attempt.number, at: when(&at), status, latency_ms: attempt.duration_ms };
        attempts.entry(delivery).or_default().push(view);
    }
    let active = webhook.status == "ACTIVE";
    let view = |d: crate::store::Delivery| DeliveryView {
        attempts: attempts.get(&d.id).cloned().unwrap_or_default(),
        may_resend: may_manage && active && d.state != "PENDING",
        id: d.id,
        event_type: d.event_type,
        event_id: d.event_id,
        state: d.state,
    };
    let sections = [
        Section {
            title: "Deliveries",
            id: "deliveries",
            caption: "most recent deliveries",
            deliveries: recent.into_iter().map(view).collect(),
        },
        Section {
            title: "Dead letters",
            id: "dead-letters",
            caption: "deliveries that ran out of attempts",
            deliveries: dead.into_iter().map(view).collect(),
        },
    ];
    let frame = Frame::of(&state, &tenant.session, "/console/webhooks");
    Ok(render(StatusCode::OK, &WebhookPage { frame, webhook, sections, may_manage }))
}

/// `POST /console/webhooks/{id}/deliveries/{delivery}/resend`.
pub async fn resend(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path((id, delivery)): Path<(String, String)>,
) -> Result<Redirect, Page> {
    tenant.may(TenantAction::Webhooks)?;
    state.store().webhook(Some(&tenant.organization), &id).await?;
    let actor = Actor::User(tenant.session.user.id.clone());
    webhooks::resend(state.store(), &tenant.organization, &delivery, &actor).await?;
    Ok(Redirect::to(&format!("/console/webhooks/{id}")))
}
