//! The store: every SQL statement of the service lives here, in a folder
//! per wing (`deposits/`, `transfers/`, `issuance/`, `conversions/`,
//! `identity/`, `events/`, `operators/`, `people/`, `audit/`, `reconcile/`,
//! `keys/`) beside the rows every wing shares (accounts, organizations,
//! leases, personal data). One portable dialect runs on SQLite (the
//! default, an embedded file) and on PostgreSQL (production, several
//! instances) through sqlx's `Any` driver.

pub(crate) mod accounts;
mod arrays;
pub mod audit;
mod clock;
pub(crate) mod conditions;
pub mod conversions;
mod deposits;
pub(crate) mod environment;
mod error;
mod events;
mod identity;
pub(crate) mod issuance;
pub mod keyring;
mod keys;
mod leases;
pub(crate) mod mail_outbox;
pub(crate) mod operators;
pub(crate) mod organizations;
mod params;
mod people;
pub(crate) mod pii;
mod quotas;
pub(crate) mod reconcile;
pub(crate) mod request_signatures;
pub mod sealed;
pub(crate) mod transfers;

// The row modules of each wing's folder, under the store's one name.
use audit::audit_guard;
pub(crate) use conversions::quotes;
pub use conversions::{off_ramp_refunds, off_ramps, payouts};
pub(crate) use conversions::{payout_answers, virtual_accounts};
use deposits::{chain_state, chain_stops, coverage, deposit_rows, disputes, health, scan};
pub use events::delivery_log;
pub(crate) use events::{deliveries, sinks};
use events::{webhook_keys, webhooks};
pub use identity::entitlement;
use identity::refusal;
pub(crate) use identity::{identities, identity_changes, verification};
pub use issuance::{mint_transfers, mints};
pub use keys::key_hashes;
pub(crate) use keys::{account_keys, signer_outages};
pub(crate) use operators::operator_changes;
pub use people::{console, console_sessions};
pub use reconcile::{reconcile_repairs, reconcile_runs, reconcile_wallets};
pub use transfers::recovered;
pub(crate) use transfers::{gas_ledger, limits, nonce_fillers, transfer_lineage, transfer_txs};

pub use error::StoreError;
pub use request_signatures::INSTANCE_SKEW_SECS;

use std::{str::FromStr, time::Duration};

use sqlx::{
    AnyPool, Transaction,
    any::{Any, AnyPoolOptions},
};

/// The transfer types the store takes and returns.
pub use crate::transfers::{
    model::{
        ChainGas, Created, Fee, GasUsage, LimitPolicy, Lineage, NewTransfer, Outgoing, PlatformCost,
        SentTransaction, Settlement, TxRole, TxState, fingerprint,
    },
    rules::{USD_DECIMALS, usd_micros},
};
pub use accounts::{AccountPage, NewAccount, WatchFrom};
pub use chain_state::{ChainState, Rewind, RewindOutcome};
pub use chain_stops::ChainStop;
pub use clock::Clock;
pub use conditions::{Condition, WEBHOOK_FAILING};
pub use conversions::NewVirtualWire;
pub use coverage::{Coverage, Gap, WatchStart};
pub use deliveries::{Attempt, Claimed, Delivery, Finished, Outcome, Rooms};
pub use deposits::{DepositPage, Orphan, scan_in};
pub use disputes::QuorumSettlement;
pub use entitlement::{FIAT_DISABLED, FIAT_ENABLED};
pub use health::{ChainHealth, DepositCount};
pub use identities::{Action, NewIdentity, Registered};
pub use issuance::{Made, NewMintInstruction, same_instruction};
pub use leases::{Fence, WorkerKind, WorkerLease};
pub use mints::{FiatReturn, NewWire, WireSource};
pub use off_ramps::NewOffRamp;
pub use organizations::{ApiKey, Credentials, Organization};
pub use quotas::{MAX_API_KEYS, OrganizationLimits};
pub use quotes::NewQuote;
pub use refusal::Refusal;
pub use scan::{BlockRef, CursorMove, ScanCommit};
pub use signer_outages::SIGNER_UNREACHABLE;
pub use sinks::{OutboxEvent, SinkCursor};
pub use transfers::TransferPage;
use transfers::{TRANSFER_COLUMNS, transfer_from_row};
pub use verification::{CheckStep, Review};
pub use virtual_accounts::NewVirtualAccount;
pub use webhook_keys::MAX_PREVIOUS_KEYS;
pub use webhooks::Webhook;

use crate::redact::redact_urls;

/// The routes of the platform's own transfers (a mint's, `MINT`; an
/// off-ramp's refund, `SETTLEMENT`), for `route NOT IN …`: no client reads
/// them, and they hold nothing of the account they pay.
pub(super) const PLATFORM_ROUTES: &str = "('MINT', 'SETTLEMENT')";

/// A write transaction of the store (see [`Store::begin`]).
pub type Tx = Transaction<'static, Any>;

/// The SQLite file a new user gets without configuring anything.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://custody-indexer.db";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// What a `SELECT` appends to lock the rows it reads until `tx` ends: `FOR
/// UPDATE` on PostgreSQL; nothing on SQLite, whose one writer serializes.
pub(crate) fn lock_suffix(tx: &mut Tx) -> &'static str {
    if Backend::of(tx) == Backend::Postgres { " FOR UPDATE" } else { "" }
}

impl Backend {
    /// The database `tx` runs on.
    fn of(tx: &mut sqlx::Transaction<'static, sqlx::Any>) -> Self {
        if (**tx).backend_name().eq_ignore_ascii_case("sqlite") { Backend::Sqlite } else { Backend::Postgres }
    }
}

#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// The lease of the singleton worker this handle writes for, checked in
    /// its writes' transactions (see [`Store::fenced`]).
    fence: Option<std::sync::Arc<Fence>>,
    /// This instance's own clock, which lease times come from on SQLite only
    /// (see [`Clock`]).
    clock: Clock,
    /// What each organization may hold, enforced on the API's creations
    /// (see [`Store::with_limits`]).
    limits: Option<OrganizationLimits>,
    /// Seals and opens personal data (see [`crate::start::unlock_pii`]); `None`:
    /// personal data is refused.
    pii: Option<std::sync::Arc<crate::pii::Cipher>>,
    /// Told when events are committed (see [`Store::outbox_written`]), so
    /// the delivery worker claims them at once rather than at its next poll.
    outbox: std::sync::Arc<tokio::sync::Notify>,
}

impl Store {
    /// Opens the store (creating a SQLite file if needed) and applies pending
    /// migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let store = Self::connect(url).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Opens the store without migrating.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, true).await
    }

    /// Opens an existing store without migrating; a missing SQLite file is an
    /// error rather than a new empty store (for read-only checks).
    pub async fn connect_existing(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, false).await
    }

    async fn connect_with(url: &str, create: bool) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, url) = if url.starts_with("sqlite:") {
            (Backend::Sqlite, sqlite_url(url, create))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Backend::Postgres, url.to_string())
        } else {
            return Err(StoreError::UnsupportedUrl(redact_urls(url)));
        };
        let options = pool_options(backend, if backend == Backend::Sqlite { 4 } else { 10 });
        let pool = options
            .connect(&url)
            .await
            .map_err(|source| StoreError::Connect { url: redact_urls(&url), source })?;
        Ok(Self {
            pool,
            backend,
            fence: None,
            clock: Clock::default(),
            limits: None,
            pii: None,
            outbox: Default::default(),
        })
    }

    /// The same store through a pool of its own of `connections`: what
    /// runs on it never waits for a connection behind the main pool's work
    /// (the worker leases' renewals behind a burst of API requests).
    pub async fn apart(&self, connections: u32) -> Result<Self, StoreError> {
        let options = (*self.pool.connect_options()).clone();
        let pool = pool_options(self.backend, connections).connect_with(options).await?;
        Ok(Self { pool, ..self.clone() })
    }

    /// Applies pending migrations and puts the audit log's guards in place
    /// (see [`audit_guard`]): needs the rights of the tables' owner.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await?;
        audit_guard::install(&self.pool, self.backend).await?;
        audit::install_index(&self.pool).await?;
        self.compact_positions().await
    }

    /// Opens a store that `migrate` brought to this release, changing no
    /// table: what a role without DDL rights runs on (`run --no-migrate`).
    /// A store with a migration of this release not applied is refused.
    pub async fn open_migrated(url: &str) -> Result<Self, StoreError> {
        let store = Self::connect_existing(url).await?;
        if let Some(pending) = store.pending_migrations().await?.first() {
            return Err(StoreError::Invalid(format!(
                "the store lacks migration {pending} of this release: run `custody-indexer migrate` with the \
                 tables' owner's DATABASE_URL first"
            )));
        }
        Ok(store)
    }

    /// Opens the store at `url` as it is, changing nothing: `migrate
    /// --dry-run`'s.
    pub async fn open_as_is(url: &str) -> Result<Self, StoreError> {
        Self::connect_existing(url).await
    }

    /// The migrations of this release the store lacks, in order, each as
    /// its file names it (`NNNN_description`).
    pub async fn pending_migrations(&self) -> Result<Vec<String>, StoreError> {
        let applied: Vec<i64> = match sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(&self.pool)
            .await
        {
            Ok(applied) => applied,
            // Never migrated: every migration is pending. Any other
            // failure (a lock, a lost connection) is told as itself.
            Err(sqlx::Error::Database(error))
                if error.code().as_deref() == Some("42P01") || error.message().contains("no such table") =>
            {
                Vec::new()
            }
            Err(error) => return Err(error.into()),
        };
        Ok(MIGRATOR
            .iter()
            .filter(|m| !applied.contains(&m.version))
            .map(|m| format!("{:04}_{}", m.version, m.description.replace(' ', "_")))
            .collect())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Writes an online, consistent copy of a SQLite store to `file`
    /// (`VACUUM INTO`: one read transaction, other writers going on). A
    /// PostgreSQL store is copied by PostgreSQL's own tools.
    pub async fn backup_into(&self, file: &std::path::Path) -> Result<(), StoreError> {
        if self.backend != Backend::Sqlite {
            return Err(StoreError::Invalid(
                "backup copies a SQLite store; back a PostgreSQL store up with pg_basebackup and WAL archiving \
                 (docs/operations.md)"
                    .into(),
            ));
        }
        let path =
            file.to_str().ok_or_else(|| StoreError::Invalid("the backup's path is not UTF-8".into()))?;
        sqlx::query("VACUUM INTO $1").bind(path).execute(&self.pool).await?;
        Ok(())
    }

    /// Checks that the store answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A write transaction, for a wing's flow to read and write rows in
    /// through the store's row functions and commit: the one way anything
    /// is written. SQLite takes the write lock up front so two processes
    /// never fail on a lock upgrade half-way through. On a handle
    /// [`Store::fenced`] by a worker's lease it fails with
    /// [`StoreError::LeaseLost`] unless the lease still holds, and keeps the
    /// lease from being taken over (and, on PostgreSQL, its renewal waiting)
    /// until it ends: no call to a node, a bank, a signer or a mail relay
    /// is made while one is open.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        let mut tx = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        };
        self.check_own_fence(&mut tx).await?;
        Ok(tx)
    }
}

/// The pool's options: `connections` at most, and SQLite's settings on each.
fn pool_options(backend: Backend, connections: u32) -> AnyPoolOptions {
    AnyPoolOptions::new().max_connections(connections).acquire_timeout(Duration::from_secs(30)).after_connect(
        move |conn, _| {
            Box::pin(async move {
                if backend == Backend::Sqlite {
                    // First: every statement after it, the journal mode's
                    // included, waits for a lock another process holds
                    // instead of failing at once with "database is locked".
                    sqlx::query("PRAGMA busy_timeout = 30000").execute(&mut *conn).await?;
                    // WAL lets `backfill` and `run` share the file; FULL sync keeps
                    // a committed deposit through a power loss.
                    sqlx::query("PRAGMA journal_mode = WAL").execute(&mut *conn).await?;
                    sqlx::query("PRAGMA synchronous = FULL").execute(&mut *conn).await?;
                    sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
                    // A multi-row statement inside a transaction keeps the pages it
                    // changes in a statement journal, to undo only itself if it
                    // fails. In a temporary file that was half of a backfill's
                    // writes; in memory it costs no system call. (Recovery after a
                    // crash reads the WAL, never these journals.)
                    sqlx::query("PRAGMA temp_store = MEMORY").execute(&mut *conn).await?;
                    // A range's thousands of rows touch index pages all over the
                    // tree (transaction hashes are random): a 32 MiB page cache
                    // keeps them instead of reading them back for every statement,
                    // and checkpointing every 10,000 WAL pages (not 1,000) copies a
                    // page changed by several commits into the file once.
                    sqlx::query("PRAGMA cache_size = -32768").execute(&mut *conn).await?;
                    sqlx::query("PRAGMA wal_autocheckpoint = 10000").execute(&mut *conn).await?;
                }
                Ok(())
            })
        },
    )
}

/// `sqlite://file.db` creates the file when missing (`mode=rwc`) if `create`.
fn sqlite_url(url: &str, create: bool) -> String {
    let mode = if create { "mode=rwc" } else { "mode=rw" };
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_string()
    } else if url.contains('?') {
        format!("{url}&{mode}")
    } else {
        format!("{url}?{mode}")
    }
}

/// Microseconds since the epoch, the store's time unit.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

pub fn time(micros: i64) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    chrono::DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| StoreError::Corrupt(format!("time {micros}")))
}

fn parse_column<T: FromStr>(value: &str, column: &str) -> Result<T, StoreError> {
    value.parse().map_err(|_| StoreError::Corrupt(format!("{column} = {value:?}")))
}

fn to_i64(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Invalid(format!("{value} does not fit the store")))
}
