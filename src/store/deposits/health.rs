//! What the live watchers report about themselves, for health checks and
//! metrics: read by `/readyz`, `/metrics` and `custody-indexer health`, which
//! may run in another process than the watchers.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::store::{Store, StoreError, Tx, now_micros, parse_column, time, to_i64};
use crate::{chain::Chain, deposits::resource::DepositStatus};

/// A chain's last reported state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHealth {
    pub chain: Chain,
    /// The head the watcher last saw (Solana: the confirmed slot).
    pub head: Option<u64>,
    /// The highest block (slot) indexed.
    pub indexed: Option<u64>,
    /// When a step last succeeded: every step reads the chain, so this is
    /// also the time of the last successful RPC call.
    pub checked_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_error_kind: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// The chain's block time as the watcher last measured it.
    pub block_time: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepositCount {
    pub chain: Chain,
    pub status: DepositStatus,
    pub count: u64,
}

impl Store {
    /// Records a successful step of a chain's watcher in `tx`.
    pub async fn record_check(
        &self,
        tx: &mut Tx,
        chain: Chain,
        head: u64,
        indexed: u64,
        block_time: Option<std::time::Duration>,
    ) -> Result<(), StoreError> {
        let micros = block_time.map(|t| i64::try_from(t.as_micros()).unwrap_or(i64::MAX));
        sqlx::query(
            "INSERT INTO chain_health (chain, head, indexed, checked_at, block_time_micros) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (chain) DO UPDATE SET head = $2, indexed = $3, checked_at = $4,
                 block_time_micros = COALESCE($5, chain_health.block_time_micros)",
        )
        .bind(chain.as_str())
        .bind(to_i64(head)?)
        .bind(to_i64(indexed)?)
        .bind(now_micros())
        .bind(micros)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Records a failed step in `tx`.
    pub async fn record_failure(
        &self,
        tx: &mut Tx,
        chain: Chain,
        kind: &str,
        message: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO chain_health (chain, last_error, last_error_kind, last_error_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (chain) DO UPDATE SET last_error = $2, last_error_kind = $3, last_error_at = $4",
        )
        .bind(chain.as_str())
        .bind(message)
        .bind(kind)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Every chain a watcher has reported on, by chain.
    pub async fn chain_health(&self) -> Result<Vec<ChainHealth>, StoreError> {
        let rows = sqlx::query(
            "SELECT chain, head, indexed, checked_at, last_error, last_error_kind, last_error_at,
                    block_time_micros
             FROM chain_health ORDER BY chain",
        )
        .fetch_all(&self.pool)
        .await?;
        let optional_time = |micros: Option<i64>| micros.map(time).transpose();
        rows.iter()
            .map(|r| {
                Ok(ChainHealth {
                    chain: parse_column(&r.try_get::<String, _>("chain")?, "chain_health.chain")?,
                    head: r.try_get::<Option<i64>, _>("head")?.map(|v| v as u64),
                    indexed: r.try_get::<Option<i64>, _>("indexed")?.map(|v| v as u64),
                    checked_at: optional_time(r.try_get("checked_at")?)?,
                    last_error: r.try_get("last_error")?,
                    last_error_kind: r.try_get("last_error_kind")?,
                    last_error_at: optional_time(r.try_get("last_error_at")?)?,
                    block_time: r
                        .try_get::<Option<i64>, _>("block_time_micros")?
                        .and_then(|m| u64::try_from(m).ok())
                        .map(std::time::Duration::from_micros),
                })
            })
            .collect()
    }

    /// How many deposits each chain holds in each status.
    pub async fn deposit_counts(&self) -> Result<Vec<DepositCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT chain, status, COUNT(*) AS n FROM deposits GROUP BY chain, status ORDER BY chain, status",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DepositCount {
                    chain: parse_column(&r.try_get::<String, _>("chain")?, "deposits.chain")?,
                    status: parse_column(&r.try_get::<String, _>("status")?, "deposits.status")?,
                    count: r.try_get::<i64, _>("n")? as u64,
                })
            })
            .collect()
    }

    /// Deliveries of events to webhooks not yet done (pending or retrying).
    pub async fn delivery_backlog(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM deliveries WHERE state = 'PENDING'")
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok(n as u64)
    }

    /// Reorgs recorded per chain.
    pub async fn reorg_counts(&self) -> Result<Vec<(Chain, u64)>, StoreError> {
        let rows = sqlx::query("SELECT chain, COUNT(*) AS n FROM reorgs GROUP BY chain ORDER BY chain")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    parse_column(&r.try_get::<String, _>("chain")?, "reorgs.chain")?,
                    r.try_get::<i64, _>("n")? as u64,
                ))
            })
            .collect()
    }
}
