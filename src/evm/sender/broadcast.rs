//! Broadcasting a signed transaction and judging the node's answer, and
//! the sender's nonce counter kept in step with the chain.
//!
//! Unknown is not refused: an error or a timeout answering
//! `eth_sendRawTransaction` leaves the transaction `SENT` and its transfer
//! `SUBMITTED`, funds held and nonce used, and the same bytes are sent again
//! until the chain decides. A refusal releases the nonce and the transfer
//! only when no node can hold the transaction (see [`EvmSender::refused`]);
//! otherwise the chain decides: the nonce used at a final block by one of
//! the transfer's transactions, or by another. What a node would refuse for
//! the sender's own state (too little ether for the gas) is checked before
//! anything is signed, so it fails a transfer with nothing sent.

use alloy::primitives::{Address, B256, Bytes, U256, hex};
use tracing::{info, warn};

use super::{
    super::{
        broadcast::intrinsic,
        rpc::{Broadcast, TxStatus},
    },
    EvmSender,
};
use crate::transfers::{Outgoing, Route, SendError, SentTransaction, TxRole, transactions};

/// What the chain says of a transaction's nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NonceUse {
    /// Unused at the latest block, as the answering node says: nothing is
    /// decided yet.
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
                transactions::mark_submitted(&self.store, &t.id).await?;
                info!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, "transfer submitted");
                Ok(())
            }
            Broadcast::Unknown(reason) => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, reason, "the broadcast's answer decides nothing; the transfer is held and its transaction sent again");
                transactions::mark_submitted(&self.store, &t.id).await?;
                Ok(())
            }
            Broadcast::Refused(reason) => self.refused(t, tx, &reason).await,
        }
    }

    /// A node refused a transaction of an `ACCEPTED` transfer (its first
    /// transfer transaction, or a top-up). Released only when no node can
    /// hold it: the refusal is of its bytes alone ([`intrinsic`]), this
    /// process signed it, and every node it asked refused it, with no answer
    /// before that could hide a node taking it; the transfer then fails.
    /// Otherwise (a refusal that depends on the node's state, such as nonce
    /// too low or insufficient funds, which a backend of the same request at
    /// another state may not share; an earlier answer that decided nothing;
    /// a transaction signed before a restart) it stays `SENT`, the transfer
    /// `SUBMITTED`, and the chain decides: its nonce used by one of the
    /// transfer's transactions, or by the cancellation at the window's end.
    pub(super) async fn refused(
        &self,
        t: &Outgoing,
        tx: &SentTransaction,
        reason: &str,
    ) -> Result<(), SendError> {
        let only_refused = self.only_refused.lock().expect("refusal set").contains(&tx.hash);
        if !only_refused || !intrinsic(reason) {
            warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, reason, "refused, but a node may hold it; holding it until the chain decides");
            if tx.role != TxRole::TopUp {
                transactions::mark_submitted(&self.store, &t.id).await?;
            }
            return Ok(());
        }
        transactions::reject_transaction(&self.store, self.config.chain, tx).await?;
        self.only_refused.lock().expect("refusal set").remove(&tx.hash);
        if t.route == Route::Authorization && tx.role != TxRole::TopUp {
            // The authorization went out with the refused bytes.
            return self.end_unsent_authorization(t, "REJECTED_BY_NODE", reason).await;
        }
        self.fail(t, "REJECTED_BY_NODE", reason).await
    }

    /// Who used the nonce of `tx`, among `group` (every transaction the
    /// transfer signed at that nonce, refused ones included) and others;
    /// `confirmed` is the newest final block, looked up if `None`. A nonce
    /// used at a final block is judged by the block that used it, read by
    /// number: a backend that lacks it errors instead of answering without
    /// it, as a receipt lookup would.
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
        if let Some(block) = confirmed
            && self.rpc.nonce_at(from, block).await? > tx.nonce
        {
            let hashes = self.nonce_block(from, tx.nonce, block).await?;
            let ours = group.iter().any(|g| g.hash.parse::<B256>().is_ok_and(|h| hashes.contains(&h)));
            return Ok(if ours { NonceUse::Ours } else { NonceUse::Other });
        }
        if self.included(group).await?.is_some() {
            return Ok(NonceUse::Ours);
        }
        Ok(NonceUse::Undecided)
    }

    /// The transactions of the block where `from`'s count passed `nonce`,
    /// at or below `used_at` (where it is known passed): searched back from
    /// `used_at` in growing strides, then halved, so that only recent states
    /// are read (a full node keeps no old ones).
    pub(super) async fn nonce_block(
        &self,
        from: Address,
        nonce: u64,
        used_at: u64,
    ) -> Result<Vec<B256>, SendError> {
        let (mut low, mut high) = (used_at, used_at);
        let mut stride = 1;
        while low > 0 {
            low = high.saturating_sub(stride);
            if self.rpc.nonce_at(from, low).await? <= nonce {
                break;
            }
            (high, stride) = (low, stride * 2);
        }
        // The count is at most `nonce` at `low` (block 0 sent nothing) and past it at `high`.
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if self.rpc.nonce_at(from, middle).await? > nonce {
                high = middle;
            } else {
                low = middle;
            }
        }
        let block = self.rpc.blocks(high, high).await?;
        Ok(block.into_iter().flat_map(|b| b.transactions).map(|x| x.hash).collect())
    }

    /// Fails before signing when `from` holds less ether than a transaction
    /// may spend (`gas_limit × max_fee + value`): a node would refuse it, and
    /// a refusal that depends on state releases nothing once signed.
    pub(super) async fn check_funds(
        &self,
        from: Address,
        gas_limit: u64,
        max_fee: u128,
        value: U256,
    ) -> Result<(), SendError> {
        let need = U256::from(gas_limit) * U256::from(max_fee) + value;
        let have = self.rpc.balance(from).await?;
        if have < need {
            return Err(SendError::Invalid(format!(
                "insufficient funds: {from} holds {have} wei, the transaction may spend {need} wei"
            )));
        }
        Ok(())
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
                transactions::resync_nonce(&self.store, self.config.chain, &address, chain_next).await?;
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
        match outcome {
            Broadcast::Accepted => {
                self.broadcast.lock().expect("broadcast set").insert(tx.hash.clone());
                self.only_refused.lock().expect("refusal set").remove(&tx.hash);
            }
            Broadcast::Unknown(_) => {
                self.only_refused.lock().expect("refusal set").remove(&tx.hash);
            }
            Broadcast::Refused(_) => {}
        }
        Ok(outcome)
    }
}

pub(super) fn sender_of(tx: &SentTransaction) -> Result<Address, SendError> {
    tx.sender.parse().map_err(|_| SendError::Invalid(format!("bad sender {}", tx.sender)))
}
