//! The signature check of a request made with an API key paired with a
//! public key (see [`crate::request_signature`]): the body is read whole to
//! be hashed, then handed on to the handler unchanged.

use axum::{
    body::{Body, to_bytes},
    extract::Request,
    http::StatusCode,
};

use super::{ApiError, ApiState};
use crate::api::ErrorCode;
use crate::api_key::requests::record_request_token;
use crate::request_signature::{self, HEADER, PublicKey, SignatureError};

/// The largest body a signed request may have: axum's default limit, which
/// the JSON bodies of unsigned requests have too.
pub(super) const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Checks `request`'s `X-Request-Signature` against `public_key` and records
/// its `jti`; returns the request, body intact, when it is accepted.
pub(super) async fn check(
    state: &ApiState,
    key_id: &str,
    public_key: &PublicKey,
    request: Request,
) -> Result<Request, ApiError> {
    let token = match request.headers().get(HEADER) {
        None => return Err(refused(key_id, SignatureError::Missing)),
        Some(value) => {
            value.to_str().map_err(|_| refused(key_id, SignatureError::Malformed))?.trim().to_string()
        }
    };
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, BODY_LIMIT).await.map_err(|_| {
        ApiError::coded(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::InvalidRequest,
            format!("a signed request's body is read whole and may be at most {BODY_LIMIT} bytes"),
        )
    })?;
    let signed = request_signature::Request {
        key_id,
        method: parts.method.as_str(),
        uri: parts.uri.path_and_query().map_or(parts.uri.path(), |p| p.as_str()),
        body: &body,
    };
    let now = chrono::Utc::now().timestamp();
    let accepted =
        request_signature::verify(&token, public_key, &signed, now).map_err(|e| refused(key_id, e))?;
    if !record_request_token(state.store(), key_id, &accepted.jti, accepted.keep_until, now).await? {
        return Err(refused(key_id, SignatureError::Replayed));
    }
    Ok(Request::from_parts(parts, Body::from(body)))
}

fn refused(key_id: &str, error: SignatureError) -> ApiError {
    tracing::debug!(api_key = %key_id, reason = %error, "request signature refused");
    ApiError::coded(StatusCode::UNAUTHORIZED, ErrorCode::InvalidSignature, error.to_string())
}
