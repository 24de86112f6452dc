//! What the store keeps of the requests a key authenticates: its last use,
//! and the `jti` of every signed request token it accepted, so that a token
//! is accepted once by the whole fleet of instances sharing the store.

use crate::store::{Store, StoreError, organizations, request_signatures};

/// Records that key `id` authenticated a request at `now`, at most once a
/// minute.
pub async fn used(store: &Store, id: &str, now: i64) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    organizations::used_api_key(&mut tx, id, now).await?;
    tx.commit().await?;
    Ok(())
}

/// Records a request token's `jti` for `key` until `keep_until`
/// (seconds); `false` when the key already used it (a replay). The
/// primary key decides, so two instances racing on one token cannot
/// both accept it. A `jti` kept past its time but not yet purged is
/// taken again, as if it had been purged.
pub async fn record_request_token(
    store: &Store,
    key: &str,
    jti: &str,
    keep_until: i64,
    now: i64,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let recorded = request_signatures::record_token(&mut tx, key, jti, keep_until, now).await?;
    tx.commit().await?;
    Ok(recorded)
}

/// Deletes the `jti`s no token can be accepted with any more on any
/// instance: kept until more than [`crate::store::INSTANCE_SKEW_SECS`]
/// before now (`now`, seconds, on SQLite; the database's clock on
/// PostgreSQL); returns how many.
pub async fn purge_request_tokens(store: &Store, now: i64) -> Result<u64, StoreError> {
    let mut tx = store.begin().await?;
    let purged = request_signatures::purge_tokens(&mut tx, now).await?;
    tx.commit().await?;
    Ok(purged)
}
