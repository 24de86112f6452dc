//! A transfer's step that failed and waits to be tried again, and its
//! count cleared once a step succeeds (the policy is
//! [`super::after_step`]). On a sender's handle [`Store::fenced`] by its
//! lease, nothing is written unless the lease is still held.

use crate::store::{Store, StoreError, transfer_txs};

/// The transfer's step failed (`error`, retryable): not tried again
/// before `retry_at` (microseconds), its `retries` counted.
pub async fn defer_transfer(
    store: &Store,
    transfer_id: &str,
    retries: u32,
    retry_at: i64,
    error: &str,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    transfer_txs::defer(&mut tx, transfer_id, retries, retry_at, error).await?;
    tx.commit().await?;
    Ok(())
}

/// The transfer's step succeeded again: no more waiting.
pub async fn clear_retries(store: &Store, transfer_id: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    transfer_txs::clear_retries(&mut tx, transfer_id).await?;
    tx.commit().await?;
    Ok(())
}
