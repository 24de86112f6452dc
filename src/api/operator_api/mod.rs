//! The operator API under `/operator/v1/`: every request authenticated by
//! `Authorization: Bearer <operator key>` (a tenant's API key answers `401`
//! here, as an operator key does on `/v2`); each route checks the role its
//! action needs (`403` naming it). Documented under the `operators` tag of
//! `/openapi.json` and in docs/operations.md.

mod audit;
mod bank;
mod changes;
mod conversions;
mod disputes;
mod identities;
mod issuance;
mod me;
mod on_ramp;
pub(super) mod operators;
mod reconciliation;
mod repairs;
mod restores;
mod users;

use axum::{
    Router,
    extract::{Request, State},
    http::StatusCode,
    middleware::{self, Next},
    response::Response,
};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, ApiState, auth::bearer};
use crate::api::ErrorCode;
use crate::operators::{self as wing, Operator, OperatorError, Refused};

/// The operator a request authenticated as.
#[derive(Debug, Clone)]
pub struct OperatorCaller(pub Operator);

/// The key a request authenticated with.
#[derive(Debug, Clone)]
pub struct CallerKey {
    pub id: String,
}

impl OperatorCaller {
    /// Refuses with `403` when the operator lacks the role `action` needs.
    pub fn may(&self, action: wing::Action) -> Result<(), ApiError> {
        wing::rules::permits(&self.0, action).map_err(ApiError::from)
    }
}

async fn authenticate(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let token = bearer(request.headers()).map(str::to_string).ok_or_else(|| {
        ApiError::unauthorized("missing or malformed Authorization header; send `Bearer <OPERATOR_KEY>`")
    })?;
    let (operator, key_id) = match wing::keys::check(state.store(), &token).await? {
        wing::keys::KeyCheck::Live { operator, key_id, .. } => (operator, key_id),
        wing::keys::KeyCheck::Expired => {
            return Err(ApiError::coded(
                StatusCode::UNAUTHORIZED,
                ErrorCode::KeyExpired,
                "this operator key has expired: make a new one in the console (/console/operator/keys), with your password and second factor",
            ));
        }
        wing::keys::KeyCheck::Suspended { operator, change } => {
            return Err(ApiError::unauthorized(Refused::Suspended(operator, change).to_string()));
        }
        wing::keys::KeyCheck::Unknown => {
            return Err(ApiError::unauthorized(
                "invalid or revoked operator key, or a disabled or suspended operator",
            ));
        }
    };
    tracing::debug!(operator = %operator.id, "operator authenticated");
    request.extensions_mut().insert(OperatorCaller(operator));
    request.extensions_mut().insert(CallerKey { id: key_id });
    Ok(next.run(request).await)
}

impl From<Refused> for ApiError {
    fn from(refusal: Refused) -> Self {
        match refusal {
            Refused::AdminExists
            | Refused::LastAdmin
            | Refused::AdminExisted
            | Refused::BootstrapAdminOnly
            | Refused::Genesis
            | Refused::Decided { .. }
            | Refused::ProposerGone(_)
            | Refused::Unrecorded(_)
            | Refused::Stale(_)
            | Refused::TenantsOwnTeam(_)
            | Refused::NoContact(_)
            | Refused::ContactChanged(_)
            | Refused::ContactUnrecorded(_)
            | Refused::NotOwnSuspension(_)
            | Refused::Suspended(..)
            | Refused::Protected(..) => {
                ApiError::coded(StatusCode::CONFLICT, ErrorCode::Conflict, refusal.to_string())
            }
            Refused::NoRole => ApiError::invalid(format!("roles: {refusal}")),
            Refused::KeyDays(_) | Refused::FirstUserAdmin | Refused::NotContact(_) => {
                ApiError::invalid(refusal.to_string())
            }
            Refused::NoMail => ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::MailUnavailable,
                refusal.to_string(),
            ),
            _ => ApiError::coded(StatusCode::FORBIDDEN, ErrorCode::Forbidden, refusal.to_string()),
        }
    }
}

impl From<OperatorError> for ApiError {
    fn from(error: OperatorError) -> Self {
        match error {
            OperatorError::Refused(refusal) => refusal.into(),
            OperatorError::Invalid(message) => ApiError::invalid(message),
            OperatorError::Store(error) => error.into(),
        }
    }
}

/// The operator routes and their OpenAPI document.
pub(super) fn routes() -> (Router<ApiState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::new()
        .routes(routes!(operators::create, operators::list))
        .routes(routes!(operators::disable))
        .routes(routes!(operators::set_roles))
        .routes(routes!(operators::enable))
        .routes(routes!(operators::invite))
        .routes(routes!(me::create_key))
        .routes(routes!(changes::list))
        .routes(routes!(changes::approve))
        .routes(routes!(changes::refuse))
        .routes(routes!(operators::create_key))
        .routes(routes!(operators::revoke_key))
        .routes(routes!(audit::list))
        .routes(routes!(audit::acknowledge))
        .routes(routes!(restores::acknowledge_restore))
        .routes(routes!(restores::recover))
        .routes(routes!(disputes::list))
        .routes(routes!(reconciliation::list))
        .routes(routes!(repairs::request, repairs::list))
        .routes(routes!(repairs::approve))
        .routes(routes!(repairs::refuse))
        .routes(routes!(identities::decide))
        .routes(routes!(identities::import))
        .routes(routes!(issuance::record))
        .routes(routes!(issuance::approve))
        .routes(routes!(issuance::refuse))
        .routes(routes!(conversions::answer))
        .routes(routes!(conversions::confirm))
        .routes(routes!(conversions::retry_refund))
        .routes(routes!(bank::import))
        .routes(routes!(bank::import_wires))
        .routes(routes!(issuance::complete_return))
        .routes(routes!(on_ramp::record))
        .routes(routes!(bank::import_virtual_account_wires))
        .routes(routes!(on_ramp::open))
        .routes(routes!(on_ramp::confirm))
        .routes(routes!(on_ramp::refuse))
        .routes(routes!(users::invite))
        .routes(routes!(users::set_contact))
        .split_for_parts()
}

/// The operator routes behind their authentication.
pub(super) fn router(state: ApiState) -> Router<ApiState> {
    routes().0.layer(middleware::from_fn_with_state(state, authenticate))
}
