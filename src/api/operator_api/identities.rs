//! `/operator/v1/organizations/{organization_id}/identities`: a
//! `compliance` operator's decisions on an identity (the lifecycle and the
//! fiat entitlement), and the import of an identity onboarded elsewhere.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::Deserialize;
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    identity::{
        Identity, Status, Type,
        decide::{self, Decision, Outcome, trail_actor},
    },
    operators::{Action, manage::actor},
    store::NewIdentity,
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    pub decision: Decision,
    /// Why: recorded, and sent to the client as `status_reason`.
    pub reason: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Type,
    /// A label (default: the id); personal data, stored sealed.
    pub label: Option<String>,
    /// `ACTIVE` or `SUSPENDED` (a compliance decision), or
    /// `PENDING_ONBOARDING` (then at `CREATED`).
    pub status: Status,
    pub reason: String,
}

/// Takes a compliance decision on an identity: a lifecycle event (approve,
/// reject, suspend, reinstate, terminate, an RFI raised or fulfilled) or
/// the fiat entitlement; recorded in the identity's trail and the audit log.
#[utoipa::path(post, operation_id = "decideIdentity",
    path = "/operator/v1/organizations/{organization_id}/identities/{identity_id}/decisions",
    tag = "operators", security(("operator_key" = [])), request_body = DecisionRequest,
    params(("organization_id" = String, Path), ("identity_id" = String, Path)),
    responses(
        (status = 200, description = "What the decision changed", body = Outcome),
        (status = 400, description = "An unknown decision, no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `compliance`", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
        (status = 409, description = "The identity's state refuses the decision", body = ErrorBody),
    ))]
pub async fn decide(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path((organization, identity_id)): Path<(String, String)>,
    Body(request): Body<DecisionRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let needs = match request.decision {
        Decision::FiatEnable | Decision::FiatDisable => Action::FiatEntitlement,
        _ => Action::IdentityDecision,
    };
    caller.may(needs)?;
    let by = actor(&caller.0);
    let identity = (organization.as_str(), identity_id.as_str());
    let decided =
        decide::decide(state.store(), state.chains(), identity, request.decision, &by, &request.reason)
            .await?;
    Ok(Json(Outcome::new(&identity_id, request.decision, &decided)))
}

/// Registers an identity onboarded outside this service in the status it
/// has there; an `ACTIVE` or `SUSPENDED` one is a compliance decision.
#[utoipa::path(post, operation_id = "importIdentity",
    path = "/operator/v1/organizations/{organization_id}/identities",
    tag = "operators", security(("operator_key" = [])), request_body = ImportRequest,
    params(("organization_id" = String, Path)),
    responses(
        (status = 201, description = "The identity", body = Identity),
        (status = 400, description = "A status other than ACTIVE, SUSPENDED or PENDING_ONBOARDING; no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `compliance`", body = ErrorBody),
        (status = 404, description = "No such organization", body = ErrorBody),
        (status = 409, description = "The identity exists", body = ErrorBody),
    ))]
pub async fn import(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(organization): Path<String>,
    Body(request): Body<ImportRequest>,
) -> Result<(StatusCode, Json<Identity>), ApiError> {
    caller.may(Action::IdentityDecision)?;
    let state_now =
        decide::imported_state(request.status).map_err(|e| ApiError::invalid(format!("status: {e}")))?;
    let by = actor(&caller.0);
    let new = NewIdentity {
        organization: organization.clone(),
        label: request.label.unwrap_or_else(|| request.id.clone()).into(),
        id: request.id,
        request_id: None,
        kind: request.kind,
        state: state_now,
        actor: trail_actor(&by),
    };
    decide::import(state.store(), &new, &by, &request.reason).await?;
    Ok((StatusCode::CREATED, Json(state.store().identity(&organization, &new.id).await?)))
}
