//! `POST /operator/v1/bank/imports`: a `treasury` operator hands the
//! service a bank's camt.054 file, and each credit goes to the wing it
//! belongs to (see [`crate::bank_import`]). The older
//! `/operator/v1/issuance/wires/import` and
//! `/operator/v1/conversions/wires/import` are the same door.

use axum::{Extension, Json, extract::State};
use serde::Deserialize;
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    bank::camt054_credits,
    bank_import::{self, Accounts, BankImport},
    issuance::wires::Reporter,
    operators::{Action, manage::actor},
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BankImportRequest {
    /// A bank's ISO 20022 camt.054 credit notification, the XML document.
    pub camt054: String,
    pub reason: String,
}

/// Applies each booked credit of a bank's camt.054 credit notification in
/// the wing it belongs to: a mint instruction's memo mints, a virtual
/// account's deposit message starts an on-ramp. A credit whose bank entry
/// reference was applied before is `already_applied` (nothing starts
/// twice); the rest are `unmatched`, each with why.
#[utoipa::path(post, operation_id = "importBankFile", path = "/operator/v1/bank/imports", tag = "operators",
    security(("operator_key" = [])), request_body = BankImportRequest,
    responses(
        (status = 200, description = "What was applied, what was applied before, and what was left out", body = BankImport),
        (status = 400, description = "Not a camt.054 document; no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
    ))]
pub async fn import(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<BankImportRequest>,
) -> Result<Json<BankImport>, ApiError> {
    apply(&state, &caller, &request).await
}

/// The same door as `POST /operator/v1/bank/imports`, under its older
/// name.
#[utoipa::path(post, operation_id = "importWires", path = "/operator/v1/issuance/wires/import", tag = "operators",
    security(("operator_key" = [])), request_body = BankImportRequest,
    responses(
        (status = 200, description = "As `POST /operator/v1/bank/imports`", body = BankImport),
        (status = 400, description = "Not a camt.054 document; no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
    ))]
pub async fn import_wires(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<BankImportRequest>,
) -> Result<Json<BankImport>, ApiError> {
    apply(&state, &caller, &request).await
}

/// The same door as `POST /operator/v1/bank/imports`, under its older
/// name.
#[utoipa::path(post, operation_id = "importVirtualAccountWires", path = "/operator/v1/conversions/wires/import",
    tag = "operators", security(("operator_key" = [])), request_body = BankImportRequest,
    responses(
        (status = 200, description = "As `POST /operator/v1/bank/imports`", body = BankImport),
        (status = 400, description = "Not a camt.054 document; no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
    ))]
pub async fn import_virtual_account_wires(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<BankImportRequest>,
) -> Result<Json<BankImport>, ApiError> {
    apply(&state, &caller, &request).await
}

async fn apply(
    state: &ApiState,
    caller: &OperatorCaller,
    request: &BankImportRequest,
) -> Result<Json<BankImport>, ApiError> {
    caller.may(Action::Wire)?;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: a reason is required"));
    }
    let credits = camt054_credits(request.camt054.as_bytes())
        .map_err(|e| ApiError::invalid(format!("camt054: {e}")))?;
    let by = actor(&caller.0);
    let reporter = Reporter { by: &by, reason: &request.reason };
    let accounts = Accounts::of(state.bank().receiving_account().as_ref());
    let done =
        bank_import::import(state.store(), &credits, &accounts, reporter, &state.mint_approval()).await?;
    Ok(Json(done))
}
