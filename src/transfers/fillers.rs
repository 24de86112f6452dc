//! Nonce fillers written: zero-value self-transfers that fill a sending
//! address's nonce gaps, recorded before they are broadcast and followed
//! until included (their fees the platform's own cost) or superseded. On a
//! sender's handle [`Store::fenced`] by its lease, nothing is written
//! unless the lease is still held.

use alloy::primitives::U256;

use super::model::PlatformCost;
use crate::{
    chain::Chain,
    store::{Store, StoreError, gas_ledger, nonce_fillers, now_micros},
};

/// Records a signed filler before it is broadcast; a nonce already filled
/// is a conflict ([`StoreError::Raced`]), and nothing is recorded. Fenced
/// like [`super::record::record`].
pub async fn record_filler(
    store: &Store,
    chain: Chain,
    sender: &str,
    nonce: u64,
    hash: &str,
    raw: &str,
    created_at: i64,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    nonce_fillers::insert(&mut tx, chain, sender, nonce, hash, raw, created_at).await?;
    tx.commit().await?;
    Ok(())
}

/// A filler was included in `block`, at `cost`: `MINED`, and its fees
/// into the gas ledger as the platform's own cost, in one transaction.
/// Fenced like [`super::record::record`].
pub async fn filler_included(
    store: &Store,
    hash: &str,
    block: u64,
    cost: &PlatformCost,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let fee = cost.fees.iter().fold(U256::ZERO, |total, fee| total + fee.amount);
    let chain = nonce_fillers::mined(&mut tx, hash, block, fee).await?;
    gas_ledger::record_platform_cost(&mut tx, &chain, cost, now_micros()).await?;
    tx.commit().await?;
    Ok(())
}

/// A filler whose nonce another transaction used: it can never be included.
pub async fn filler_superseded(store: &Store, hash: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    nonce_fillers::superseded(&mut tx, hash).await?;
    tx.commit().await?;
    Ok(())
}
