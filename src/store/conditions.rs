//! Conditions raised by the senders and the webhook delivery workers (see
//! [`crate::alarm`]), kept while they last so that `health` and `/readyz`,
//! which may run in another process, can show them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;

use super::{Store, StoreError, Tx, now_micros, parse_column, time};
use crate::{chain::Chain, deposits::resource::rfc3339};

/// The kind of a webhook's condition whose endpoint fails its deliveries;
/// deleting the webhook clears it.
pub const WEBHOOK_FAILING: &str = "webhook_failing";

/// A condition in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// The chain it concerns; `None` for a webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain: Option<Chain>,
    /// `sponsor_unfunded`, `webhook_failing`.
    pub kind: String,
    /// What it concerns: a sponsor's address, a webhook's id.
    pub subject: String,
    /// What is wrong and what to do, free of secrets.
    pub message: String,
    #[serde(serialize_with = "rfc3339")]
    pub since: DateTime<Utc>,
    /// When a worker last found it still in force.
    #[serde(serialize_with = "rfc3339")]
    pub seen_at: DateTime<Utc>,
}

/// Raises (or, raised already, refreshes) a condition in `tx`; `since`
/// stays the first time it was raised. `message` must be free of secrets.
pub(crate) async fn raise(
    tx: &mut Tx,
    chain: Option<Chain>,
    kind: &str,
    subject: &str,
    message: &str,
) -> Result<(), StoreError> {
    let now = now_micros();
    sqlx::query(
        "INSERT INTO conditions (chain, kind, subject, message, since, seen_at) VALUES ($1, $2, $3, $4, $5, $5)
         ON CONFLICT (chain, kind, subject) DO UPDATE SET message = $4, seen_at = $5",
    )
    .bind(chain.map_or("", |c| c.as_str()))
    .bind(kind)
    .bind(subject)
    .bind(message)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Clears a condition in `tx`; clearing one not raised is a no-op.
pub(crate) async fn clear(
    tx: &mut Tx,
    chain: Option<Chain>,
    kind: &str,
    subject: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM conditions WHERE chain = $1 AND kind = $2 AND subject = $3")
        .bind(chain.map_or("", |c| c.as_str()))
        .bind(kind)
        .bind(subject)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Clears in `tx` every condition of `kind` last raised before `before`
/// (microseconds): those a sweep that raised each in force did not find.
pub(crate) async fn clear_unseen(tx: &mut Tx, kind: &str, before: i64) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM conditions WHERE kind = $1 AND seen_at < $2")
        .bind(kind)
        .bind(before)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Clears in `tx` every condition of `kind`, whatever it concerns.
pub(crate) async fn clear_kind(tx: &mut Tx, kind: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM conditions WHERE kind = $1").bind(kind).execute(&mut **tx).await?;
    Ok(())
}

impl Store {
    /// Every condition in force, by chain, kind and subject.
    pub async fn conditions(&self) -> Result<Vec<Condition>, StoreError> {
        let rows = sqlx::query(
            "SELECT chain, kind, subject, message, since, seen_at FROM conditions ORDER BY chain, kind, subject",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let chain: String = r.try_get("chain")?;
                Ok(Condition {
                    // A chain a newer release knows and this one does not:
                    // the condition still shows, as no chain's.
                    chain: parse_column(&chain, "conditions.chain").ok(),
                    kind: r.try_get("kind")?,
                    subject: r.try_get("subject")?,
                    message: r.try_get("message")?,
                    since: time(r.try_get("since")?)?,
                    seen_at: time(r.try_get("seen_at")?)?,
                })
            })
            .collect()
    }
}
