//! Stopped chains: a chain whose live watcher met an error no retry can cure
//! is stopped on every instance until an operator resumes it. One row per
//! stop; resuming keeps the row and records who resumed it and when.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Row, any::AnyRow};

use crate::store::{Store, StoreError, Tx, now_micros, parse_column, time};
use crate::{chain::Chain, deposits::resource::rfc3339};

/// One stop of a chain's watcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainStop {
    #[serde(skip)]
    pub id: String,
    pub chain: Chain,
    /// The error's kind (`reorg_too_deep`, `store`, …).
    pub kind: String,
    /// The error, free of secrets.
    pub reason: String,
    /// The instance whose watcher stopped.
    pub instance: String,
    #[serde(serialize_with = "rfc3339")]
    pub stopped_at: DateTime<Utc>,
    #[serde(
        serialize_with = "crate::deposits::resource::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resumed_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

const COLUMNS: &str = "id, chain, kind, reason, instance, stopped_at, resumed_at, resumed_by";

impl Store {
    /// Stops `chain`'s watcher on every instance, in `tx`; a chain already
    /// stopped stays stopped as it was.
    pub async fn stop_chain(
        &self,
        tx: &mut Tx,
        chain: Chain,
        kind: &str,
        reason: &str,
        instance: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO chain_stops (id, chain, kind, reason, instance, stopped_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(chain.as_str())
        .bind(kind)
        .bind(reason)
        .bind(instance)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// The stop in force on `chain`, if it is stopped.
    pub async fn chain_stop(&self, chain: Chain) -> Result<Option<ChainStop>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM chain_stops WHERE chain = $1 AND resumed_at IS NULL");
        let row = sqlx::query(&sql).bind(chain.as_str()).fetch_optional(&self.pool).await?;
        row.as_ref().map(stop_from_row).transpose()
    }

    /// Every stop in force, by chain.
    pub async fn chain_stops(&self) -> Result<Vec<ChainStop>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM chain_stops WHERE resumed_at IS NULL ORDER BY chain");
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        rows.iter().map(stop_from_row).collect()
    }

    /// Every stop of `chain`, resumed or not, newest first.
    pub async fn chain_stop_history(&self, chain: Chain) -> Result<Vec<ChainStop>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM chain_stops WHERE chain = $1 ORDER BY stopped_at DESC, id");
        let rows = sqlx::query(&sql).bind(chain.as_str()).fetch_all(&self.pool).await?;
        rows.iter().map(stop_from_row).collect()
    }

    /// Ends the stop in force on `chain` in `tx`, recording `by` and the
    /// time. The stop it ended, `None` when the chain was not stopped.
    pub async fn resume_chain(
        &self,
        tx: &mut Tx,
        chain: Chain,
        by: &str,
    ) -> Result<Option<ChainStop>, StoreError> {
        let sql = format!(
            "UPDATE chain_stops SET resumed_at = $1, resumed_by = $2
             WHERE chain = $3 AND resumed_at IS NULL RETURNING {COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(now_micros())
            .bind(by)
            .bind(chain.as_str())
            .fetch_optional(&mut **tx)
            .await?;
        row.as_ref().map(stop_from_row).transpose()
    }
}

fn stop_from_row(r: &AnyRow) -> Result<ChainStop, StoreError> {
    Ok(ChainStop {
        id: r.try_get("id")?,
        chain: parse_column(&r.try_get::<String, _>("chain")?, "chain_stops.chain")?,
        kind: r.try_get("kind")?,
        reason: r.try_get("reason")?,
        instance: r.try_get("instance")?,
        stopped_at: time(r.try_get("stopped_at")?)?,
        resumed_at: r.try_get::<Option<i64>, _>("resumed_at")?.map(time).transpose()?,
        resumed_by: r.try_get("resumed_by")?,
    })
}
