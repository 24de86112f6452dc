//! `/operator/v1/reconciliation/repairs`: a treasury operator asks the
//! service to record the credits its reconciliation finds missed (at once
//! up to `--repair-second-operator-above`, otherwise once another treasury
//! operator approves), and the repairs asked for, listed.

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody, ErrorCode},
    chain::Chain,
    config::ChainConfig,
    evm::rpc::EvmRpc,
    operators::{Action, manage::actor},
    reconcile::{
        Repair, RepairScope, RepairStatus,
        repairs::{self, RepairError},
    },
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepairRequest {
    /// The chain to reconcile (`ETHEREUM_MAINNET`, …): EVM chains.
    pub chain: String,
    /// Only this account's addresses.
    pub account_id: Option<String>,
    /// Only this address.
    pub address: Option<String>,
    /// Only this asset (its symbol in the chain file).
    pub asset: Option<String>,
    pub reason: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepairDecision {
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RepairsQuery {
    /// One chain's only.
    pub chain: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RepairList {
    pub data: Vec<Repair>,
}

impl From<RepairError> for ApiError {
    fn from(error: RepairError) -> Self {
        match error {
            refusal @ RepairError::FourEyes { .. } => {
                ApiError::coded(StatusCode::FORBIDDEN, ErrorCode::Forbidden, refusal.to_string())
            }
            RepairError::Store(error) => error.into(),
            RepairError::Reconcile(crate::reconcile::ReconcileError::Store(error)) => error.into(),
            RepairError::Reconcile(crate::reconcile::ReconcileError::Refused(message)) => {
                ApiError::invalid(message)
            }
            RepairError::Reconcile(not_yet @ crate::reconcile::ReconcileError::NotIndexed(_)) => {
                ApiError::coded(StatusCode::CONFLICT, ErrorCode::Conflict, not_yet.to_string())
            }
            // What the node or its provider answered goes to the log only.
            other => {
                tracing::warn!(error = %other, "a repair's reconciliation failed");
                ApiError::coded(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::ChainUnavailable,
                    "the reconciliation could not read the chain now; nothing was recorded, try again later",
                )
            }
        }
    }
}

/// The chain file of `text`, an EVM chain this service knows.
fn evm_chain<'a>(state: &'a ApiState, text: &str) -> Result<&'a ChainConfig, ApiError> {
    let chain: Chain =
        text.parse().map_err(|_| ApiError::invalid(format!("chain: no chain is named {text:?}")))?;
    let config = state
        .chains()
        .get(chain)
        .map_err(|_| ApiError::invalid(format!("chain: {chain} has no chain file here")))?;
    if !crate::family::rules::block_ledger(config.family()) {
        return Err(ApiError::invalid(format!("chain: {chain} is not reconciled yet: EVM chains only")));
    }
    Ok(config)
}

fn rpc(config: &ChainConfig) -> EvmRpc {
    EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1)
}

/// Reconciles the chain (narrowed as asked) and keeps a repair of the
/// missed credits it finds.
#[utoipa::path(post, operation_id = "requestRepair", path = "/operator/v1/reconciliation/repairs",
    tag = "operators", security(("operator_key" = [])), request_body = RepairRequest,
    responses(
        (status = 201, description = "Applied: the credits recorded as deposits", body = Repair),
        (status = 202, description = "Worth more than the threshold: awaits a second treasury operator", body = Repair),
        (status = 400, description = "An unknown or non-EVM chain, no reason", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 409, description = "The reconciliation finds no missed credit to repair", body = ErrorBody),
        (status = 503, description = "A node did not answer the reconciliation's reads", body = ErrorBody),
    ))]
pub async fn request(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Body(request): Body<RepairRequest>,
) -> Result<(StatusCode, Json<Repair>), ApiError> {
    caller.may(Action::Repair)?;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: a reason is required"));
    }
    let config = evm_chain(&state, &request.chain)?;
    let scope =
        RepairScope { account_id: request.account_id, address: request.address, asset: request.asset };
    let by = actor(&caller.0);
    let ask = repairs::Request {
        scope: &scope,
        by: &by,
        reason: request.reason.trim(),
        second_operator_above: state.repair_above_usd_micros(),
    };
    let repair = repairs::request(state.store(), &rpc(config), config, &ask).await?;
    let status = match repair.status {
        RepairStatus::Applied => StatusCode::CREATED,
        _ => StatusCode::ACCEPTED,
    };
    Ok((status, Json(repair)))
}

/// The repairs asked for, newest first.
#[utoipa::path(get, operation_id = "listRepairs", path = "/operator/v1/reconciliation/repairs",
    tag = "operators", security(("operator_key" = [])), params(RepairsQuery),
    responses(
        (status = 200, description = "The repairs, newest first", body = RepairList),
        (status = 403, description = "Neither compliance, treasury nor admin", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Query(query): Query<RepairsQuery>,
) -> Result<Json<RepairList>, ApiError> {
    caller.may(Action::Reconciliation)?;
    Ok(Json(RepairList { data: state.store().reconcile_repairs(query.chain.as_deref()).await? }))
}

/// Approves a repair: the service reconciles again and records the
/// credits both reconciliations found. Another treasury operator than
/// the one who asked.
#[utoipa::path(post, operation_id = "approveRepair", path = "/operator/v1/reconciliation/repairs/{id}/approve",
    tag = "operators", security(("operator_key" = [])), request_body = RepairDecision,
    params(("id" = String, Path, description = "The repair's id")),
    responses(
        (status = 200, description = "The repair, applied", body = Repair),
        (status = 403, description = "Not `treasury`, or the repair's requester (four eyes)", body = ErrorBody),
        (status = 404, description = "No such repair", body = ErrorBody),
        (status = 409, description = "The repair does not await approval", body = ErrorBody),
        (status = 503, description = "A node did not answer the reconciliation's reads", body = ErrorBody),
    ))]
pub async fn approve(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<RepairDecision>,
) -> Result<Json<Repair>, ApiError> {
    decide(&state, &caller, &id, true, request.reason.as_deref()).await
}

/// Refuses a repair: nothing is recorded.
#[utoipa::path(post, operation_id = "refuseRepair", path = "/operator/v1/reconciliation/repairs/{id}/refuse",
    tag = "operators", security(("operator_key" = [])), request_body = RepairDecision,
    params(("id" = String, Path, description = "The repair's id")),
    responses(
        (status = 200, description = "The repair, refused", body = Repair),
        (status = 403, description = "Not `treasury`, or the repair's requester (four eyes)", body = ErrorBody),
        (status = 404, description = "No such repair", body = ErrorBody),
        (status = 409, description = "The repair does not await approval", body = ErrorBody),
    ))]
pub async fn refuse(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Path(id): Path<String>,
    Body(request): Body<RepairDecision>,
) -> Result<Json<Repair>, ApiError> {
    decide(&state, &caller, &id, false, request.reason.as_deref()).await
}

async fn decide(
    state: &ApiState,
    caller: &OperatorCaller,
    id: &str,
    approve: bool,
    reason: Option<&str>,
) -> Result<Json<Repair>, ApiError> {
    caller.may(Action::Repair)?;
    let repair = state.store().reconcile_repair(id).await?;
    let config = evm_chain(state, &repair.chain)?;
    let by = actor(&caller.0);
    Ok(Json(repairs::decide(state.store(), &rpc(config), config, (id, &by), approve, reason).await?))
}
