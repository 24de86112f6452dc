//! `/operator/v1/conversions/wires` and `/operator/v1/virtual-accounts`: a
//! `treasury` operator records a wire that arrived at a virtual account
//! and the bank's answers to virtual accounts asked for.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::Deserialize;
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::{
    amount::Cents,
    api::{ApiError, ApiState, Body, ErrorBody},
    conversions::{Conversion, VirtualAccount, on_ramp, virtual_account},
    issuance::wires,
    operators::{Action, manage::actor},
    store::NewVirtualWire,
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VirtualWireRequest {
    pub virtual_account_id: String,
    /// Dollars, with at most 2 decimals (`"250.00"`).
    pub amount: String,
    /// The bank's reference of the wire: unique; the same again starts nothing twice.
    pub reference: String,
    pub reason: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    /// The account number the bank gave it: digits, unique.
    pub account_number: String,
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefuseRequest {
    /// The bank's reason: the virtual account's `failure_reason`.
    pub reason: String,
}

/// Records a wire that arrived at a virtual account: it starts an `ON_RAMP`
/// conversion (the same reference again answers the same conversion).
#[utoipa::path(post, operation_id = "recordVirtualAccountWire", path = "/operator/v1/conversions/wires",
    tag = "operators", security(("operator_key" = [])), request_body = VirtualWireRequest,
    responses(
        (status = 201, description = "The conversion the wire started", body = Conversion),
        (status = 400, description = "A malformed amount, no reason, a virtual account that takes no wires", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 404, description = "No such virtual account", body = ErrorBody),
        (status = 409, description = "The reference names another wire", body = ErrorBody),
    ))]
pub async fn record(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<VirtualWireRequest>,
) -> Result<(StatusCode, Json<Conversion>), ApiError> {
    caller.may(Action::Wire)?;
    let cents = Cents::parse(&request.amount).map_err(|e| ApiError::invalid(format!("amount: {e}")))?.0;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: a reason is required"));
    }
    let recorder = actor(&caller.0);
    let new = NewVirtualWire {
        organization: None,
        virtual_account_id: &request.virtual_account_id,
        wire: wires::by_operator("", cents, &request.reference, &recorder, &request.reason),
    };
    let conversion = on_ramp::record_wire(state.store(), &new).await?.into_inner();
    Ok((StatusCode::CREATED, Json(conversion)))
}

/// The bank opened a `PENDING` virtual account under this account number.
#[utoipa::path(post, operation_id = "openVirtualAccount", path = "/operator/v1/virtual-accounts/{virtual_account_id}/open",
    tag = "operators", security(("operator_key" = [])), request_body = OpenRequest,
    params(("virtual_account_id" = String, Path, description = "The virtual account's id")),
    responses(
        (status = 200, description = "The virtual account, ACTIVE", body = VirtualAccount),
        (status = 400, description = "An account number that is not digits", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 404, description = "No such virtual account", body = ErrorBody),
        (status = 409, description = "Answered otherwise already, or the number is another's", body = ErrorBody),
    ))]
pub async fn open(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<OpenRequest>,
) -> Result<Json<VirtualAccount>, ApiError> {
    caller.may(Action::VirtualAccount)?;
    let by = actor(&caller.0);
    let opened = (id.as_str(), request.account_number.as_str());
    Ok(Json(
        virtual_account::open(state.store(), state.environment(), opened, &by, request.reason.as_deref())
            .await?,
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequest {
    /// The number the confirming operator read from the bank: when given,
    /// it must be the one recorded (`409` otherwise).
    pub account_number: Option<String>,
    pub reason: Option<String>,
}

/// A second treasury operator confirms the account number another
/// recorded (`production`): the virtual account opens under it.
#[utoipa::path(post, operation_id = "confirmVirtualAccount", path = "/operator/v1/virtual-accounts/{virtual_account_id}/open/confirm",
    tag = "operators", security(("operator_key" = [])), request_body = ConfirmRequest,
    params(("virtual_account_id" = String, Path, description = "The virtual account's id")),
    responses(
        (status = 200, description = "The virtual account, ACTIVE", body = VirtualAccount),
        (status = 403, description = "The caller is not `treasury`, or recorded the number", body = ErrorBody),
        (status = 404, description = "No such virtual account", body = ErrorBody),
        (status = 409, description = "No number waits for confirmation, or another number was recorded", body = ErrorBody),
    ))]
pub async fn confirm(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<ConfirmRequest>,
) -> Result<Json<VirtualAccount>, ApiError> {
    caller.may(Action::VirtualAccount)?;
    let by = actor(&caller.0);
    let confirming = (id.as_str(), request.account_number.as_deref());
    let confirmed = virtual_account::confirm(state.store(), confirming, &by, request.reason.as_deref()).await;
    Ok(Json(confirmed.map_err(|error| match error {
        refusal @ virtual_account::OpenError::FourEyes { .. } => {
            ApiError::coded(StatusCode::FORBIDDEN, crate::api::ErrorCode::Forbidden, refusal.to_string())
        }
        virtual_account::OpenError::Store(error) => error.into(),
    })?))
}

/// The bank refused a `PENDING` virtual account: the reason is its
/// `failure_reason`.
#[utoipa::path(post, operation_id = "refuseVirtualAccount", path = "/operator/v1/virtual-accounts/{virtual_account_id}/refuse",
    tag = "operators", security(("operator_key" = [])), request_body = RefuseRequest,
    params(("virtual_account_id" = String, Path, description = "The virtual account's id")),
    responses(
        (status = 200, description = "The virtual account, FAILED", body = VirtualAccount),
        (status = 400, description = "No reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 404, description = "No such virtual account", body = ErrorBody),
        (status = 409, description = "Answered otherwise already", body = ErrorBody),
    ))]
pub async fn refuse(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<RefuseRequest>,
) -> Result<Json<VirtualAccount>, ApiError> {
    caller.may(Action::VirtualAccount)?;
    let by = actor(&caller.0);
    let answer = Err(request.reason.as_str());
    Ok(Json(virtual_account::answer(state.store(), &id, answer, &by, None).await?))
}
