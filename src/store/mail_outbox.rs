//! Queued mail's rows: written in the transaction of what a message says,
//! claimed by one instance at a time, marked sent (its body cleared) or
//! put back for a later try.

use sqlx::Row;

use super::{Store, StoreError, Tx};
use crate::mail::outgoing::Outgoing;

/// Queues `message` (its body sealed), due at once.
pub async fn insert(tx: &mut Tx, message: &Outgoing, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO mail_outbox (id, to_address, subject, body, created_at, next_at, attempts)
         VALUES ($1, $2, $3, $4, $5, $5, 0)",
    )
    .bind(&message.id)
    .bind(&message.to)
    .bind(&message.subject)
    .bind(&message.sealed_body)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Claims in `tx` the oldest message due at `now` for `lease`
/// microseconds: another instance claims it only once the lease has passed
/// (a sender that died mid-send), so one message is sent by one instance
/// at a time.
pub(crate) async fn claim(tx: &mut Tx, now: i64, lease: i64) -> Result<Option<Outgoing>, StoreError> {
    let row = sqlx::query(
        "UPDATE mail_outbox SET claimed_until = $1, attempts = attempts + 1
         WHERE id = (SELECT id FROM mail_outbox WHERE sent_at IS NULL AND next_at <= $2
                     AND (claimed_until IS NULL OR claimed_until < $2) ORDER BY next_at, id LIMIT 1)
         AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until < $2)
         RETURNING id, to_address, subject, body, attempts",
    )
    .bind(now + lease)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|row| {
        Ok(Outgoing {
            id: row.try_get("id")?,
            to: row.try_get("to_address")?,
            subject: row.try_get("subject")?,
            sealed_body: row.try_get::<Option<String>, _>("body")?.unwrap_or_default(),
            attempts: row.try_get("attempts")?,
        })
    })
    .transpose()
}

/// Message `id` sent, in `tx`: its body cleared for good.
pub(crate) async fn mark_sent(tx: &mut Tx, id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE mail_outbox SET sent_at = $1, body = NULL, claimed_until = NULL WHERE id = $2")
        .bind(now)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Message `id` not sent, in `tx`: tried again at `next_at`, `error` kept.
pub(crate) async fn mark_failed(tx: &mut Tx, id: &str, next_at: i64, error: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE mail_outbox SET next_at = $1, last_error = $2, claimed_until = NULL WHERE id = $3")
        .bind(next_at)
        .bind(error)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Store {
    /// Messages not sent yet, and the oldest one's age in microseconds.
    pub async fn mail_unsent(&self, now: i64) -> Result<(i64, i64), StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM mail_outbox WHERE sent_at IS NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        let oldest: Option<i64> = row.try_get("oldest")?;
        Ok((row.try_get("n")?, oldest.map_or(0, |at| now - at)))
    }
}
