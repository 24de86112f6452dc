//! `/operator/v1/operators`: operators created, listed, given roles,
//! disabled, and their keys created and revoked, by an `admin`.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    api_key::NewSecret,
    environment::Environment,
    operators::{
        Action, Change, NewOperator, Operator, OperatorKey, Outcome, Role, grants, manage, suspension,
        taking::{self, Taken},
    },
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OperatorRequest {
    pub name: String,
    pub email: String,
    pub roles: Vec<Role>,
}

/// A key's token, shown once. `Debug` shows the id only.
#[derive(Serialize, ToSchema)]
pub struct NewKey {
    pub id: String,
    /// `cio_…`: send it as `Authorization: Bearer …`; it is not shown again.
    pub token: String,
}

impl From<NewSecret> for NewKey {
    fn from(secret: NewSecret) -> Self {
        NewKey { id: secret.id, token: secret.token }
    }
}

impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewKey").field("id", &self.id).finish_non_exhaustive()
    }
}

/// `Debug` shows neither the enrol path nor the key's token.
#[derive(Serialize, ToSchema)]
pub struct CreatedOperator {
    pub operator: Operator,
    /// `sandbox` only: the operator's one-time console enrol link, on this
    /// service's address (`/console/enrol/<token>`), valid 24 hours. In
    /// `production` it reaches its owner only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enrol_path: Option<String>,
    /// `sandbox` only: the operator's first key. In `production` an
    /// operator's first key ends their own enrolment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<NewKey>,
    /// `production`: where the enrol link was mailed, `sent to <email>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invitation: Option<String>,
}

impl CreatedOperator {
    /// What an answer in `environment` shows of `created`.
    pub fn shown(created: manage::Created, environment: Environment) -> Self {
        let sandbox = environment == Environment::Sandbox;
        let invitation = (!sandbox).then(|| format!("sent to {}", created.operator.email));
        CreatedOperator {
            operator: created.operator,
            enrol_path: sandbox.then_some(created.enrol_path),
            key: created.key.filter(|_| sandbox).map(NewKey::from),
            invitation,
        }
    }
}

/// Where a fresh enrol link went.
#[derive(Serialize, ToSchema)]
pub struct InvitationAnswer {
    /// `sent to <email>`: mailed to the operator's recorded address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invitation: Option<String>,
    /// `sandbox` without mail only: the link's path, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enrol_path: Option<String>,
}

/// A change that waits for another admin; when it suspends its target
/// (an admin taken away while two admins hold the platform), when the
/// suspension lapses unless completed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeAnswer {
    pub change: Change,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub suspended_until: Option<String>,
}

/// `202` with the change when a grant waits for another admin (or a
/// suspension for its completion), `status` with what was applied
/// otherwise.
pub(super) fn answer<T: Serialize>(outcome: Outcome<T>, status: StatusCode) -> Response {
    match outcome {
        Outcome::Applied(done) => (status, Json(done)).into_response(),
        Outcome::Proposed(change) => {
            (StatusCode::ACCEPTED, Json(ChangeAnswer { change: *change, suspended_until: None }))
                .into_response()
        }
        Outcome::Suspended(change) => {
            let until = suspension::lapses_at(change.created_at.timestamp_micros());
            let until = chrono::DateTime::from_timestamp_micros(until).unwrap_or_default();
            let until = Some(until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            (StatusCode::ACCEPTED, Json(ChangeAnswer { change: *change, suspended_until: until }))
                .into_response()
        }
    }
}

impl std::fmt::Debug for CreatedOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedOperator")
            .field("operator", &self.operator.id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OperatorEntry {
    #[serde(flatten)]
    pub operator: Operator,
    pub keys: Vec<OperatorKey>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OperatorList {
    pub operators: Vec<OperatorEntry>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    pub reason: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolesRequest {
    pub roles: Vec<Role>,
    pub reason: String,
}

fn reason(text: &str) -> Result<&str, ApiError> {
    let text = text.trim();
    if text.is_empty() { Err(ApiError::invalid("reason: a reason is required")) } else { Ok(text) }
}

/// Creates an operator: at once in `sandbox` (with its first key) and,
/// in `production`, an admin during genesis; otherwise a change another
/// admin approves.
#[utoipa::path(post, operation_id = "createOperator", path = "/operator/v1/operators", tag = "operators", security(("operator_key" = [])),
    request_body = OperatorRequest,
    responses(
        (status = 201, description = "Created; a key's token is shown once", body = CreatedOperator),
        (status = 202, description = "Proposed: another admin approves the change", body = ChangeAnswer),
        (status = 400, description = "A missing name, a malformed email, no role", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 409, description = "An operator or a pending change has this email; genesis grants admins only", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<OperatorRequest>,
) -> Result<Response, ApiError> {
    let new = NewOperator { name: request.name, email: request.email, roles: request.roles };
    let environment = state.environment();
    let outcome =
        match grants::create(state.store(), (environment, state.invitations()), &caller.0, new).await? {
            Outcome::Applied(created) => Outcome::Applied(CreatedOperator::shown(created, environment)),
            Outcome::Proposed(change) => Outcome::Proposed(change),
            Outcome::Suspended(change) => Outcome::Suspended(change),
        };
    Ok(answer(outcome, StatusCode::CREATED))
}

/// Every operator with its keys (never a secret).
#[utoipa::path(get, operation_id = "listOperators", path = "/operator/v1/operators", tag = "operators", security(("operator_key" = [])),
    responses(
        (status = 200, description = "The operators", body = OperatorList),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
) -> Result<Json<OperatorList>, ApiError> {
    caller.may(Action::Operators)?;
    let mut operators = Vec::new();
    for operator in state.store().operators().await? {
        let keys = state.store().operator_keys(&operator.id).await?;
        operators.push(OperatorEntry { operator, keys });
    }
    Ok(Json(OperatorList { operators }))
}

/// Disables an operator: its keys stop working at once, on every instance.
/// In `production` an admin disabled while two admins hold the platform
/// is suspended instead, until another admin approves the change or its
/// proposer completes it with `--break-glass` (docs/operations.md).
#[utoipa::path(post, operation_id = "disableOperator", path = "/operator/v1/operators/{operator_id}/disable",
    tag = "operators", security(("operator_key" = [])), request_body = Reason,
    params(("operator_id" = String, Path, description = "The operator's id")),
    responses(
        (status = 200, description = "Disabled; `warnings` names a money role left with no holder", body = Taken),
        (status = 202, description = "Suspended: the change waits for its completion", body = ChangeAnswer),
        (status = 403, description = "The caller is not an `admin`, or is the operator", body = ErrorBody),
        (status = 404, description = "No such operator", body = ErrorBody),
        (status = 409, description = "The operator is suspended already; no admin would be left", body = ErrorBody),
    ))]
pub async fn disable(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<Reason>,
) -> Result<Response, ApiError> {
    let reason = reason(&request.reason)?;
    let outcome = taking::disable(state.store(), state.environment(), &caller.0, &id, reason).await?;
    Ok(answer(outcome, StatusCode::OK))
}

/// Sets an operator's roles (not the caller's own): at once when the set
/// only removes roles, or in `sandbox`; otherwise a change another admin
/// approves.
#[utoipa::path(put, operation_id = "setOperatorRoles", path = "/operator/v1/operators/{operator_id}/roles",
    tag = "operators", security(("operator_key" = [])), request_body = RolesRequest,
    params(("operator_id" = String, Path, description = "The operator's id")),
    responses(
        (status = 200, description = "The operator with its roles; `warnings` names a money role left with no holder", body = Taken),
        (status = 202, description = "Proposed: another admin approves the change (or, an admin's `admin` role removed while two admins hold the platform, suspended)", body = ChangeAnswer),
        (status = 400, description = "No role, or no reason", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`, or is the operator", body = ErrorBody),
        (status = 404, description = "No such operator", body = ErrorBody),
        (status = 409, description = "Genesis grants no role but admins'; no admin would be left", body = ErrorBody),
    ))]
pub async fn set_roles(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<RolesRequest>,
) -> Result<Response, ApiError> {
    let reason = reason(&request.reason)?;
    let environment = state.environment();
    let outcome =
        taking::set_roles(state.store(), environment, &caller.0, &id, &request.roles, reason).await?;
    Ok(answer(outcome, StatusCode::OK))
}

/// Enables a disabled operator: in `sandbox` at once, otherwise a change
/// another admin approves.
#[utoipa::path(post, operation_id = "enableOperator", path = "/operator/v1/operators/{operator_id}/enable",
    tag = "operators", security(("operator_key" = [])), request_body = Reason,
    params(("operator_id" = String, Path, description = "The operator's id")),
    responses(
        (status = 200, description = "Enabled", body = Operator),
        (status = 202, description = "Proposed: another admin approves the change", body = ChangeAnswer),
        (status = 400, description = "No reason, or the operator is enabled", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`, or is the operator", body = ErrorBody),
        (status = 404, description = "No such operator", body = ErrorBody),
    ))]
pub async fn enable(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<Reason>,
) -> Result<Response, ApiError> {
    let reason = reason(&request.reason)?;
    let outcome = grants::enable(state.store(), state.environment(), &caller.0, &id, reason).await?;
    Ok(answer(outcome, StatusCode::OK))
}

/// Mails a fresh enrol link to an operator who has not enrolled, at the
/// recorded address (its earlier links stop working).
#[utoipa::path(post, operation_id = "inviteOperator", path = "/operator/v1/operators/{operator_id}/invitation",
    tag = "operators", security(("operator_key" = [])),
    params(("operator_id" = String, Path, description = "The operator's id")),
    responses(
        (status = 200, description = "Mailed (or, in `sandbox` without mail, shown)", body = InvitationAnswer),
        (status = 400, description = "The operator has enrolled or is disabled", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 404, description = "No such operator", body = ErrorBody),
        (status = 503, description = "Production, and no mail is configured", body = ErrorBody),
    ))]
pub async fn invite(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
) -> Result<Json<InvitationAnswer>, ApiError> {
    let setting = (state.environment(), state.invitations());
    let answer = match manage::invite(state.store(), setting, &caller.0, &id).await? {
        manage::Invitation::Sent { to } => {
            InvitationAnswer { invitation: Some(format!("sent to {to}")), enrol_path: None }
        }
        manage::Invitation::Shown { enrol_path } => {
            InvitationAnswer { invitation: None, enrol_path: Some(enrol_path) }
        }
    };
    Ok(Json(answer))
}

/// Creates a key for an operator in `sandbox`; its token is shown once. In
/// `production` an operator's keys are the operator's own to make (`403`).
#[utoipa::path(post, operation_id = "createOperatorKey", path = "/operator/v1/operators/{operator_id}/keys",
    tag = "operators", security(("operator_key" = [])),
    params(("operator_id" = String, Path, description = "The operator's id")),
    responses(
        (status = 201, description = "Created; the token is shown once", body = NewKey),
        (status = 400, description = "The operator is disabled", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`, or the service runs in `production`", body = ErrorBody),
        (status = 404, description = "No such operator", body = ErrorBody),
    ))]
pub async fn create_key(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<NewKey>), ApiError> {
    let key = crate::operators::keys::create_key(state.store(), state.environment(), &caller.0, &id).await?;
    Ok((StatusCode::CREATED, Json(key.into())))
}

/// Revokes an operator key at once, on every instance.
#[utoipa::path(post, operation_id = "revokeOperatorKey", path = "/operator/v1/operator-keys/{key_id}/revoke",
    tag = "operators", security(("operator_key" = [])),
    params(("key_id" = String, Path, description = "The key's id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 404, description = "No live key has this id", body = ErrorBody),
    ))]
pub async fn revoke_key(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    crate::operators::keys::revoke_key(state.store(), &caller.0, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_key_nor_enrol_link() {
        let secret = crate::api_key::generate_with(crate::api_key::OPERATOR_PREFIX);
        let token = secret.token.clone();
        let operator = Operator {
            id: "op_1".into(),
            name: "Tom".into(),
            email: "tom@example.com".into(),
            roles: vec![Role::Treasury],
            disabled_at: None,
            created_at: chrono::DateTime::UNIX_EPOCH,
        };
        let created = CreatedOperator {
            operator,
            enrol_path: Some("/console/enrol/the-link-token".into()),
            key: Some(secret.into()),
            invitation: None,
        };
        let invited = super::super::users::InvitedUser {
            user: super::super::users::ConsoleUser {
                id: "u1".into(),
                email: "ada@acme.example".into(),
                organization_id: "acme".into(),
                role: "admin".into(),
            },
            enrol_path: "/console/enrol/the-link-token".into(),
        };
        for shown in
            [format!("{created:?}"), format!("{:?}", created.key.as_ref().unwrap()), format!("{invited:?}")]
        {
            assert!(!shown.contains("the-link-token") && !shown.contains(&token[4..]), "{shown}");
        }
    }
}
