//! The console's sessions and failed sign-ins. Sessions are kept as the
//! keyed hash of their token only (see [`crate::people::session_hash`]),
//! each sealed with its user, the factor step that opened it and its
//! creation time (see [`crate::store::sealed`]).

use sqlx::Row;

use crate::people::resource::Session;
use crate::store::{
    Store, StoreError, Tx,
    console::{LIVE_OPERATOR, USER_COLUMNS, user},
    sealed::{CONSOLE_SESSIONS, CONSOLE_USERS},
};

impl Store {
    /// The failed sign-ins counted under `email_key` (an email and a client
    /// address, or a client address): their count and the last one's time.
    pub async fn sign_in_failures(&self, email_key: &str) -> Result<(i64, i64), StoreError> {
        let row =
            sqlx::query("SELECT failures, last_failed_at FROM console_sign_in_failures WHERE email_key = $1")
                .bind(email_key)
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some(row) => (row.try_get("failures")?, row.try_get("last_failed_at")?),
            None => (0, 0),
        })
    }

    /// The unended session `hash` of a present user, when both rows are
    /// sealed as they stand: a session or a user written with plain SQL is
    /// no session.
    pub async fn session(&self, hash: &str) -> Result<Option<Session>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS}, s.csrf, s.last_seen_at, s.created_at AS started_at, s.factor, {}, {}
             FROM console_sessions s JOIN console_users u ON u.id = s.user_id
             WHERE s.id_hash = $1 AND s.ended_at IS NULL AND u.removed_at IS NULL AND {LIVE_OPERATOR}",
            CONSOLE_SESSIONS.columns("s"),
            CONSOLE_USERS.columns("u"),
        ))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let user = user(&row)?;
        if !CONSOLE_SESSIONS.authentic_in(&row, "s", hash)?
            || !CONSOLE_USERS.authentic_in(&row, "u", &user.id)?
        {
            tracing::warn!(user = %user.id, "a console session or its user's row was written outside the service");
            return Ok(None);
        }
        Ok(Some(Session {
            id_hash: hash.to_string(),
            user,
            csrf: row.try_get("csrf")?,
            last_seen_at: row.try_get("last_seen_at")?,
            started_at: row.try_get("started_at")?,
            factor: row.try_get::<i64, _>("factor")? != 0,
        }))
    }
}

/// Counts a sign-in try under `email_key` at `now` as failed before it is
/// checked (a success forgets it), in `tx`, setting the count to `next` if
/// it is still `seen`: `false` when another try counted meanwhile.
pub async fn claim_sign_in_try(
    tx: &mut Tx,
    email_key: &str,
    seen: i64,
    next: i64,
    now: i64,
) -> Result<bool, StoreError> {
    let done = if seen == 0 {
        sqlx::query(
            // A row whose count went back to none (a try that
            // succeeded) counts again as a new one.
            "INSERT INTO console_sign_in_failures (email_key, failures, last_failed_at) VALUES ($1, 1, $2)
             ON CONFLICT (email_key) DO UPDATE SET failures = 1, last_failed_at = $2
             WHERE console_sign_in_failures.failures = 0",
        )
        .bind(email_key)
        .bind(now)
        .execute(&mut **tx)
        .await?
    } else {
        sqlx::query(
            "UPDATE console_sign_in_failures SET failures = $4, last_failed_at = $2
             WHERE email_key = $1 AND failures = $3",
        )
        .bind(email_key)
        .bind(now)
        .bind(seen)
        .bind(next)
        .execute(&mut **tx)
        .await?
    };
    Ok(done.rows_affected() == 1)
}

/// Takes one try back from the count of `email_key` in `tx` (a try counted
/// before it succeeded).
pub async fn uncount_sign_in_try(tx: &mut Tx, email_key: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE console_sign_in_failures SET failures = failures - 1 WHERE email_key = $1 AND failures > 0",
    )
    .bind(email_key)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Forgets in `tx` the failed sign-ins whose last one came before `before`
/// (micros); how many.
pub async fn purge_sign_in_failures(tx: &mut Tx, before: i64) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM console_sign_in_failures WHERE last_failed_at < $1")
        .bind(before)
        .execute(&mut **tx)
        .await?;
    Ok(done.rows_affected())
}

/// Forgets in `tx` the failed sign-ins of `email_key` (after a successful one).
pub async fn clear_sign_in_failures(tx: &mut Tx, email_key: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM console_sign_in_failures WHERE email_key = $1")
        .bind(email_key)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Starts a session of `user_id` in `tx`, sealed; `factor`: opened with
/// the second factor as well as the password.
pub async fn insert_session(
    tx: &mut Tx,
    hash: &str,
    (user_id, factor): (&str, bool),
    csrf: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO console_sessions (id_hash, user_id, csrf, created_at, last_seen_at, factor)
         VALUES ($1, $2, $3, $4, $4, $5)",
    )
    .bind(hash)
    .bind(user_id)
    .bind(csrf)
    .bind(now)
    .bind(i64::from(factor))
    .execute(&mut **tx)
    .await?;
    CONSOLE_SESSIONS.seal(tx, hash).await
}

/// Records in `tx` that session `hash` was used at `now`.
pub async fn touch_session(tx: &mut Tx, hash: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE console_sessions SET last_seen_at = $1 WHERE id_hash = $2 AND last_seen_at < $1")
        .bind(now)
        .bind(hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Ends session `hash` in `tx`, on every instance.
pub async fn end_session(tx: &mut Tx, hash: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE console_sessions SET ended_at = $1 WHERE id_hash = $2 AND ended_at IS NULL")
        .bind(now)
        .bind(hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
