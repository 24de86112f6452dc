//! Conditions kept in the store while they last (see [`crate::alarm`]):
//! raised and cleared by the senders, the quorum steps, the reconciliation
//! and the webhook delivery workers, each in a short transaction of its
//! own, so that `health` and `/readyz`, which may run in another process,
//! can show them.

use crate::{
    chain::Chain,
    store::{Store, StoreError, conditions},
};

/// Raises (or, raised already, refreshes) a condition; `since` stays the
/// first time it was raised. `message` must be free of secrets.
pub async fn raise(
    store: &Store,
    chain: Option<Chain>,
    kind: &str,
    subject: &str,
    message: &str,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    conditions::raise(&mut tx, chain, kind, subject, message).await?;
    tx.commit().await?;
    Ok(())
}

/// Clears a condition; clearing one not raised is a no-op.
pub async fn clear(store: &Store, chain: Option<Chain>, kind: &str, subject: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    conditions::clear(&mut tx, chain, kind, subject).await?;
    tx.commit().await?;
    Ok(())
}

/// Clears every condition of `kind`, whatever it concerns.
pub async fn clear_kind(store: &Store, kind: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    conditions::clear_kind(&mut tx, kind).await?;
    tx.commit().await?;
    Ok(())
}
