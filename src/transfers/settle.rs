//! A transfer's end written: its terminal status, its fees into the gas
//! ledger and its event, in one transaction.

use super::model::Settlement;
use crate::store::{Store, StoreError, gas_ledger};

/// Ends a transfer: its terminal status, the fees into the gas ledger and
/// its event, in one transaction. A transfer already terminal is left
/// alone. On a sender's fenced handle, only while its lease is held.
pub async fn settle_transfer(store: &Store, id: &str, settlement: &Settlement) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    gas_ledger::settle_in(&mut tx, id, settlement).await?;
    tx.commit().await?;
    store.wake_deliveries();
    Ok(())
}
