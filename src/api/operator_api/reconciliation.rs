//! `GET /operator/v1/reconciliation`: each EVM chain's last background
//! reconciliation: when, at which height, how many balances differ from
//! the ledger, and each differing line.

use axum::{
    Extension, Json,
    extract::{Query, State},
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, ErrorBody},
    chain::Chain,
    operators::Action,
    reconcile::Run,
};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReconciliationQuery {
    /// One chain's only (`ETHEREUM_MAINNET`, …).
    pub chain: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReconciliationList {
    pub data: Vec<Run>,
}

/// The last reconciliation of each chain `run` reconciles, by chain.
#[utoipa::path(get, operation_id = "listReconciliations", path = "/operator/v1/reconciliation", tag = "operators",
    security(("operator_key" = [])),
    params(ReconciliationQuery),
    responses(
        (status = 200, description = "Each chain's last reconciliation", body = ReconciliationList),
        (status = 400, description = "An unknown chain", body = ErrorBody),
        (status = 403, description = "Neither compliance, treasury nor admin", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Query(query): Query<ReconciliationQuery>,
) -> Result<Json<ReconciliationList>, ApiError> {
    caller.may(Action::Reconciliation)?;
    let chain = query
        .chain
        .as_deref()
        .map(|text| {
            text.parse::<Chain>().map_err(|_| ApiError::invalid(format!("chain: no chain is named {text:?}")))
        })
        .transpose()?;
    Ok(Json(ReconciliationList { data: state.store().reconcile_runs(chain).await? }))
}
