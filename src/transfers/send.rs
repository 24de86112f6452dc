//! What can stop a transfer's step, on either chain family: one error that
//! knows whether trying again can help.

use std::time::Duration;

use tracing::warn;

use super::{FailureDetails, Outgoing, failure, retries};
use crate::{
    config::{AssetConfig, ChainConfig},
    keys::KeyError,
    store::{Store, StoreError, now_micros},
};

/// The longest a transfer waits between two failed steps.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Rpc(#[from] crate::rpc::RpcFailure),
    #[error(transparent)]
    Store(StoreError),
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The transfer cannot be sent as it stands (a delisted asset, a key that
    /// does not sign for its source, a call the chain says would fail).
    #[error("{0}")]
    Invalid(String),
    /// Nothing is decided yet about what the transfer moved (an EIP-3009
    /// authorization that may still execute): the step is tried again.
    #[error("{0}")]
    Undecided(String),
    /// The transfer may not be sent any more (its identity or account no
    /// longer transacts): it fails with this, its own transaction never
    /// recorded nor sent.
    #[error("{}: {}", .0.code, .0.message)]
    Refused(FailureDetails),
}

impl From<StoreError> for SendError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unsendable(failure) => SendError::Refused(failure),
            other => SendError::Store(other),
        }
    }
}

impl SendError {
    /// Whether the same step can succeed later: the chain or the store did
    /// not answer, or answered in a way that decides nothing about the
    /// transfer. The transfer then stays as it is, funds held.
    pub fn is_retryable(&self) -> bool {
        match self {
            SendError::Rpc(_) | SendError::Store(_) | SendError::Undecided(_) => true,
            SendError::Key(error) => error.is_retryable(),
            SendError::Invalid(_) | SendError::Refused(_) => false,
        }
    }

    /// How the transfer fails when the error is not retryable.
    pub fn failure(&self) -> Option<FailureDetails> {
        match self {
            SendError::Key(error) => Some(failure("SIGNING_FAILED", &error.to_string())),
            SendError::Invalid(message) => Some(failure("INVALID_TRANSFER", message)),
            SendError::Refused(failure) => Some(failure.clone()),
            _ => None,
        }
    }
}

/// The listed token `t` moves: a transfer accepted for an asset delisted
/// since cannot be sent.
pub fn listed_asset<'a>(config: &'a ChainConfig, t: &Outgoing) -> Result<&'a AssetConfig, SendError> {
    config.assets.iter().find(|a| a.symbol == t.currency_symbol).ok_or_else(|| {
        SendError::Invalid(format!("{} is no longer listed on {}", t.currency_symbol, config.chain))
    })
}

/// Whether `t` still waits out its last failed step, or, not yet started,
/// waits for an asset the wing holds back (see [`super::held`]).
pub fn waiting(config: &ChainConfig, t: &Outgoing) -> bool {
    let unverified = || {
        t.transactions.is_empty()
            && t.authorization_nonce.is_none()
            && config.assets.iter().any(|a| {
                a.issued
                    && a.symbol == t.currency_symbol
                    && super::held::is_held(config.chain, &a.contract_address)
            })
    };
    t.retry_at.is_some_and(|at| at > now_micros()) || unverified()
}

/// Keeps a step's error with its transfer, so that the chain's other
/// transfers move on: a retryable error defers this transfer alone, its
/// wait doubling from the poll interval with each failure in a row (up to
/// five minutes); a lasting one is returned as the failure to end it with.
/// A success clears the count.
pub async fn after_step(
    store: &Store,
    config: &ChainConfig,
    t: &Outgoing,
    outcome: Result<(), SendError>,
) -> Result<Option<FailureDetails>, StoreError> {
    match outcome {
        Ok(()) if t.retries > 0 || t.retry_at.is_some() => {
            retries::clear_retries(store, &t.id).await.map(|()| None)
        }
        Ok(()) => Ok(None),
        // A signer that does not answer is tried again at the next pass,
        // without backing off: its outage stops the submit window, and once
        // it answers the transfer must go at once, before the window's rest
        // runs out.
        Err(SendError::Key(error)) if error.is_unreachable() => {
            tracing::debug!(chain = %config.chain, transfer = %t.id, error = %error, "transfer step waits for the signer");
            let retry_at = now_micros().saturating_add(config.poll_interval.as_micros() as i64);
            retries::defer_transfer(store, &t.id, t.retries, retry_at, &error.to_string()).await?;
            Ok(None)
        }
        Err(error) if error.is_retryable() => {
            let retries = t.retries.saturating_add(1);
            let wait = config.poll_interval.saturating_mul(1 << retries.min(16)).min(MAX_RETRY_WAIT);
            warn!(chain = %config.chain, transfer = %t.id, retries, wait_ms = wait.as_millis() as u64, error = %error, "transfer step failed; retrying it later");
            let retry_at = now_micros().saturating_add(wait.as_micros() as i64);
            retries::defer_transfer(store, &t.id, retries, retry_at, &error.to_string()).await?;
            Ok(None)
        }
        Err(error) => Ok(error.failure()),
    }
}
