//! Public keys paired with API keys, and the `jti` of every accepted request
//! token, kept in the store so that a token is accepted once by the whole
//! fleet of instances sharing it.

use sqlx::Row;

use super::{Backend, StoreError, Tx, now_micros, sealed::API_KEYS};
use crate::request_signature::PublicKey;

/// Seconds a `jti` is kept past its `keep_until` before it is purged or
/// taken again: more than the clocks of the instances sharing a store may
/// disagree, so an instance whose clock runs fast cannot forget a `jti`
/// that another, slower one still accepts a token with. On PostgreSQL the
/// database's clock judges besides; SQLite serves one instance.
pub const INSTANCE_SKEW_SECS: i64 = 300;

/// "Now" in seconds for the `jti` statements: the database's clock on
/// PostgreSQL, the bound parameter `$param` (the instance's) on SQLite.
fn seconds_now(backend: Backend, param: usize) -> String {
    match backend {
        Backend::Postgres => format!("({} / 1000000)", super::clock::POSTGRES_NOW),
        Backend::Sqlite => format!("${param}"),
    }
}

/// Records in `tx` a request token's `jti` for `key` until `keep_until`
/// (seconds); `false` when the key already used it (a replay). The primary
/// key decides, so two instances racing on one token cannot both accept
/// it. A `jti` kept past its time but not yet purged is taken again, as if
/// it had been purged.
pub(crate) async fn record_token(
    tx: &mut Tx,
    key: &str,
    jti: &str,
    keep_until: i64,
    now: i64,
) -> Result<bool, StoreError> {
    let backend = Backend::of(tx);
    let sql = format!(
        "INSERT INTO request_token_ids (api_key_id, jti, keep_until) VALUES ($1, $2, $3)
         ON CONFLICT (api_key_id, jti) DO UPDATE SET keep_until = excluded.keep_until
         WHERE request_token_ids.keep_until < {} - {INSTANCE_SKEW_SECS}",
        seconds_now(backend, 4)
    );
    let recorded = sqlx::query(&sql).bind(key).bind(jti).bind(keep_until);
    let recorded = bind_seconds(backend, recorded, now).execute(&mut **tx).await?;
    Ok(recorded.rows_affected() == 1)
}

/// Deletes in `tx` the `jti`s no token can be accepted with any more on
/// any instance: kept until more than [`INSTANCE_SKEW_SECS`] before now
/// (`now`, seconds, on SQLite; the database's clock on PostgreSQL);
/// returns how many.
pub(crate) async fn purge_tokens(tx: &mut Tx, now: i64) -> Result<u64, StoreError> {
    let backend = Backend::of(tx);
    let sql = format!(
        "DELETE FROM request_token_ids WHERE keep_until < {} - {INSTANCE_SKEW_SECS}",
        seconds_now(backend, 1)
    );
    let purged = bind_seconds(backend, sqlx::query(&sql), now).execute(&mut **tx).await?;
    Ok(purged.rows_affected())
}

/// Binds the instance's `now` (seconds) where [`seconds_now`] asked for
/// it: on SQLite only.
fn bind_seconds<'q>(
    backend: Backend,
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    now: i64,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    match backend {
        Backend::Postgres => query,
        Backend::Sqlite => query.bind(now),
    }
}

/// Pairs the active key `id` with `public_key` in `tx` (replacing an earlier
/// one): from then on every request with the key must be signed by it.
/// Its organization; `None` when no active key has the id.
pub async fn pair_api_key(
    tx: &mut Tx,
    id: &str,
    public_key: &PublicKey,
) -> Result<Option<String>, StoreError> {
    API_KEYS.check(tx, id).await?;
    let row = sqlx::query(
        "UPDATE api_keys SET public_key_pem = $1, signature_algorithm = $2, paired_at = $3
         WHERE id = $4 AND revoked_at IS NULL RETURNING organization_id",
    )
    .bind(public_key.pem())
    .bind(public_key.algorithm().as_str())
    .bind(now_micros())
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    API_KEYS.seal(tx, id).await?;
    Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
}

/// Removes a key's public key in `tx`: its requests need no signature any
/// more. Its organization when it was paired; `None` otherwise.
pub async fn unpair_api_key(tx: &mut Tx, id: &str) -> Result<Option<String>, StoreError> {
    API_KEYS.check(tx, id).await?;
    let row = sqlx::query(
        "UPDATE api_keys SET public_key_pem = NULL, signature_algorithm = NULL, paired_at = NULL
         WHERE id = $1 AND public_key_pem IS NOT NULL RETURNING organization_id",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    API_KEYS.seal(tx, id).await?;
    Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
}

impl super::Store {
    /// The public key (PEM) of every paired API key, by key id.
    pub async fn api_key_public_keys(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let rows = sqlx::query("SELECT id, public_key_pem FROM api_keys WHERE public_key_pem IS NOT NULL")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok((row.try_get("id")?, row.try_get("public_key_pem")?))).collect()
    }
}
