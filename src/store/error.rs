//! The store's one error: each case names what happened, says whether the
//! store refused the request or failed, and whether asking again may help
//! (see docs/architecture.md, "The store's errors").

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {url}")]
    Connect {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("unsupported database url {0} (expected sqlite:// or postgres://)")]
    UnsupportedUrl(String),
    #[error("migrating the store failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("store query failed")]
    Query(#[from] sqlx::Error),
    #[error("{0} not found")]
    NotFound(String),
    /// Another writer changed the row between this one's read and its
    /// write (a cursor moved, a row changed meanwhile, a nonce taken):
    /// nothing was written; the step may be tried again from a fresh read.
    #[error("{0}")]
    Raced(String),
    /// Another instance indexes what this one meant to (a range, a gap, an
    /// address's cursor): nothing was written; the watcher polls again.
    #[error("{0}")]
    Elsewhere(String),
    /// The worker's lease (its fence) was taken over: nothing was written;
    /// the new holder goes on, and asking again changes nothing here.
    #[error("{0}")]
    LeaseLost(String),
    /// Not yet: something else must happen first (a refund in flight, an
    /// answer awaiting its confirmation, an account being created); asking
    /// again later may succeed.
    #[error("{0}")]
    Waiting(String),
    /// The row's state does not take what was asked (a revoked key, a
    /// virtual account that takes no wire, a payout not waiting for an
    /// answer): asking again changes nothing.
    #[error("{0}")]
    Refused(String),
    /// A unique key a new row would hold is another row's already: an id,
    /// an email, an account number, a watched address, a wire's reference.
    /// `key` names it as `<kind>:<value>` (`account:<id>`,
    /// `address:<CHAIN>:<address>`, …), for callers that say which of
    /// their inputs it was.
    #[error("{message}")]
    Taken { key: String, message: String },
    /// A request's idempotency key (its `request_id`, a wire's reference)
    /// was used for another request.
    #[error("{0}")]
    Duplicate(String),
    /// The chain's configuration does not allow it (a mint of an asset
    /// that is not issued here): it waits until the configuration changes.
    #[error("{0}")]
    Unconfigured(String),
    /// The organization holds as many of something as it may.
    #[error("{0}")]
    LimitReached(String),
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("stored row is corrupt: {0}")]
    Corrupt(String),
    /// Personal data without its key, or with another key.
    #[error(transparent)]
    Pii(#[from] crate::pii::PiiError),
    /// Too many of something in a period: `429`, to be tried again after
    /// `retry_after` seconds.
    #[error("{message}")]
    TooMany { message: String, retry_after: u64 },
    /// A transfer's own transaction was not recorded because the transfer
    /// may not be sent any more: it ends with this failure, nothing sent
    /// (see [`crate::transfers::rules::may_sign`]).
    #[error("{}: {}", .0.code, .0.message)]
    Unsendable(crate::transfers::resource::FailureDetails),
}

/// A key the signer cannot derive: the input named a key that cannot be.
impl From<crate::keys::KeyError> for StoreError {
    fn from(error: crate::keys::KeyError) -> Self {
        StoreError::Invalid(error.to_string())
    }
}

impl StoreError {
    /// A unique key taken: `key` as `<kind>:<value>`, and what to say.
    pub fn taken(key: String, message: String) -> Self {
        StoreError::Taken { key, message }
    }

    /// Whether the store refused what was asked (not found, invalid, taken,
    /// raced, waiting, refused by a row's state, …), as opposed to failing
    /// (the database, a corrupt row, a key): the request was read and
    /// answered.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            StoreError::NotFound(_)
                | StoreError::Invalid(_)
                | StoreError::Raced(_)
                | StoreError::Elsewhere(_)
                | StoreError::LeaseLost(_)
                | StoreError::Waiting(_)
                | StoreError::Refused(_)
                | StoreError::Taken { .. }
                | StoreError::Duplicate(_)
                | StoreError::Unconfigured(_)
        )
    }

    /// The message of a refusal answered `409 Conflict`: a race, another
    /// instance's or holder's work, a wait, a row's state, a key taken, an
    /// idempotency key reused, the configuration.
    pub fn conflict(&self) -> Option<&str> {
        match self {
            StoreError::Raced(message)
            | StoreError::Elsewhere(message)
            | StoreError::LeaseLost(message)
            | StoreError::Waiting(message)
            | StoreError::Refused(message)
            | StoreError::Taken { message, .. }
            | StoreError::Duplicate(message)
            | StoreError::Unconfigured(message) => Some(message),
            _ => None,
        }
    }

    /// Whether asking again may succeed: the database failed, another
    /// writer or instance came first (a fresh read may go on), or something
    /// must happen first.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Connect { .. }
                | StoreError::Query(_)
                | StoreError::Raced(_)
                | StoreError::Elsewhere(_)
                | StoreError::Waiting(_)
                | StoreError::TooMany { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::StoreError;

    /// Each case says whether the store refused (it read and answered the
    /// request) and whether asking again may help.
    #[test]
    fn each_case_says_whether_a_retry_helps() {
        let text = || "x".to_string();
        let failure = crate::transfers::failure("NOT_SUBMITTED", "x");
        // (case, a refusal, retryable, a 409 conflict)
        let cases = [
            (StoreError::NotFound(text()), true, false, false),
            (StoreError::Invalid(text()), true, false, false),
            (StoreError::Raced(text()), true, true, true),
            (StoreError::Elsewhere(text()), true, true, true),
            (StoreError::LeaseLost(text()), true, false, true),
            (StoreError::Waiting(text()), true, true, true),
            (StoreError::Refused(text()), true, false, true),
            (StoreError::taken("account:a".into(), text()), true, false, true),
            (StoreError::Duplicate(text()), true, false, true),
            (StoreError::Unconfigured(text()), true, false, true),
            (StoreError::LimitReached(text()), false, false, false),
            (StoreError::Corrupt(text()), false, false, false),
            (StoreError::Query(sqlx::Error::PoolTimedOut), false, true, false),
            (StoreError::TooMany { message: text(), retry_after: 1 }, false, true, false),
            (StoreError::Unsendable(failure), false, false, false),
        ];
        for (error, refusal, retryable, conflict) in cases {
            assert_eq!(error.is_refusal(), refusal, "{error:?}");
            assert_eq!(error.retryable(), retryable, "{error:?}");
            assert_eq!(error.conflict().is_some(), conflict, "{error:?}");
        }
    }
}
