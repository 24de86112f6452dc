//! The API keys tab: create (a name required; the secret shown once, on
//! the page that answers the creation), list, revoke, pair a public key.
//! Each change goes through [`crate::api_key::manage`] as `user:<id>`.

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
use crate::{
    api::ApiState,
    api_key::manage,
    audit::Actor,
    request_signature::PublicKey,
    store::{ApiKey, MAX_API_KEYS},
};

/// A key as the list shows it.
struct Row {
    id: String,
    name: String,
    created: String,
    last_used: String,
    revoked: Option<String>,
    paired: String,
}

impl From<&ApiKey> for Row {
    fn from(key: &ApiKey) -> Self {
        Row {
            id: key.id.clone(),
            name: key.name.clone(),
            created: when(&key.created_at),
            last_used: key.last_used_at.as_ref().map_or_else(|| "never".into(), when),
            revoked: key.revoked_at.as_ref().map(when),
            paired: key.signature_algorithm.map_or_else(|| "not required".into(), |a| a.as_str().to_string()),
        }
    }
}

#[derive(Template)]
#[template(path = "console/keys.html")]
struct KeysPage {
    frame: Frame,
    organization: String,
    max_keys: i64,
    keys: Vec<Row>,
    active: usize,
    may_manage: bool,
    may_make_unpaired: bool,
}

/// `GET /console/keys`.
pub async fn list(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    let keys = state.store().api_keys(Some(&tenant.organization)).await?;
    let page = KeysPage {
        frame: Frame::of(&state, &tenant.session, "/console/keys"),
        active: keys.iter().filter(|k| k.revoked_at.is_none()).count(),
        keys: keys.iter().map(Row::from).collect(),
        may_manage: tenant.role.may(TenantAction::Keys),
        may_make_unpaired: tenant.role.may(TenantAction::UnpairedKeys),
        organization: tenant.organization,
        max_keys: MAX_API_KEYS,
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Template)]
#[template(path = "console/key_created.html")]
struct CreatedPage {
    frame: Frame,
    id: String,
    name: String,
    secret: String,
}

#[derive(Deserialize)]
pub struct CreateForm {
    name: String,
    /// A public key (PEM) the new key is paired with at once: a developer's
    /// key must have one.
    #[serde(default)]
    public_key: String,
}

/// `POST /console/keys`: the new key's secret, on this answer only.
pub async fn create(
    State(state): State<ApiState>,
    tenant: Tenant,
    Form(form): Form<CreateForm>,
) -> Result<Response, Page> {
    tenant.may(TenantAction::Keys)?;
    let name = form.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(Page::Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "a key needs a name of 1 to 100 characters".into(),
        ));
    }
    // Read before anything is made: a key refused its pairing is not made.
    let public_key = match form.public_key.trim() {
        "" => {
            tenant.may(TenantAction::UnpairedKeys).map_err(|_| {
                Page::Error(
                    StatusCode::FORBIDDEN,
                    "only an admin makes a key without a public key: paste the public key its requests are \
                     signed with"
                        .into(),
                )
            })?;
            None
        }
        pem => Some(
            PublicKey::from_pem(pem)
                .map_err(|e| Page::Error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?,
        ),
    };
    let actor = Actor::User(tenant.session.user.id.clone());
    let (key, secret) = manage::create(state.store(), &tenant.organization, name, &actor).await?;
    if let Some(public_key) = public_key {
        manage::pair(state.store(), &key.id, &public_key, &actor).await?;
    }
    let page = CreatedPage {
        frame: Frame::of(&state, &tenant.session, "/console/keys"),
        id: key.id,
        name: key.name,
        secret: secret.token.to_string(),
    };
    Ok(render(StatusCode::CREATED, &page))
}

/// The key `id` of the tenant's organization; another's is not found.
async fn own(state: &ApiState, tenant: &Tenant, id: &str) -> Result<ApiKey, Page> {
    let key = state.store().api_key(id).await?;
    if key.organization_id != tenant.organization {
        return Err(Page::not_found());
    }
    Ok(key)
}

/// `POST /console/keys/{id}/revoke`.
pub async fn revoke(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Redirect, Page> {
    tenant.may(TenantAction::Keys)?;
    own(&state, &tenant, &id).await?;
    manage::revoke(state.store(), &id, &Actor::User(tenant.session.user.id.clone())).await?;
    Ok(Redirect::to("/console/keys"))
}

#[derive(Template)]
#[template(path = "console/key.html")]
struct KeyPage {
    frame: Frame,
    id: String,
    name: String,
    paired: Option<&'static str>,
    may_unpair: bool,
}

/// `GET /console/keys/{id}`: pairing for signed requests.
pub async fn show(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, Page> {
    tenant.may(TenantAction::Keys)?;
    let key = own(&state, &tenant, &id).await?;
    let page = KeyPage {
        frame: Frame::of(&state, &tenant.session, "/console/keys"),
        id: key.id,
        name: key.name,
        paired: key.signature_algorithm.map(|a| a.as_str()),
        may_unpair: tenant.role.may(TenantAction::UnpairedKeys),
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
pub struct PairForm {
    public_key: String,
}

/// `POST /console/keys/{id}/pair`.
pub async fn pair(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
    Form(form): Form<PairForm>,
) -> Result<Redirect, Page> {
    tenant.may(TenantAction::Keys)?;
    own(&state, &tenant, &id).await?;
    let public_key = PublicKey::from_pem(&form.public_key)
        .map_err(|e| Page::Error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    manage::pair(state.store(), &id, &public_key, &Actor::User(tenant.session.user.id.clone())).await?;
    Ok(Redirect::to(&format!("/console/keys/{id}")))
}

/// `POST /console/keys/{id}/unpair`: an admin's only.
pub async fn unpair(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Redirect, Page> {
    tenant.may(TenantAction::UnpairedKeys)?;
    own(&state, &tenant, &id).await?;
    manage::unpair(state.store(), &id, &Actor::User(tenant.session.user.id.clone())).await?;
    Ok(Redirect::to(&format!("/console/keys/{id}")))
}
