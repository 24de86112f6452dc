//! `/operator/v1/me/keys`: an operator makes a key of their own, with a
//! current code of their second factor; it never outlives the key the
//! request authenticated with, and revoking that key revokes it.

use axum::{Extension, Json, extract::State, http::StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CallerKey, OperatorCaller};
use crate::{
    api::{ApiError, ApiState, Body, ErrorBody},
    operators::keys,
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnKeyRequest {
    /// The 6 digits the operator's authenticator shows now (required in
    /// `production`, and whenever the operator has a second factor).
    pub totp_code: Option<String>,
    /// 1 to 365; in `production` 90 unless given. Never beyond the expiry
    /// of the key this request authenticates with.
    pub expires_in_days: Option<u32>,
}

/// A key just made, its token shown once. `Debug` shows the id only.
#[derive(Serialize, ToSchema)]
pub struct OwnKey {
    pub id: String,
    /// `cio_…`: shown once.
    pub token: String,
    /// When it stops working; `null`: never (`sandbox`).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<String>,
}

impl std::fmt::Debug for OwnKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnKey")
            .field("id", &self.id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Makes a key of the calling operator's own.
#[utoipa::path(post, operation_id = "createOwnOperatorKey", path = "/operator/v1/me/keys", tag = "operators",
    security(("operator_key" = [])), request_body = OwnKeyRequest,
    responses(
        (status = 201, description = "Made; the token is shown once", body = OwnKey),
        (status = 400, description = "A number of days out of 1 to 365", body = ErrorBody),
        (status = 403, description = "No second factor (production), or a wrong or used code", body = ErrorBody),
    ))]
pub async fn create_key(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Extension(key): Extension<CallerKey>,
    Body(request): Body<OwnKeyRequest>,
) -> Result<(StatusCode, Json<OwnKey>), ApiError> {
    let code = request.totp_code.as_deref().map(str::trim);
    let me = (&caller.0, key.id.as_str());
    let (secret, expires_at) =
        keys::create_own(state.store(), state.environment(), me, code, request.expires_in_days).await?;
    let expires_at = expires_at
        .and_then(chrono::DateTime::from_timestamp_micros)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    Ok((StatusCode::CREATED, Json(OwnKey { id: secret.id, token: secret.token.to_string(), expires_at })))
}
