//! The heights a reconciliation holds to, each in a transaction of its own:
//! an address's baseline, recorded once (two reconciliations at once keep
//! the first), and its checkpoint, moved up only.

use super::{Anchor, Baseline};
use crate::{
    chain::Chain,
    store::{
        Store, StoreError,
        reconcile::{insert_baseline, raise_checkpoint},
    },
};

/// Records a baseline unless one is recorded (two reconciliations at once
/// keep the first): the one recorded.
pub async fn record_baseline(
    store: &Store,
    chain: Chain,
    address: &str,
    asset: &str,
    at: Anchor,
    source: Baseline,
) -> Result<(Anchor, Baseline), StoreError> {
    let mut tx = store.begin().await?;
    insert_baseline(&mut tx, (chain, address, asset), at, source).await?;
    tx.commit().await?;
    store
        .reconcile_baseline(chain, address, asset)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("the baseline of {address} in {asset}")))
}

/// Moves the checkpoint of `address`'s `asset` up to `at`, never down.
pub async fn record_checkpoint(
    store: &Store,
    chain: Chain,
    address: &str,
    asset: &str,
    at: Anchor,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    raise_checkpoint(&mut tx, (chain, address, asset), at).await?;
    tx.commit().await?;
    Ok(())
}
