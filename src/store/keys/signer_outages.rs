//! The spans in which the signer did not answer, and the condition that
//! shows one in force to `health` and `/metrics` (which never open the
//! token themselves).

use sqlx::Row;

use crate::store::{Store, StoreError, Tx, conditions, now_micros};

/// The kind of the condition of a signer that does not answer.
pub const SIGNER_UNREACHABLE: &str = "signer_unreachable";

/// How far back a closed span is read: one that ended earlier than this
/// can only matter to a transfer accepted longer ago, waiting all along.
const OUTAGES_READ_BACK_MICROS: i64 = 30 * 24 * 3_600 * 1_000_000;

/// The signer `subject` did not answer at `now` (`message` says how, free
/// of secrets): opens its span unless one is open, and raises (or
/// refreshes) its condition.
pub(crate) async fn unreachable(
    tx: &mut Tx,
    subject: &str,
    message: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO signer_outages (subject, since, until, message) VALUES ($1, $2, NULL, $3)
         ON CONFLICT (subject) WHERE until IS NULL DO UPDATE SET message = $3",
    )
    .bind(subject)
    .bind(now)
    .bind(message)
    .execute(&mut **tx)
    .await?;
    conditions::raise(tx, None, SIGNER_UNREACHABLE, subject, message).await
}

/// The signer `subject` answered at `now`: closes its open span, if any,
/// and clears its condition.
pub(crate) async fn answers(tx: &mut Tx, subject: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE signer_outages SET until = $2 WHERE subject = $1 AND until IS NULL")
        .bind(subject)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    conditions::clear(tx, None, SIGNER_UNREACHABLE, subject).await
}

impl Store {
    /// Every signer's spans that are open or ended in the last 30 days, as
    /// `since` and `until` (`None` while open), microseconds.
    pub async fn signer_outages(&self) -> Result<Vec<(i64, Option<i64>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT since, until FROM signer_outages WHERE until IS NULL OR until > $1 ORDER BY since",
        )
        .bind(now_micros() - OUTAGES_READ_BACK_MICROS)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| Ok((row.try_get("since")?, row.try_get("until")?))).collect()
    }

    /// The outages open now, by signer: its name and what it said last.
    pub async fn open_signer_outages(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows =
            sqlx::query("SELECT subject, message FROM signer_outages WHERE until IS NULL ORDER BY subject")
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(|row| Ok((row.try_get("subject")?, row.try_get("message")?))).collect()
    }
}
