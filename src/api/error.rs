//! The API's one error shape, `{ "code": "…", "message": "…" }`, and how
//! every failure maps to an HTTP status.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use tracing::error;
use utoipa::ToSchema;

use crate::{assets::BalanceError, store::StoreError};

/// Every code an error answer carries: the schema's enum is this list, so
/// a generated client knows each one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// `400`: a malformed request; the message names the field.
    InvalidRequest,
    /// `401`: a missing, malformed, unknown or revoked key.
    Unauthorized,
    /// `401`: a paired key's request signature refused.
    InvalidSignature,
    /// `403`: an operator's role or state does not allow the decision.
    Forbidden,
    /// `404`: an unknown path, or a resource not in the key's organization.
    NotFound,
    /// `405`.
    MethodNotAllowed,
    /// `409`: the resource's state does not allow the change.
    Conflict,
    /// `409`: the organization holds as many accounts, identities or
    /// webhooks as it may; the message names the limit.
    OrganizationLimitReached,
    /// `429`, with `Retry-After`.
    RateLimited,
    /// `503`: a chain's node did not answer.
    ChainUnavailable,
    /// `500`: details only in the log.
    Internal,
    /// `409`: a processed transfer's `request_id` (with `transfer_id`).
    DuplicateTransaction,
    /// `409`: a `request_id` already used by another request.
    RequestIdReused,
    /// `400`: the account or its identity does not transact.
    AccountNotActive,
    /// `400`.
    InsufficientBalance,
    /// `400`: a limit policy refuses the amount.
    LimitExceeded,
    /// `400`: the transfer's call needs more gas than one transaction may
    /// carry (16,777,216 since EIP-7825).
    GasLimitExceeded,
    /// `503`: no signing keys.
    TransfersUnavailable,
    /// `503`: no signing keys.
    ConversionsUnavailable,
    /// `503`: no signing keys to derive an account's addresses.
    AccountsUnavailable,
    /// `503`: no receiving bank is configured to take wires.
    IssuanceUnavailable,
    /// `401`: an operator key that has expired.
    KeyExpired,
    /// `503`: production invitations are mailed, and this service has no
    /// mail configured.
    MailUnavailable,
    /// `400`: the identity is not enabled for fiat operations.
    FiatNotEnabled,
    /// `400`: the quote is past `expires_at`.
    QuoteExpired,
    /// `409`: the quote's conversion is in flight or succeeded.
    QuoteAlreadyUsed,
}

/// Every error response's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A stable machine-readable code.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
    /// `DUPLICATE_TRANSACTION` and `REQUEST_ID_REUSED`: the transfer that
    /// already holds the `request_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer_id: Option<String>,
}

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody { code, message: message.into(), transfer_id: None },
            retry_after: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MethodNotAllowed,
            "method not allowed on this path",
        )
    }

    pub fn rate_limited(retry_after_seconds: u64) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
            format!("too many requests for this API key; retry in {retry_after_seconds} s"),
        );
        error.retry_after = Some(retry_after_seconds);
        error
    }

    /// A refusal with its own code, e.g. `INSUFFICIENT_BALANCE`.
    pub fn coded(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(status, code, message)
    }

    /// Names the transfer the error is about.
    pub fn with_transfer(mut self, id: impl Into<String>) -> Self {
        self.body.transfer_id = Some(id.into());
        self
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error; it has been logged",
        )
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What the error says.
    pub fn message(&self) -> &str {
        &self.body.message
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        if let Some(message) = error.conflict() {
            return Self::new(StatusCode::CONFLICT, ErrorCode::Conflict, message.to_string());
        }
        match error {
            StoreError::NotFound(what) => Self::not_found(format!("{what} not found")),
            StoreError::Invalid(message) => Self::invalid(message),
            StoreError::LimitReached(message) => {
                Self::new(StatusCode::CONFLICT, ErrorCode::OrganizationLimitReached, message)
            }
            StoreError::TooMany { message, retry_after } => {
                let mut error = Self::new(StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited, message);
                error.retry_after = Some(retry_after);
                error
            }
            other => {
                error!(error = format!("{:#}", anyhow::Error::from(other)), "store failure");
                Self::internal()
            }
        }
    }
}

/// Says which chain and which call failed; what the node or its provider
/// answered goes to the log only.
impl From<BalanceError> for ApiError {
    fn from(error: BalanceError) -> Self {
        let (chain, method) = (error.chain(), error.method());
        tracing::warn!(%chain, method, error = %error, "balance read failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ChainUnavailable,
            format!(
                "cannot read balances from {chain} now: its node did not answer {method}; try again later"
            ),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
