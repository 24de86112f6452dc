//! `/operator/v1/issuance`: a wire recorded by a `treasury` operator, its mint approved or refused by
//! another one, and the dollars of a failed mint returned.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::Deserialize;
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::api::ErrorCode;
use crate::{
    amount::Cents,
    api::{ApiError, ApiState, Body, ErrorBody},
    issuance::{
        Mint, returns,
        wires::{self, DecideError},
    },
    operators::{Action, manage::actor},
    store::FiatReturn,
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WireRequest {
    /// The memo the wire quotes: a mint instruction's `memo_id`.
    pub memo_id: String,
    /// Dollars, with at most 2 decimals (`"250.00"`).
    pub amount: String,
    /// The bank's reference of the wire: unique; the same again mints nothing twice.
    pub reference: String,
    pub reason: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    pub reason: Option<String>,
}

impl From<DecideError> for ApiError {
    fn from(error: DecideError) -> Self {
        match error {
            refusal @ DecideError::FourEyes { .. } => {
                ApiError::coded(StatusCode::FORBIDDEN, ErrorCode::Forbidden, refusal.to_string())
            }
            DecideError::Store(error) => error.into(),
        }
    }
}

/// Records a wire that arrived quoting a mint instruction's memo; its mint
/// settles as the bank's answer says, then waits for a second operator in
/// `production`.
#[utoipa::path(post, operation_id = "recordWire", path = "/operator/v1/issuance/wires", tag = "operators",
    security(("operator_key" = [])), request_body = WireRequest,
    responses(
        (status = 201, description = "The wire's mint", body = Mint),
        (status = 400, description = "A malformed amount, no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 404, description = "No mint instruction has this memo", body = ErrorBody),
        (status = 409, description = "The reference names another wire", body = ErrorBody),
    ))]
pub async fn record(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<WireRequest>,
) -> Result<(StatusCode, Json<Mint>), ApiError> {
    caller.may(Action::Wire)?;
    let cents = Cents::parse(&request.amount).map_err(|e| ApiError::invalid(format!("amount: {e}")))?.0;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: a reason is required"));
    }
    let recorder = actor(&caller.0);
    let wire = wires::by_operator(&request.memo_id, cents, &request.reference, &recorder, &request.reason);
    let mint = wires::arrive(state.store(), &wire, &state.mint_approval()).await?.into_inner();
    Ok((StatusCode::CREATED, Json(mint)))
}

/// Approves the mint of a recorded wire: another `treasury` operator than
/// its recorder.
#[utoipa::path(post, operation_id = "approveWire", path = "/operator/v1/issuance/wires/{reference}/approve",
    tag = "operators", security(("operator_key" = [])), request_body = DecisionRequest,
    params(("reference" = String, Path, description = "The wire's reference, or its mint's id")),
    responses(
        (status = 200, description = "The mint, approved", body = Mint),
        (status = 403, description = "Not `treasury`, or the wire's recorder (four eyes)", body = ErrorBody),
        (status = 404, description = "No such wire", body = ErrorBody),
        (status = 409, description = "The mint does not await approval", body = ErrorBody),
    ))]
pub async fn approve(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(reference): Path<String>,
    Body(request): Body<DecisionRequest>,
) -> Result<Json<Mint>, ApiError> {
    decide(&state, &caller, &reference, true, request.reason.as_deref()).await
}

/// Refuses the mint of a recorded wire: it fails and its dollars are owed back.
#[utoipa::path(post, operation_id = "refuseWire", path = "/operator/v1/issuance/wires/{reference}/refuse",
    tag = "operators", security(("operator_key" = [])), request_body = DecisionRequest,
    params(("reference" = String, Path, description = "The wire's reference, or its mint's id")),
    responses(
        (status = 200, description = "The mint, refused", body = Mint),
        (status = 403, description = "Not `treasury`, or the wire's recorder (four eyes)", body = ErrorBody),
        (status = 404, description = "No such wire", body = ErrorBody),
        (status = 409, description = "The mint does not await approval", body = ErrorBody),
    ))]
pub async fn refuse(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(reference): Path<String>,
    Body(request): Body<DecisionRequest>,
) -> Result<Json<Mint>, ApiError> {
    decide(&state, &caller, &reference, false, request.reason.as_deref()).await
}

async fn decide(
    state: &ApiState,
    caller: &OperatorCaller,
    reference: &str,
    approve: bool,
    reason: Option<&str>,
) -> Result<Json<Mint>, ApiError> {
    caller.may(Action::Wire)?;
    let by = actor(&caller.0);
    Ok(Json(wires::decide(state.store(), reference, &by, approve, reason).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReturnRequest {
    /// The bank's reference of the return wire.
    pub reference: String,
    pub reason: String,
}

/// Records that the dollars of a failed mint were sent back by a return
/// wire; the same reference again changes nothing.
#[utoipa::path(post, operation_id = "completeReturn", path = "/operator/v1/issuance/returns/{mint_id}/complete",
    tag = "operators", security(("operator_key" = [])), request_body = ReturnRequest,
    params(("mint_id" = String, Path, description = "The failed mint's id")),
    responses(
        (status = 200, description = "The return, completed", body = FiatReturn),
        (status = 400, description = "No reference or reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 404, description = "No dollars of this mint are owed back", body = ErrorBody),
        (status = 409, description = "Returned already under another reference, or the reference returned another mint", body = ErrorBody),
    ))]
pub async fn complete_return(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(mint_id): Path<String>,
    Body(request): Body<ReturnRequest>,
) -> Result<Json<FiatReturn>, ApiError> {
    caller.may(Action::Wire)?;
    let by = actor(&caller.0);
    let done = returns::complete(state.store(), &mint_id, &request.reference, &by, &request.reason).await?;
    Ok(Json(done))
}
