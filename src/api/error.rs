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

/// Every error response's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A stable machine-readable code: `INVALID_REQUEST`, `UNAUTHORIZED`,
    /// `INVALID_SIGNATURE` (a paired key's request signature refused),
    /// `NOT_FOUND`, `METHOD_NOT_ALLOWED`, `CONFLICT`,
    /// `ORGANIZATION_LIMIT_REACHED` (the organization holds as many accounts,
    /// identities or webhooks as it may; the message names the limit), `RATE_LIMITED`,
    /// `CHAIN_UNAVAILABLE`, `INTERNAL`; for transfers also
    /// `DUPLICATE_TRANSACTION`, `REQUEST_ID_REUSED`, `ACCOUNT_NOT_ACTIVE`,
    /// `INSUFFICIENT_BALANCE`, `LIMIT_EXCEEDED` and `TRANSFERS_UNAVAILABLE`.
    pub code: &'static str,
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
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody { code, message: message.into(), transfer_id: None },
            retry_after: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "method not allowed on this path")
    }

    pub fn rate_limited(retry_after_seconds: u64) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMITED",
            format!("too many requests for this API key; retry in {retry_after_seconds} s"),
        );
        error.retry_after = Some(retry_after_seconds);
        error
    }

    /// A refusal with its own code, e.g. `INSUFFICIENT_BALANCE`.
    pub fn coded(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::new(status, code, message)
    }

    /// Names the transfer the error is about.
    pub fn with_transfer(mut self, id: impl Into<String>) -> Self {
        self.body.transfer_id = Some(id.into());
        self
    }

    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "internal error; it has been logged")
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
        match error {
            StoreError::NotFound(what) => Self::not_found(format!("{what} not found")),
            StoreError::Invalid(message) => Self::invalid(message),
            StoreError::Conflict(message) => Self::new(StatusCode::CONFLICT, "CONFLICT", message),
            StoreError::LimitReached(message) => {
                Self::new(StatusCode::CONFLICT, "ORGANIZATION_LIMIT_REACHED", message)
            }
            StoreError::TooMany { message, retry_after } => {
                let mut error = Self::new(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED", message);
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
            "CHAIN_UNAVAILABLE",
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
