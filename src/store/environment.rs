//! The environment a store was first started in (see
//! [`crate::environment`]).

use sqlx::Row;

use super::{Store, StoreError, Tx, now_micros, parse_column};
use crate::environment::Environment;

impl Store {
    /// The environment `run` or `serve` first started the store in, if any.
    pub async fn environment(&self) -> Result<Option<Environment>, StoreError> {
        let row = sqlx::query("SELECT environment FROM store_environment WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| parse_column(&r.try_get::<String, _>("environment")?, "store_environment.environment"))
            .transpose()
    }

    /// Whether the identities' audit trail holds a decision of the sandbox
    /// compliance provider.
    pub async fn holds_sandbox_decisions(&self) -> Result<bool, StoreError> {
        let row =
            sqlx::query("SELECT 1 AS found FROM identity_actions WHERE actor = 'provider:sandbox' LIMIT 1")
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }
}

/// Stamps the store with `environment` in `tx` unless it has one already.
pub(crate) async fn stamp(tx: &mut Tx, environment: Environment) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO store_environment (id, environment, stamped_at) VALUES (1, $1, $2)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(environment.as_str())
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}
