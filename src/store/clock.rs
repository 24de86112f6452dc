//! Which clock lease times come from. Instances sharing a PostgreSQL judge
//! leases other instances wrote (a worker lease's `until`, a webhook
//! delivery's `lease_until`), so there every lease time is the database's
//! clock, read by the statement that writes or compares it: an instance whose
//! own clock runs fast cannot take over a live lease, nor can one whose clock
//! runs slow renew its lease into the past. A delivery queued, retried or
//! redelivered is due by the same clock, so one instance's wake-up finds
//! what another just queued, and a retry waits its backoff, whatever the
//! instances' clocks say. SQLite serves a single `run`,
//! and its file is on that instance's machine: its own [`Clock`] is bound
//! instead.

use sqlx::{Any, Transaction, any::AnyArguments, query::Query};

use super::{Backend, Store, now_micros};

/// An instance's own clock: the system's, or the system's shifted by a fixed
/// offset (to stand for an instance whose clock disagrees).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    offset_micros: i64,
}

impl Clock {
    /// The system clock shifted by `offset_micros` (negative: behind).
    pub fn skewed(offset_micros: i64) -> Self {
        Self { offset_micros }
    }

    /// Microseconds since the epoch.
    pub fn now(self) -> i64 {
        now_micros().saturating_add(self.offset_micros)
    }
}

/// The database's clock, microseconds since the epoch, in PostgreSQL. Not
/// `now()`, which stays at the transaction's start. A subquery, so that a
/// statement reads the clock once (`clock_timestamp()` is volatile: read in
/// a condition it is read for every row, and no index can serve the
/// condition).
pub(super) const POSTGRES_NOW: &str =
    "(SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT))";

/// "Now" by the database's clock, for a row written in `tx` that lease
/// statements compare with theirs (a delivery's `next_attempt_at`): an
/// expression on PostgreSQL; `None` on SQLite, where the one process that
/// writes binds the time itself.
pub(super) fn database_now(tx: &mut Transaction<'static, Any>) -> Option<&'static str> {
    (Backend::of(tx) == Backend::Postgres).then_some(POSTGRES_NOW)
}

impl Store {
    /// This handle with its own clock replaced.
    pub fn with_clock(&self, clock: Clock) -> Store {
        Store { clock, ..self.clone() }
    }

    /// "Now" in a lease statement whose other parameters are `$1` to
    /// `$(param - 1)`: the database's clock on PostgreSQL; on SQLite `$param`,
    /// which [`Store::bind_lease_now`] binds.
    pub(super) fn lease_now(&self, param: usize) -> String {
        match self.backend {
            Backend::Postgres => POSTGRES_NOW.to_string(),
            Backend::Sqlite => format!("${param}"),
        }
    }

    /// Binds this instance's clock as the last parameter of a lease
    /// statement on SQLite (see [`Store::lease_now`]); nothing on PostgreSQL.
    pub(super) fn bind_lease_now<'q>(
        &self,
        query: Query<'q, Any, AnyArguments<'q>>,
    ) -> Query<'q, Any, AnyArguments<'q>> {
        match self.backend {
            Backend::Postgres => query,
            Backend::Sqlite => query.bind(self.clock.now()),
        }
    }
}
