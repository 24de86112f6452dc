//! `GET /operator/v1/disputes`: deposits the RPC URLs of a chain with
//! `confirm_quorum` above 1 disagreed about, newest first.

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
    deposits::quorum::Dispute,
    operators::Action,
};

/// At most this many disputes per answer.
const MAX_LIMIT: i64 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DisputesQuery {
    /// One chain's disputes only (`ETHEREUM_MAINNET`, …).
    pub chain: Option<String>,
    /// Open disputes only (`true`), or every one (default).
    pub open: Option<bool>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DisputeList {
    pub data: Vec<Dispute>,
}

/// The providers' disputes: which URL answered what about a deposit, and
/// how it ended (`OPEN`: it waits; `CONFIRMED`: a quorum held it after
/// all; `NOT_ON_QUORUM`: it is `FAILED`).
#[utoipa::path(get, operation_id = "listDisputes", path = "/operator/v1/disputes", tag = "operators",
    security(("operator_key" = [])),
    params(DisputesQuery),
    responses(
        (status = 200, description = "The disputes, newest first", body = DisputeList),
        (status = 400, description = "An unknown chain, or a limit out of range", body = ErrorBody),
        (status = 403, description = "Neither compliance, treasury nor admin", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Query(query): Query<DisputesQuery>,
) -> Result<Json<DisputeList>, ApiError> {
    caller.may(Action::Reconciliation)?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(format!("limit: between 1 and {MAX_LIMIT}")));
    }
    let chain = match query.chain.as_deref() {
        Some(text) => Some(
            text.parse::<Chain>()
                .map_err(|_| ApiError::invalid(format!("chain: no chain is named {text:?}")))?,
        ),
        None => None,
    };
    let data = state.store().disputes(chain, query.open.unwrap_or(false), limit).await?;
    Ok(Json(DisputeList { data }))
}
