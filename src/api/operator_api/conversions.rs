//! `/operator/v1/conversions/{id}/payout`: a `treasury` operator's answer to
//! an off-ramp's payout, and another's confirmation of one that sends the
//! stablecoin back.

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
    bank::Answer,
    conversions::answers::{self, AnswerError, Answered},
    environment::Environment,
    operators::{Action, manage::actor},
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayoutAnswer {
    /// `PAID`, `RETURNED` or `REFUSED`.
    pub outcome: String,
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PayoutAnswered {
    pub outcome: String,
    /// `APPLIED`, or `AWAITING_CONFIRMATION` by a second operator.
    pub result: &'static str,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Confirmation {
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Confirmed {
    pub outcome: String,
}

impl From<AnswerError> for ApiError {
    fn from(error: AnswerError) -> Self {
        match error {
            refusal @ AnswerError::FourEyes { .. } => {
                ApiError::coded(StatusCode::FORBIDDEN, ErrorCode::Forbidden, refusal.to_string())
            }
            AnswerError::Store(error) => error.into(),
        }
    }
}

/// Records the bank's answer to an off-ramp's payout handed to it. `PAID`
/// applies at once; outside `sandbox`, `RETURNED` and `REFUSED` wait for
/// another operator's confirmation.
#[utoipa::path(post, operation_id = "answerPayout", path = "/operator/v1/conversions/{conversion_id}/payout",
    tag = "operators", security(("operator_key" = [])), request_body = PayoutAnswer,
    params(("conversion_id" = String, Path, description = "The off-ramp's id")),
    responses(
        (status = 200, description = "Applied, or awaiting confirmation", body = PayoutAnswered),
        (status = 400, description = "An unknown outcome, no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 409, description = "No payout waits for an answer, or one awaits confirmation", body = ErrorBody),
    ))]
pub async fn answer(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<PayoutAnswer>,
) -> Result<Json<PayoutAnswered>, ApiError> {
    caller.may(Action::Payout)?;
    let outcome: Answer = request
        .outcome
        .to_uppercase()
        .parse()
        .map_err(|e: String| ApiError::invalid(format!("outcome: {e}")))?;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: a reason is required"));
    }
    let alone = state.environment() == Environment::Sandbox;
    let by = actor(&caller.0);
    let result = match answers::answer(state.store(), &id, (outcome, &request.reason), &by, alone).await? {
        Answered::Applied(_) => "APPLIED",
        Answered::AwaitingConfirmation(_) => "AWAITING_CONFIRMATION",
    };
    Ok(Json(PayoutAnswered { outcome: outcome.as_str().to_string(), result }))
}

/// Confirms another operator's `RETURNED` or `REFUSED` answer: it applies,
/// once, and the stablecoin goes back to the account.
#[utoipa::path(post, operation_id = "confirmPayout",
    path = "/operator/v1/conversions/{conversion_id}/payout/confirm",
    tag = "operators", security(("operator_key" = [])), request_body = Confirmation,
    params(("conversion_id" = String, Path, description = "The off-ramp's id")),
    responses(
        (status = 200, description = "Confirmed and applied", body = Confirmed),
        (status = 403, description = "Not `treasury`, or the answering operator (four eyes)", body = ErrorBody),
        (status = 404, description = "No answer awaits confirmation", body = ErrorBody),
    ))]
pub async fn confirm(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<Confirmation>,
) -> Result<Json<Confirmed>, ApiError> {
    caller.may(Action::Payout)?;
    let by = actor(&caller.0);
    let outcome = answers::confirm(state.store(), &id, &by, request.reason.as_deref()).await?;
    Ok(Json(Confirmed { outcome: outcome.as_str().to_string() }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    pub reason: String,
}

/// Sends an off-ramp's refund again at the chain's next step, without
/// waiting out its backoff: refused unless the last refund provably can
/// never land.
#[utoipa::path(post, operation_id = "retryRefund", path = "/operator/v1/conversions/{conversion_id}/refund/retry",
    tag = "operators", security(("operator_key" = [])), request_body = RetryRequest,
    params(("conversion_id" = String, Path, description = "The off-ramp's id")),
    responses(
        (status = 204, description = "The refund is sent again at the chain's next step"),
        (status = 400, description = "No reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 404, description = "No such off-ramp", body = ErrorBody),
        (status = 409, description = "No refund is owed, or the last one may still land", body = ErrorBody),
    ))]
pub async fn retry_refund(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<RetryRequest>,
) -> Result<StatusCode, ApiError> {
    caller.may(Action::Refund)?;
    let by = actor(&caller.0);
    crate::conversions::off_ramp::refunds::retry(state.store(), &id, &by, &request.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}
