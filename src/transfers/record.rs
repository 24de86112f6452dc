//! A transfer's transaction recorded before it is broadcast, once the
//! one-lineage rule ([`super::lineage`]) holds under the transfer's row
//! lock; the EIP-3009 authorization's terms kept before any node sees the
//! authorization. Either is refused to a client transfer whose source may
//! no longer send ([`super::rules::may_sign`]).

use super::{
    lineage::refusal,
    model::{Lineage, SentTransaction},
    resource::TransferStatus,
    rules::may_sign,
};
use crate::{
    chain::Chain,
    store::{Store, StoreError, Tx, transfer_lineage as rows, transfer_txs},
};

/// Persists a signed transaction before it is broadcast, if `lineage`
/// still holds for the transfer (checked in the same transaction, under
/// the transfer's row lock); otherwise [`StoreError::Raced`] and nothing
/// is recorded, so the transaction must not be broadcast. An EVM
/// transaction that starts a lineage takes a new nonce from the sender's
/// counter by compare-and-set (the counter must still be at `nonce`, or
/// absent), so a nonce is never given twice nor skipped; a replacement
/// reuses its predecessor's nonce. `window_ends_at` (microseconds) is kept
/// if the transfer has none yet. On a handle [`Store::fenced`] by the
/// chain's sender lease, nothing is recorded unless the lease is still
/// held.
pub async fn record(
    store: &Store,
    (transfer_id, chain): (&str, Chain),
    sent: &SentTransaction,
    lineage: Lineage<'_>,
    window_ends_at: Option<i64>,
    authorization_nonce: Option<&str>,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let nonces = crate::family::rules::ordered_nonces(chain.family());
    check(&mut tx, transfer_id, sent, lineage, nonces).await?;
    if lineage == Lineage::Start && nonces {
        transfer_txs::take_nonce(&mut tx, chain, &sent.sender, sent.nonce).await?;
    }
    if !transfer_txs::insert(&mut tx, transfer_id, chain, sent).await? {
        return Err(StoreError::Raced(format!("transaction {} is recorded already", sent.hash)));
    }
    transfer_txs::mark_transfer(&mut tx, transfer_id, sent, window_ends_at, authorization_nonce).await?;
    tx.commit().await?;
    Ok(())
}

/// Refuses `sent` with [`StoreError::Raced`] unless `lineage` holds for
/// the transfer, and a new lineage of a client transfer with
/// [`StoreError::Unsendable`] once its source may no longer send (see
/// [`gate`]); takes the transfer's row lock.
async fn check(
    tx: &mut Tx,
    transfer_id: &str,
    sent: &SentTransaction,
    lineage: Lineage<'_>,
    same_nonce: bool,
) -> Result<(), StoreError> {
    let status = rows::lock(tx, transfer_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("transfer {transfer_id}")))?;
    let live = rows::live(tx, transfer_id).await?;
    if let Some(reason) = refusal(status, &live, sent, lineage, same_nonce) {
        return Err(StoreError::Raced(format!(
            "transaction {} not recorded for transfer {transfer_id}: {reason}",
            sent.hash
        )));
    }
    // A new lineage (a gas top-up, or the client's own transaction), or on
    // Solana a transaction signed again after the last provably expired.
    // An EVM replacement keeps its predecessor's nonce and moves nothing
    // more: the predecessor may be included anyway.
    if lineage == Lineage::Start || !same_nonce { gate(tx, transfer_id).await } else { Ok(()) }
}

/// Refuses with [`StoreError::Unsendable`] a client transfer whose source
/// may no longer send (see [`may_sign`]), read after the transfer's row
/// lock: an identity's change that committed first is seen, and one that
/// commits later finds the transaction recorded. The platform's own
/// transfers (a mint, a refund) are not the client's to stop.
async fn gate(tx: &mut Tx, transfer_id: &str) -> Result<(), StoreError> {
    let Some(source) = rows::source(tx, transfer_id).await? else { return Ok(()) };
    may_sign(source).map_err(StoreError::Unsendable)
}

/// The EIP-3009 authorization terms of an `ACCEPTED` transfer, kept before
/// any node sees the authorization: `nonce` and `valid_before`
/// (microseconds) if it has none yet, otherwise those it has, which every
/// later signing reuses (so there is never a second authorization). From
/// then on the transfer is no longer unsent: it is neither expired nor
/// failed by a suspension while the authorization may execute. A transfer
/// no longer `ACCEPTED` without terms is [`StoreError::Raced`]. On a handle
/// [`Store::fenced`] by the chain's sender lease, nothing is kept unless
/// the lease is still held.
pub async fn reserve_authorization(
    store: &Store,
    id: &str,
    nonce: &str,
    valid_before: i64,
) -> Result<(String, i64), StoreError> {
    let mut tx = store.begin().await?;
    // The row lock first, then the source: once reserved, the
    // authorization is signed and leaves with the estimate.
    let reserving = rows::lock(&mut tx, id).await? == Some(TransferStatus::Accepted);
    if reserving && rows::unauthorized(&mut tx, id).await? {
        gate(&mut tx, id).await?;
    }
    let Some(terms) = rows::authorize(&mut tx, id, nonce, valid_before).await? else {
        return Err(StoreError::Raced(format!("transfer {id} is no longer ACCEPTED")));
    };
    tx.commit().await?;
    Ok(terms)
}
