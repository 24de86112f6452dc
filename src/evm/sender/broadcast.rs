//! Broadcasting a signed transaction and judging the node's answer, and
//! the sender's nonce counter kept in step with the chain.
//!
//! Unknown is not refused: an error or a timeout answering
//! `eth_sendRawTransaction` leaves the transaction `SENT` and its transfer
//! `SUBMITTED`, funds held and nonce used, and the same bytes are sent again
//! until the chain decides. A refusal releases the nonce and the transfer
//! only once the chain confirms it: the sender's nonce still unused at the
//! latest block (so at every final one), or used at a final block by a
//! transaction that is not one of the transfer's.

use alloy::primitives::{Address, B256, Bytes, hex};
use tracing::{info, warn};

use super::{
    super::rpc::{Broadcast, TxStatus},
    EvmSender,
};
use crate::transfers::{Outgoing, Route, SendError, SentTransaction};

/// What the chain says of a refused transaction's nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NonceUse {
    /// Unused at the latest block: the refusal holds, nothing of it can be
    /// mined before the nonce is.
    Unused,
    /// One of the given transactions is included (at least at the latest block).
    Ours,
    /// Used at a final block by a transaction that is none of the given ones:
    /// they can never be included.
    Other,
    /// Used, but not yet at a final block, by a transaction not found: wait.
    Undecided,
}

impl EvmSender {
    /// Broadcasts a transfer's first transfer transaction. Taken, or with an
    /// answer that decides nothing, the transfer is `SUBMITTED` (the
    /// transaction may be mined whatever the answer said); refused, see
    /// [`EvmSender::refused`].
    pub(super) async fn broadcast_first(&self, t: &Outgoing, tx: &SentTransaction) -> Result<(), SendError> {
        match self.send(tx).await? {
            Broadcast::Accepted => {
                self.store.mark_submitted(&t.id).await?;
                info!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, "transfer submitted");
                Ok(())
            }
            Broadcast::Unknown(reason) => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, reason, "the broadcast's answer decides nothing; the transfer is held and its transaction sent again");
                self.store.mark_submitted(&t.id).await?;
                Ok(())
            }
            Broadcast::Refused(reason) => self.refused(t, tx, &reason).await,
        }
    }

    /// A node refused a transaction of an `ACCEPTED` transfer (its first
    /// transfer transaction, or a top-up). Released only as the chain
    /// confirms; otherwise the transaction stays `SENT` and is sent again.
    pub(super) async fn refused(
        &self,
        t: &Outgoing,
        tx: &SentTransaction,
        reason: &str,
    ) -> Result<(), SendError> {
        match self.nonce_use(tx, &[tx], None).await? {
            NonceUse::Unused => {
                self.store.reject_transaction(self.config.chain, tx).await?;
                self.rejected(t, tx, reason).await
            }
            NonceUse::Ours => {
                info!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, reason, "refused, but the transaction is included");
                if tx.role != crate::transfers::TxRole::TopUp {
                    self.store.mark_submitted(&t.id).await?;
                }
                Ok(())
            }
            NonceUse::Other if t.route == Route::Authorization && !self.authorization_void(t).await? => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, "the nonce went to another transaction, but the authorization may still be used; holding");
                Ok(())
            }
            NonceUse::Other => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, reason, "the nonce went to another transaction at a final block; signing again");
                self.store.reject_transaction(self.config.chain, tx).await?;
                let from = sender_of(tx)?;
                let pending = self.rpc.nonce(from, true).await?;
                self.store.resync_nonce(self.config.chain, &tx.sender, pending).await?;
                Ok(())
            }
            NonceUse::Undecided => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, reason, "refused while its nonce is used by a transaction not yet final; holding");
                Ok(())
            }
        }
    }

    /// After a refusal the chain confirmed: a nonce conflict means someone
    /// else sent from the address, so the counter re-syncs and the transfer
    /// is tried again; any other reason fails the transfer.
    pub(super) async fn rejected(
        &self,
        t: &Outgoing,
        tx: &SentTransaction,
        reason: &str,
    ) -> Result<(), SendError> {
        let lower = reason.to_ascii_lowercase();
        if lower.contains("nonce too low") || lower.contains("underpriced") || lower.contains("already used")
        {
            let pending = self.rpc.nonce(sender_of(tx)?, true).await?;
            warn!(chain = %self.config.chain, sender = %tx.sender, nonce = tx.nonce, chain_nonce = pending, reason, "nonce in use; re-syncing with the chain");
            self.store.resync_nonce(self.config.chain, &tx.sender, pending).await?;
            return Ok(());
        }
        self.fail(t, "REJECTED_BY_NODE", reason).await
    }

    /// Who used the nonce of `tx`, among `group` (transactions at that nonce)
    /// and others; `confirmed` is the newest final block, looked up if `None`.
    pub(super) async fn nonce_use(
        &self,
        tx: &SentTransaction,
        group: &[&SentTransaction],
        confirmed: Option<u64>,
    ) -> Result<NonceUse, SendError> {
        let from = sender_of(tx)?;
        if self.rpc.nonce(from, false).await? <= tx.nonce {
            return Ok(NonceUse::Unused);
        }
        let confirmed = match confirmed {
            Some(c) => Some(c),
            None => self.confirmed_block().await?,
        };
        // Read before the receipts: a receipt missing after the nonce was
        // seen final is missing from the chain, not from a slower backend's view.
        let final_count = match confirmed {
            Some(block) => self.rpc.nonce_at(from, block).await?,
            None => 0,
        };
        if self.included(group).await?.is_some() {
            return Ok(NonceUse::Ours);
        }
        Ok(if final_count > tx.nonce { NonceUse::Other } else { NonceUse::Undecided })
    }

    /// The sender's next nonce: the store's counter, moved up to the chain's
    /// pending count if someone else sent from the address.
    pub(super) async fn next_nonce(&self, sender: Address) -> Result<u64, SendError> {
        let address = sender.to_checksum(None);
        let chain_next = self.rpc.nonce(sender, true).await?;
        match self.store.stored_nonce(self.config.chain, &address).await? {
            Some(stored) if stored >= chain_next => Ok(stored),
            Some(stored) => {
                warn!(chain = %self.config.chain, sender = %address, stored, chain_next, "nonce drift: the address sent elsewhere; re-syncing");
                self.store.resync_nonce(self.config.chain, &address, chain_next).await?;
                Ok(chain_next)
            }
            None => Ok(chain_next),
        }
    }

    /// Sends the signed bytes; a refusal of a transaction the node already
    /// has (pending or mined: sent before, its answer lost) is no refusal.
    pub(super) async fn send(&self, tx: &SentTransaction) -> Result<Broadcast, SendError> {
        let raw =
            hex::decode(&tx.raw).map_err(|_| SendError::Invalid("stored transaction is not hex".into()))?;
        let mut outcome = self.rpc.send_raw(&Bytes::from(raw)).await;
        if let Broadcast::Refused(reason) = &outcome {
            // "nonce too low" then means ours was taken, not refused, and
            // must never lead to signing the transfer again.
            let hash: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
            let known = self.rpc.transaction_status(&[hash]).await?;
            if known.get(&hash).is_some_and(|s| *s != TxStatus::Unknown) {
                info!(chain = %self.config.chain, hash = %tx.hash, reason, "the node already has this transaction");
                outcome = Broadcast::Accepted;
            }
        }
        if matches!(outcome, Broadcast::Accepted) {
            self.broadcast.lock().expect("broadcast set").insert(tx.hash.clone());
        }
        Ok(outcome)
    }
}

pub(super) fn sender_of(tx: &SentTransaction) -> Result<Address, SendError> {
    tx.sender.parse().map_err(|_| SendError::Invalid(format!("bad sender {}", tx.sender)))
}
