//! `/operator/v1/organizations/{organization_id}`: an operator `admin`
//! invites a tenant's first console admin (`POST …/users`; in `sandbox`
//! the answer carries the one-time enrol link's path, in `production` it is
//! a change another admin approves, mailed to the contact address) and
//! sets the organization's contact address (`PUT …/contact`).

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    OperatorCaller,
    operators::{ChangeAnswer, answer},
};
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    operators::{
        Action, Outcome,
        tenants::{self, FirstAdmin},
    },
    people::rules::TenantRole,
    store::Organization,
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteRequest {
    pub email: String,
    /// `admin`, `developer` or `viewer`.
    #[schema(value_type = String)]
    pub role: TenantRole,
}

/// A tenant's console user.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsoleUser {
    pub id: String,
    pub email: String,
    pub organization_id: String,
    pub role: String,
}

/// `Debug` leaves the enrol path out.
#[derive(Serialize, ToSchema)]
pub struct InvitedUser {
    pub user: ConsoleUser,
    /// `/console/enrol/<token>` on this service's address: once, within 24
    /// hours, the person sets a password there.
    pub enrol_path: String,
}

impl std::fmt::Debug for InvitedUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvitedUser").field("user", &self.user.id).finish_non_exhaustive()
    }
}

/// An organization as an operator sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrganizationAnswer {
    pub id: String,
    pub name: String,
    /// Where a production invitation of its first console admin is mailed.
    pub contact_email: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactRequest {
    pub contact_email: String,
    pub reason: Option<String>,
}

/// Invites an organization's first console admin: at once in `sandbox`
/// (the link answered), a change another admin approves in `production`
/// (mailed to the organization's contact address once approved). An
/// organization with console users is refused: its own admins invite
/// their team.
#[utoipa::path(post, operation_id = "inviteConsoleUser", path = "/operator/v1/organizations/{organization_id}/users",
    tag = "operators", security(("operator_key" = [])), request_body = InviteRequest,
    params(("organization_id" = String, Path, description = "The organization")),
    responses(
        (status = 201, description = "Invited (`sandbox`); the enrol link is shown once", body = InvitedUser),
        (status = 202, description = "Proposed (`production`): another admin approves", body = ChangeAnswer),
        (status = 400, description = "A malformed email, a role other than `admin`, or (`production`) an address other than the contact address", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 404, description = "No such organization", body = ErrorBody),
        (status = 409, description = "The organization has console users, or (`production`) no contact address; a console user has this email", body = ErrorBody),
        (status = 503, description = "`production` without mail", body = ErrorBody),
    ))]
pub async fn invite(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(organization): Path<String>,
    Body(request): Body<InviteRequest>,
) -> Result<Response, ApiError> {
    caller.may(Action::Tenants)?;
    let setting = (state.environment(), state.invitations());
    let who = (organization.as_str(), request.email.as_str(), request.role);
    match tenants::invite_first_admin(state.store(), setting, &caller.0, who).await? {
        FirstAdmin::Invited(invited) => {
            let user = ConsoleUser {
                organization_id: organization,
                role: request.role.as_str().to_string(),
                id: invited.user.id,
                email: invited.user.email,
            };
            let answer = InvitedUser { user, enrol_path: invited.enrol_path };
            Ok((StatusCode::CREATED, Json(answer)).into_response())
        }
        FirstAdmin::Proposed(change) => {
            Ok((StatusCode::ACCEPTED, Json(ChangeAnswer { change: *change, suspended_until: None }))
                .into_response())
        }
    }
}

/// Sets an organization's contact address: at once in `sandbox`, a change
/// another admin approves in `production`.
#[utoipa::path(put, operation_id = "setOrganizationContact", path = "/operator/v1/organizations/{organization_id}/contact",
    tag = "operators", security(("operator_key" = [])), request_body = ContactRequest,
    params(("organization_id" = String, Path, description = "The organization")),
    responses(
        (status = 200, description = "Set (`sandbox`)", body = OrganizationAnswer),
        (status = 202, description = "Proposed (`production`): another admin approves", body = ChangeAnswer),
        (status = 400, description = "A malformed email", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 404, description = "No such organization", body = ErrorBody),
    ))]
pub async fn set_contact(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(organization): Path<String>,
    Body(request): Body<ContactRequest>,
) -> Result<Response, ApiError> {
    caller.may(Action::Tenants)?;
    let to = (organization.as_str(), request.contact_email.as_str());
    let reason = request.reason.as_deref();
    let outcome = tenants::set_contact(state.store(), state.environment(), &caller.0, to, reason).await?;
    let outcome = match outcome {
        Outcome::Applied(organization) => Outcome::Applied(OrganizationAnswer::from(organization)),
        Outcome::Proposed(change) => Outcome::Proposed(change),
        Outcome::Suspended(change) => Outcome::Suspended(change),
    };
    Ok(answer(outcome, StatusCode::OK))
}

impl From<Organization> for OrganizationAnswer {
    fn from(organization: Organization) -> Self {
        OrganizationAnswer {
            id: organization.id,
            name: organization.name,
            contact_email: organization.contact_email,
        }
    }
}
