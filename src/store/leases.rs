//! Leases of singleton workers, fenced by epochs.
//!
//! A chain's live watcher and its transfer sender each run on one instance at
//! a time: the holder of the `(kind, chain)` row of `worker_leases`. Taking
//! an expired (or released) lease increments its epoch, so each holding is a
//! distinct [`Fence`]. Every write a worker makes under its lease checks the
//! fence inside the write's own transaction ([`check`]); on PostgreSQL that
//! check locks the lease row, so a takeover either waits for the write to
//! commit or the write sees the new epoch and commits nothing. Safety rests
//! on the epoch alone; `until` only decides when a silent holder may be
//! replaced, and it is written and compared on the database's clock (see
//! [`super::clock`]), never on an instance's.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Any, Row, Transaction};

use super::{Backend, Store, StoreError, Tx, parse_column, time};
use crate::chain::Chain;

/// The singleton workers of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkerKind {
    /// The live watcher (and the gap scanner beside it).
    Watcher,
    /// The transfer sender.
    Sender,
}

impl WorkerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerKind::Watcher => "WATCHER",
            WorkerKind::Sender => "SENDER",
        }
    }
}

impl std::str::FromStr for WorkerKind {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        [WorkerKind::Watcher, WorkerKind::Sender].into_iter().find(|k| k.as_str() == s).ok_or(())
    }
}

impl std::fmt::Display for WorkerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holding of a lease: valid for writes while the row still names this
/// owner and epoch and the holder's renewals keep `until` ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub kind: WorkerKind,
    pub chain: Chain,
    pub owner: String,
    pub epoch: i64,
}

impl std::fmt::Display for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} lease of {} (epoch {}, owner {})", self.kind, self.chain, self.epoch, self.owner)
    }
}

/// A lease as `health` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerLease {
    pub kind: WorkerKind,
    pub chain: Chain,
    /// The instance that holds (or last held) it.
    pub owner: String,
    pub epoch: i64,
    /// Whether the holder renewed it recently enough to still hold it, by
    /// the clock lease times come from, when it was read.
    pub held: bool,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    pub until: DateTime<Utc>,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    pub acquired_at: DateTime<Utc>,
}

impl Store {
    /// Takes the `(kind, chain)` lease for `owner` for `ttl_micros` in `tx`
    /// if nobody holds it (no row, or its `until` has passed), with the next
    /// epoch. `None` while another holding is live. With `force` a live
    /// holding is taken too.
    pub async fn take_lease(
        &self,
        tx: &mut Tx,
        kind: WorkerKind,
        chain: Chain,
        owner: &str,
        ttl_micros: i64,
        force: bool,
    ) -> Result<Option<Fence>, StoreError> {
        let now = self.lease_now(6);
        let sql = format!(
            "INSERT INTO worker_leases (kind, chain, owner, epoch, until, acquired_at)
             VALUES ($1, $2, $3, 1, {now} + $4, {now})
             ON CONFLICT (kind, chain) DO UPDATE SET owner = excluded.owner, epoch = worker_leases.epoch + 1,
                until = excluded.until, acquired_at = excluded.acquired_at
             WHERE worker_leases.until <= {now} OR $5 = 1
             RETURNING epoch"
        );
        let query = sqlx::query(&sql)
            .bind(kind.as_str())
            .bind(chain.as_str())
            .bind(owner)
            .bind(ttl_micros)
            .bind(i64::from(force));
        let taken = self.bind_lease_now(query).fetch_optional(&mut **tx).await?;
        let Some(row) = taken else { return Ok(None) };
        Ok(Some(Fence { kind, chain, owner: owner.to_string(), epoch: row.try_get("epoch")? }))
    }

    /// Extends a holding by `ttl_micros` from now in `tx`; false when the
    /// lease has another epoch.
    pub async fn renew_lease(&self, tx: &mut Tx, fence: &Fence, ttl_micros: i64) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE worker_leases SET until = {} + $1 WHERE kind = $2 AND chain = $3 AND owner = $4 AND epoch = $5",
            self.lease_now(6)
        );
        let query = sqlx::query(&sql)
            .bind(ttl_micros)
            .bind(fence.kind.as_str())
            .bind(fence.chain.as_str())
            .bind(&fence.owner)
            .bind(fence.epoch);
        let renewed = self.bind_lease_now(query).execute(&mut **tx).await?;
        Ok(renewed.rows_affected() == 1)
    }

    /// Gives a holding up in `tx`. The row stays: its epoch keeps growing.
    pub async fn release_lease(tx: &mut Tx, fence: &Fence) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE worker_leases SET until = 0 WHERE kind = $1 AND chain = $2 AND owner = $3 AND epoch = $4",
        )
        .bind(fence.kind.as_str())
        .bind(fence.chain.as_str())
        .bind(&fence.owner)
        .bind(fence.epoch)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Every lease, by chain then kind.
    pub async fn worker_leases(&self) -> Result<Vec<WorkerLease>, StoreError> {
        let sql = format!(
            "SELECT kind, chain, owner, epoch, until, acquired_at,
                CAST(CASE WHEN until > {} THEN 1 ELSE 0 END AS BIGINT) AS held
             FROM worker_leases ORDER BY chain, kind",
            self.lease_now(1)
        );
        let rows = self.bind_lease_now(sqlx::query(&sql)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let kind: String = r.try_get("kind")?;
                Ok(WorkerLease {
                    kind: kind
                        .parse()
                        .map_err(|_| StoreError::Corrupt(format!("worker_leases.kind = {kind:?}")))?,
                    chain: parse_column(&r.try_get::<String, _>("chain")?, "worker_leases.chain")?,
                    owner: r.try_get("owner")?,
                    epoch: r.try_get("epoch")?,
                    held: r.try_get::<i64, _>("held")? == 1,
                    until: time(r.try_get("until")?)?,
                    acquired_at: time(r.try_get("acquired_at")?)?,
                })
            })
            .collect()
    }

    /// This store handle, with `fence` checked by the writes of the worker
    /// that holds it (see [`Store::begin`]).
    pub fn fenced(&self, fence: Fence) -> Store {
        Store { fence: Some(std::sync::Arc::new(fence)), ..self.clone() }
    }

    /// The fence this handle's worker writes under, if any.
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_deref()
    }

    /// Checks this handle's fence, if it has one, inside `tx` (see
    /// [`Store::begin`]).
    pub(super) async fn check_own_fence(&self, tx: &mut Transaction<'static, Any>) -> Result<(), StoreError> {
        match &self.fence {
            Some(fence) => self.check_fence(tx, fence).await,
            None => Ok(()),
        }
    }

    /// Refuses, with [`StoreError::LeaseLost`], a write under `fence` unless
    /// the lease still has its owner and epoch and has not lapsed. Inside the
    /// write's transaction: on PostgreSQL the lease row stays share-locked
    /// until commit, so no takeover (which updates the row) interleaves with
    /// the write; SQLite serialises writers anyway.
    pub(super) async fn check_fence(
        &self,
        tx: &mut Transaction<'static, Any>,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        let lock = if self.backend == Backend::Postgres { "FOR SHARE" } else { "" };
        let sql = format!(
            "SELECT epoch FROM worker_leases
             WHERE kind = $1 AND chain = $2 AND owner = $3 AND epoch = $4 AND until > {} {lock}",
            self.lease_now(5)
        );
        let query = sqlx::query(&sql)
            .bind(fence.kind.as_str())
            .bind(fence.chain.as_str())
            .bind(&fence.owner)
            .bind(fence.epoch);
        match self.bind_lease_now(query).fetch_optional(&mut **tx).await? {
            Some(_) => Ok(()),
            None => Err(StoreError::LeaseLost(format!("{fence} is no longer held: nothing written"))),
        }
    }
}
