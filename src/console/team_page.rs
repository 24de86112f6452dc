//! The team tab: the organization's people; an admin invites (the one-time
//! link shown on the answer), changes roles and removes. Each change goes
//! through [`crate::people`] as `user:<id>`.

use askama::Template;
use axum::{
    Form,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{Redirect, Response},
};
use serde::Deserialize;

use super::{
    frame::Frame,
    web::{Page, Tenant, render},
};
use crate::people::{
    self, PeopleError,
    rules::{TenantAction, TenantRole},
};
use crate::{api::ApiState, audit::Actor, environment::Environment, mail::Invitations};

struct Member {
    id: String,
    email: String,
    role: &'static str,
    enrolled: bool,
    totp: bool,
}

#[derive(Template)]
#[template(path = "console/team.html")]
struct TeamPage {
    frame: Frame,
    organization: String,
    members: Vec<Member>,
    may_manage: bool,
    invited: Option<Invitation>,
}

/// An invitation as the answer shows it.
enum Invitation {
    /// `sandbox`: the link, to pass on.
    Link(String),
    /// `production`: mailed to this address.
    Sent(String),
}

async fn page(state: &ApiState, tenant: Tenant, invited: Option<Invitation>) -> Result<Response, Page> {
    let members = state
        .store()
        .console_users_of(&tenant.organization)
        .await?
        .into_iter()
        .map(|user| Member {
            role: user.role().map_or("", TenantRole::as_str),
            id: user.id,
            email: user.email,
            enrolled: user.enrolled,
            totp: user.totp,
        })
        .collect();
    let status = if invited.is_some() { StatusCode::CREATED } else { StatusCode::OK };
    let page = TeamPage {
        frame: Frame::of(state, &tenant.session, "/console/team"),
        may_manage: tenant.role.may(TenantAction::Team),
        organization: tenant.organization,
        members,
        invited,
    };
    Ok(render(status, &page))
}

/// `GET /console/team`.
pub async fn list(State(state): State<ApiState>, tenant: Tenant) -> Result<Response, Page> {
    page(&state, tenant, None).await
}

#[derive(Deserialize)]
pub struct InviteForm {
    email: String,
    role: String,
}

/// `POST /console/team`: the invitation's link, shown on this answer.
pub async fn invite(
    State(state): State<ApiState>,
    tenant: Tenant,
    headers: HeaderMap,
    Form(form): Form<InviteForm>,
) -> Result<Response, Page> {
    tenant.may(TenantAction::Team)?;
    let role = role(&form.role)?;
    let actor = Actor::User(tenant.session.user.id.clone());
    let mail = mail(&state)?;
    let invited = people::invite(state.store(), &tenant.organization, (&form.email, role), &actor, mail)
        .await
        .map_err(page_error)?;
    page(&state, tenant, Some(shown(&headers, &invited))).await
}

/// How a production invitation reaches its owner: mail, required.
fn mail(state: &ApiState) -> Result<Option<&Invitations>, Page> {
    match (state.environment(), state.invitations()) {
        (Environment::Sandbox, _) => Ok(None),
        (Environment::Production, Some(invitations)) => Ok(Some(invitations)),
        (Environment::Production, None) => Err(Page::Error(
            StatusCode::SERVICE_UNAVAILABLE,
            "production invitations are mailed to their owner only, and this service has no mail set up: \
             tell the platform's operators"
                .into(),
        )),
    }
}

/// What the answer says of an invitation: where it was mailed, or its link.
fn shown(headers: &HeaderMap, invited: &people::Invited) -> Invitation {
    match &invited.mailed_to {
        Some(to) => Invitation::Sent(to.clone()),
        None => Invitation::Link(link(headers, &invited.enrol_path)),
    }
}

/// `POST /console/team/{id}/link`: a new enrol link for a member who has
/// not enrolled (an expired or lost one).
pub async fn reissue(
    State(state): State<ApiState>,
    tenant: Tenant,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Page> {
    tenant.may(TenantAction::Team)?;
    let actor = Actor::User(tenant.session.user.id.clone());
    let mail = mail(&state)?;
    let invited =
        people::reissue(state.store(), &tenant.organization, &id, &actor, mail).await.map_err(page_error)?;
    page(&state, tenant, Some(shown(&headers, &invited))).await
}

/// The enrol link on the address the admin's browser reached.
fn link(headers: &HeaderMap, path: &str) -> String {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let forwarded = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()) == Some("https");
    let scheme = if people::rules::secure_cookie(forwarded, host) { "https" } else { "http" };
    format!("{scheme}://{host}{path}")
}

#[derive(Deserialize)]
pub struct RoleForm {
    role: String,
}

/// `POST /console/team/{id}/role`.
pub async fn set_role(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
    Form(form): Form<RoleForm>,
) -> Result<Redirect, Page> {
    tenant.may(TenantAction::Team)?;
    let role = role(&form.role)?;
    let actor = Actor::User(tenant.session.user.id.clone());
    people::set_role(state.store(), &tenant.organization, &id, role, &actor).await.map_err(page_error)?;
    Ok(Redirect::to("/console/team"))
}

/// `POST /console/team/{id}/remove`.
pub async fn remove(
    State(state): State<ApiState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Redirect, Page> {
    tenant.may(TenantAction::Team)?;
    let actor = Actor::User(tenant.session.user.id.clone());
    people::remove(state.store(), &tenant.organization, &id, &actor).await.map_err(page_error)?;
    Ok(Redirect::to("/console/team"))
}

fn role(text: &str) -> Result<TenantRole, Page> {
    text.parse().map_err(|e: String| Page::Error(StatusCode::UNPROCESSABLE_ENTITY, e))
}

fn page_error(error: PeopleError) -> Page {
    match error {
        PeopleError::Invalid(message) => Page::Error(StatusCode::UNPROCESSABLE_ENTITY, message),
        PeopleError::Refused(message) => Page::Error(StatusCode::CONFLICT, message),
        PeopleError::Store(error) => error.into(),
    }
}
