//! `/operator/v1/changes`: the changes of operators that wait for a second
//! admin (`production`), listed, approved and refused by an `admin` other
//! than the proposer and the change's target.

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    OperatorCaller,
    operators::{CreatedOperator, Reason},
    users::OrganizationAnswer,
};
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    operators::{Action, Change, Operator, changes},
};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ChangesQuery {
    /// `PENDING` for the pending ones only; all by default.
    pub status: Option<String>,
    /// At most this many, newest first (default 100, at most 500).
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeList {
    pub changes: Vec<Change>,
}

/// A decided change, and for an approved one what it made: the operator
/// (a new one as [`CreatedOperator`], without a secret in `production`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Decided {
    pub change: Change,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<CreatedOperator>,
    /// An `organization.contact` change: the organization as set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization: Option<OrganizationAnswer>,
    /// An `organization.first_admin` change: `sent to <email>`, the
    /// organization's contact address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invitation: Option<String>,
}

impl Decided {
    fn of(change: Change) -> Self {
        Decided { change, operator: None, created: None, organization: None, invitation: None }
    }
}

/// The changes of operators, newest first; pending ones past their seven
/// days are expired first.
#[utoipa::path(get, operation_id = "listOperatorChanges", path = "/operator/v1/changes", tag = "operators",
    security(("operator_key" = [])), params(ChangesQuery),
    responses(
        (status = 200, description = "The changes", body = ChangeList),
        (status = 400, description = "An unknown status", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Query(query): Query<ChangesQuery>,
) -> Result<Json<ChangeList>, ApiError> {
    caller.may(Action::Operators)?;
    let pending_only = match query.status.as_deref() {
        None => false,
        Some("PENDING") => true,
        Some(other) => return Err(ApiError::invalid(format!("status: {other:?} is not PENDING"))),
    };
    let limit = query.limit.unwrap_or(100).clamp(1, 500);
    Ok(Json(ChangeList { changes: changes::list(state.store(), pending_only, limit).await? }))
}

/// Approves a pending change and applies it at once.
#[utoipa::path(post, operation_id = "approveOperatorChange", path = "/operator/v1/changes/{change_id}/approve",
    tag = "operators", security(("operator_key" = [])),
    params(("change_id" = String, Path, description = "The change's id")),
    responses(
        (status = 200, description = "Approved and applied", body = Decided),
        (status = 403, description = "The caller is not an `admin`, proposed the change or is its target", body = ErrorBody),
        (status = 404, description = "No such change", body = ErrorBody),
        (status = 409, description = "The change is decided or expired; applying it conflicts", body = ErrorBody),
    ))]
pub async fn approve(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
) -> Result<Json<Decided>, ApiError> {
    let environment = state.environment();
    let setting = (environment, state.invitations());
    let (change, applied) = changes::approve(state.store(), setting, &caller.0, &id).await?;
    let decided = match applied {
        changes::Applied::Created(created) => {
            Decided { created: Some(CreatedOperator::shown(created, environment)), ..Decided::of(change) }
        }
        changes::Applied::Changed(operator) => Decided { operator: Some(operator), ..Decided::of(change) },
        changes::Applied::Organization(organization) => {
            Decided { organization: Some(organization.into()), ..Decided::of(change) }
        }
        changes::Applied::Invited(to) => {
            Decided { invitation: Some(format!("sent to {to}")), ..Decided::of(change) }
        }
    };
    Ok(Json(decided))
}

/// Refuses a pending change, with a reason.
#[utoipa::path(post, operation_id = "refuseOperatorChange", path = "/operator/v1/changes/{change_id}/refuse",
    tag = "operators", security(("operator_key" = [])), request_body = Reason,
    params(("change_id" = String, Path, description = "The change's id")),
    responses(
        (status = 200, description = "Refused", body = Decided),
        (status = 400, description = "No reason", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`, proposed the change or is its target", body = ErrorBody),
        (status = 404, description = "No such change", body = ErrorBody),
        (status = 409, description = "The change is decided or expired", body = ErrorBody),
    ))]
pub async fn refuse(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<Reason>,
) -> Result<Json<Decided>, ApiError> {
    let reason = request.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::invalid("reason: a reason is required"));
    }
    let change = changes::refuse(state.store(), &caller.0, &id, reason).await?;
    Ok(Json(Decided::of(change)))
}
