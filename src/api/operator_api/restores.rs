//! The decisions after a restore of the store: an admin acknowledges it
//! (`POST /operator/v1/audit/restore-acknowledgements`), and a treasury
//! operator records each chain recovered (`POST
//! /operator/v1/transfers/recoveries`). See [`crate::restore`].

use axum::{Extension, Json, extract::State, http::StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, ErrorBody, ErrorCode},
    audit::checkpoint::Checkpoint,
    operators::Action,
    restore::acknowledge::{self, RestoreError},
    transfers::recover::{self, RecoverError},
};

/// A restore past the newest signed checkpoint, acknowledged.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RestoreRequest {
    /// The newest signed checkpoint, as `audit checkpoint` printed it
    /// (`seq`, `hash`, `at`, `signature`): the one the restored log lost.
    #[schema(value_type = Object)]
    pub checkpoint: Checkpoint,
    /// What was restored, from which backup.
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RestoreAcknowledged {
    /// The `audit_log.restore_acknowledged` entry.
    pub acknowledged_by: i64,
    /// The entries lost: `lost_from` to `lost_to`.
    pub lost_from: i64,
    pub lost_to: i64,
    /// The chains that wait for `transfers recover`.
    pub chains: Vec<String>,
}

/// Records that the store was restored past `checkpoint`: checkpoints
/// resume from the restored head, and each configured chain waits for its
/// recovery. Ends every console session and voids every unused link.
#[utoipa::path(post, operation_id = "acknowledgeRestore", path = "/operator/v1/audit/restore-acknowledgements",
    tag = "operators", security(("operator_key" = [])), request_body = RestoreRequest,
    responses(
        (status = 201, description = "Recorded", body = RestoreAcknowledged),
        (status = 400, description = "No reason", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 409, description = "The checkpoint does not verify, the log holds it, or it was acknowledged already", body = ErrorBody),
        (status = 503, description = "The service has no audit public key to verify the checkpoint with", body = ErrorBody),
    ))]
pub async fn acknowledge_restore(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    crate::api::Body(request): crate::api::Body<RestoreRequest>,
) -> Result<(StatusCode, Json<RestoreAcknowledged>), ApiError> {
    caller.may(Action::Operators)?;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: say what was restored, from which backup"));
    }
    let Some(public) = crate::audit::checkpoint::public_key_from_env().map_err(ApiError::invalid)? else {
        return Err(ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal,
            "the service holds no audit public key (CUSTODY_INDEXER_AUDIT_PUBLIC_KEY or CUSTODY_INDEXER_AUDIT_KEY_FILE)",
        ));
    };
    let actor = crate::operators::manage::actor(&caller.0);
    let chains = state.chains().iter().map(|c| c.chain.as_str().to_string()).collect();
    let done = acknowledge::acknowledge_restore(
        state.store(),
        &actor,
        (&request.checkpoint, &public),
        chains,
        &request.reason,
    )
    .await
    .map_err(|error| match error {
        RestoreError::Refused(why) => ApiError::coded(StatusCode::CONFLICT, ErrorCode::Conflict, why),
        RestoreError::Store(error) => error.into(),
    })?;
    let answer = RestoreAcknowledged {
        acknowledged_by: done.acknowledged_by,
        lost_from: done.lost_from,
        lost_to: done.lost_to,
        chains: done.chains,
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// A chain recovered after a restore.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RecoveryRequest {
    pub chain: String,
    /// What was checked.
    pub reason: String,
}

/// Finds and records every transaction of a platform-held key on `chain`
/// the store does not know (each that moved an account's money as a
/// transfer, `recovered:` and its hash), and the chain recovered: its
/// sender resumes and its transfers are accepted again.
#[utoipa::path(post, operation_id = "recoverTransfers", path = "/operator/v1/transfers/recoveries",
    tag = "operators", security(("operator_key" = [])), request_body = RecoveryRequest,
    responses(
        (status = 201, description = "Recorded: each transaction found, and the `transfers.recovered` entry", body = recover::Recovery),
        (status = 400, description = "No reason, or a chain not configured", body = ErrorBody),
        (status = 403, description = "The caller is not `treasury`", body = ErrorBody),
        (status = 409, description = "Not every transaction the store lacks was found: nothing was recorded", body = ErrorBody),
        (status = 503, description = "CHAIN_UNAVAILABLE", body = ErrorBody),
    ))]
pub async fn recover(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    crate::api::Body(request): crate::api::Body<RecoveryRequest>,
) -> Result<(StatusCode, Json<recover::Recovery>), ApiError> {
    caller.may(Action::Recovery)?;
    let chain: crate::chain::Chain =
        request.chain.parse().map_err(|e| ApiError::invalid(format!("chain: {e}")))?;
    let config = state
        .chains()
        .get(chain)
        .map_err(|_| ApiError::invalid(format!("chain: {chain} is not configured")))?;
    let actor = crate::operators::manage::actor(&caller.0);
    let recovery = recover::recover(state.store(), config, &actor, &request.reason).await.map_err(
        |error| match error {
            RecoverError::NoReason => ApiError::invalid(error.to_string()),
            RecoverError::Incomplete(_) => {
                ApiError::coded(StatusCode::CONFLICT, ErrorCode::Conflict, error.to_string())
            }
            RecoverError::Chain(_) => ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ChainUnavailable,
                error.to_string(),
            ),
            RecoverError::Store(error) => error.into(),
        },
    )?;
    Ok((StatusCode::CREATED, Json(recovery)))
}
