//! What becomes of a sender's signed transactions: a node accepted one (its
//! transfer `SUBMITTED`), refused one (`REJECTED`, its nonce given back), the
//! chain included one or took it back; and the sender's nonce counter kept
//! up with the chain. On a sender's handle [`Store::fenced`] by its lease,
//! nothing is written unless the lease is still held.

use alloy::primitives::U256;

use super::model::{SentTransaction, TxState};
use crate::{
    chain::Chain,
    store::{Store, StoreError, gas_ledger, now_micros, transfer_txs},
};

/// A node accepted the transfer's transaction: `SUBMITTED`, announced.
pub async fn mark_submitted(store: &Store, transfer_id: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let now = now_micros();
    transfer_txs::mark_submitted(&mut tx, transfer_id, now).await?;
    gas_ledger::announce_transfer(&mut tx, transfer_id, now).await?;
    tx.commit().await?;
    store.wake_deliveries();
    Ok(())
}

/// Records what the chain says of a transaction: included (`MINED`,
/// `REVERTED`, with its block and fee) or back to `SENT` after a reorg.
pub async fn update_transaction(
    store: &Store,
    hash: &str,
    state: TxState,
    block: Option<(u64, &str)>,
    fee: Option<U256>,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    transfer_txs::update_state(&mut tx, hash, state, block, fee).await?;
    tx.commit().await?;
    Ok(())
}

/// A transaction the node refused: it is `REJECTED`, and when it held a
/// new nonce that nothing else uses, the nonce is given back.
pub async fn reject_transaction(
    store: &Store,
    chain: Chain,
    sent: &SentTransaction,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    transfer_txs::reject(&mut tx, &sent.hash).await?;
    if transfer_txs::nonce_users(&mut tx, chain, &sent.sender, sent.nonce).await? == 0 {
        transfer_txs::give_back_nonce(&mut tx, chain, &sent.sender, sent.nonce).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Moves a sender's next nonce up to what the chain has counted (someone
/// else sent from the address): never down. Whether it moved.
pub async fn resync_nonce(
    store: &Store,
    chain: Chain,
    address: &str,
    chain_next: u64,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let moved = transfer_txs::resync_nonce(&mut tx, chain, address, chain_next).await?;
    tx.commit().await?;
    Ok(moved)
}
