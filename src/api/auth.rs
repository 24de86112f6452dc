//! `Authorization: Bearer <API_KEY>` on every `/v2` request, then the key's
//! rate limit, then, for a key paired with a public key, the request's
//! signature. The organization of the key scopes everything the handler sees.

use axum::{
    extract::{Request, State},
    http::{HeaderMap, header::AUTHORIZATION},
    middleware::Next,
    response::Response,
};
use governor::clock::{Clock, DefaultClock};

use super::{ApiError, ApiState};
use crate::api_key;

/// Who is calling: the organization of the key the request authenticated with.
#[derive(Debug, Clone)]
pub struct Caller {
    pub organization: String,
    /// The id of the API key the request carried.
    pub api_key: String,
}

impl Caller {
    /// The caller as an audit entry names it: its key.
    pub fn actor(&self) -> crate::audit::Actor {
        crate::audit::Actor::ApiKey(self.api_key.clone())
    }
}

pub async fn authenticate(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let token = bearer(request.headers()).map(str::to_string).ok_or_else(|| {
        ApiError::unauthorized("missing or malformed Authorization header; send `Bearer <API_KEY>`")
    })?;
    let invalid = || ApiError::unauthorized("invalid or revoked API key");
    let id = api_key::key_id(&token).ok_or_else(invalid)?;
    let credentials = state.store().active_api_key(id).await?.ok_or_else(invalid)?;
    if !api_key::matches(&token, &credentials.secret_hash) {
        return Err(invalid());
    }
    if withdrawn(&state, &credentials).await? {
        return Err(invalid());
    }
    let key = credentials.key;
    if let Err(not_until) = state.0.limiter.check_key(&key.id) {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        return Err(ApiError::rate_limited((wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)));
    }
    if let Some(public_key) = &credentials.public_key {
        request = super::signature::check(&state, &key.id, public_key, request).await?;
    }
    let now = crate::store::now_micros();
    if key.last_used_at.is_none_or(|last| now - last.timestamp_micros() > 60_000_000) {
        // Best effort: a request is not refused for want of this record.
        if let Err(error) = api_key::requests::used(state.store(), &key.id, now).await {
            tracing::warn!(api_key = %key.id, %error, "the key's last use was not recorded");
        }
    }
    tracing::debug!(api_key = %key.id, organization = %key.organization_id, "authenticated");
    request.extensions_mut().insert(Caller { organization: key.organization_id, api_key: key.id });
    Ok(next.run(request).await)
}

/// Whether the log revoked, moved or paired the key `credentials` holds
/// otherwise than its row says (see [`crate::audit::withdrawn`]).
async fn withdrawn(state: &ApiState, credentials: &crate::store::Credentials) -> Result<bool, ApiError> {
    use crate::audit::principals::{KeyRow, Rows};
    let key = &credentials.key;
    let fingerprint = credentials
        .public_key
        .as_ref()
        .map(|public| crate::audit::chain::sha256_hex(public.pem().as_bytes()));
    let row = KeyRow {
        id: key.id.clone(),
        owner: key.organization_id.clone(),
        live: true,
        paired: fingerprint.is_some(),
        fingerprint,
        expires_at: None,
    };
    let rows = Rows { api_keys: vec![row], ..Rows::default() };
    Ok(crate::audit::withdrawn::withdrawn(state.store(), &[&key.id], &rows).await?.is_some())
}

/// The token of an `Authorization: Bearer <token>` header, if there is one.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}
