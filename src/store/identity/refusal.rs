//! Why a transfer request was not accepted: the store's answer to a
//! creation it refuses inside its transaction.

use crate::account::AccountStatus;
use crate::store::StoreError;

/// Why a transfer request was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("transfer {0} with this request_id was already processed")]
    Duplicate(String),
    #[error("request_id was already used by transfer {0} with a different request")]
    RequestReused(String),
    #[error("account {0} is {1}; only ACTIVE accounts can send")]
    NotActive(String, AccountStatus),
    #[error("account {0}'s identity is {1}; only an ACTIVE identity's accounts can send")]
    IdentityNotActive(String, crate::identity::Status),
    #[error("insufficient available balance: {available} {symbol} available, {requested} requested")]
    Insufficient { available: String, requested: String, symbol: String },
    #[error("transaction limit policy {policy}: {message}")]
    Limit { policy: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for Refusal {
    fn from(error: sqlx::Error) -> Self {
        Refusal::Store(error.into())
    }
}
