//! `POST /operator/v1/organizations/{organization_id}/users`: an operator
//! `admin` invites a person to a tenant's console (its first admin, most
//! often); the answer carries the one-time enrol link's path.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::api::ErrorCode;
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    console::{
        people::{self, PeopleError},
        rules::TenantRole,
    },
    operators::{Action, manage},
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

/// Invites a person to an organization's console.
#[utoipa::path(post, operation_id = "inviteConsoleUser", path = "/operator/v1/organizations/{organization_id}/users",
    tag = "operators", security(("operator_key" = [])), request_body = InviteRequest,
    params(("organization_id" = String, Path, description = "The organization")),
    responses(
        (status = 201, description = "Invited; the enrol link is shown once", body = InvitedUser),
        (status = 400, description = "A malformed email or an unknown role", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 404, description = "No such organization", body = ErrorBody),
        (status = 409, description = "A console user has this email", body = ErrorBody),
    ))]
pub async fn invite(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(organization): Path<String>,
    Body(request): Body<InviteRequest>,
) -> Result<(StatusCode, Json<InvitedUser>), ApiError> {
    caller.may(Action::Tenants)?;
    let actor = manage::actor(&caller.0);
    let invited = people::invite(state.store(), &organization, &request.email, request.role, &actor)
        .await
        .map_err(|error| match error {
            PeopleError::Invalid(message) => ApiError::invalid(message),
            PeopleError::Refused(message) => {
                ApiError::coded(StatusCode::CONFLICT, ErrorCode::Conflict, message)
            }
            PeopleError::Store(error) => error.into(),
        })?;
    let user = ConsoleUser {
        organization_id: organization,
        role: request.role.as_str().to_string(),
        id: invited.user.id,
        email: invited.user.email,
    };
    Ok((StatusCode::CREATED, Json(InvitedUser { user, enrol_path: invited.enrol_path })))
}
