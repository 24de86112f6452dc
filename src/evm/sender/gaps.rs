//! Nonce gaps: a nonce of a sending address that nothing holds, below
//! transactions signed after it, keeps them all out of every block. Each
//! gap is filled by a zero-value self-transfer at that nonce, the
//! platform's own cost.

use std::collections::BTreeMap;

use alloy::primitives::{Address, B256, Bytes, hex};
use tracing::{info, warn};

use super::{EvmSender, broadcast::sender_of, outcome::receipt_fees};
use crate::{
    keys::KeyRef,
    transfers::{Outgoing, PlatformCost, SendError, TxRole, TxState, fillers},
};

impl EvmSender {
    /// Follows the fillers sent before, then fills every gap below the
    /// pending transactions of `transfers`' senders.
    pub(super) async fn fill_gaps(
        &self,
        transfers: &[Outgoing],
        confirmed: Option<u64>,
    ) -> Result<(), SendError> {
        self.follow_fillers(confirmed).await?;
        let mut senders: BTreeMap<&str, (Address, KeyRef)> = BTreeMap::new();
        for t in transfers {
            for tx in t.transactions.iter().filter(|x| x.state == TxState::Sent) {
                let key = if tx.role == TxRole::TopUp { KeyRef::Sponsor } else { self.sender_key(t)? };
                senders.insert(&tx.sender, (sender_of(tx)?, key));
            }
        }
        for (sender, (from, key)) in senders {
            // The node's pending count stops at the first missing nonce.
            let pending = self.rpc.nonce(from, true).await?;
            let held = self.store.held_nonces(self.config.chain, sender, pending).await?;
            let Some(&highest) = held.last() else { continue };
            for nonce in (pending..highest).filter(|n| held.binary_search(n).is_err()) {
                self.fill(key, from, nonce).await?;
            }
        }
        Ok(())
    }

    /// Signs, records and broadcasts a zero-value self-transfer of `from` at `nonce`.
    async fn fill(&self, key: KeyRef, from: Address, nonce: u64) -> Result<(), SendError> {
        let (max_fee, tip) = self.fees(None, self.cap()).await?;
        let tx = self.self_transfer(from, nonce, max_fee, tip);
        let sent = self.sign(key, tx, TxRole::Cancel).await?;
        let chain = self.config.chain;
        fillers::record_filler(
            &self.store,
            chain,
            &sent.sender,
            nonce,
            &sent.hash,
            &sent.raw,
            sent.created_at,
        )
        .await?;
        warn!(%chain, sender = %sent.sender, nonce, hash = %sent.hash, "nonce gap below later transactions; filling it");
        self.send(&sent).await?;
        Ok(())
    }

    /// Records the fee of each filler included, in the gas ledger as the
    /// platform's own cost; sends the others again, and
    /// forgets one whose nonce another transaction used at a final block.
    async fn follow_fillers(&self, confirmed: Option<u64>) -> Result<(), SendError> {
        for (hash, sender, nonce, raw) in self.store.pending_fillers(self.config.chain).await? {
            let parsed: B256 = hash.parse().map_err(|_| SendError::Invalid(format!("bad hash {hash}")))?;
            if let Some(receipt) = self.rpc.fee_receipt(parsed).await? {
                let cost = PlatformCost {
                    fees: receipt_fees(&hash, &receipt),
                    native_symbol: self.config.native.symbol.clone(),
                    native_decimals: self.config.native.decimals,
                    usd_micros_per_coin: self.config.transfers.native_usd_micros().unwrap_or_default(),
                };
                let fee = receipt.execution_fee() + receipt.l1_fee.unwrap_or_default();
                info!(chain = %self.config.chain, nonce, %hash, %fee, "nonce gap filled");
                fillers::filler_included(&self.store, &hash, receipt.block_number.to(), &cost).await?;
                continue;
            }
            let bytes =
                hex::decode(&raw).map_err(|_| SendError::Invalid("stored filler is not hex".into()))?;
            let from: Address =
                sender.parse().map_err(|_| SendError::Invalid(format!("bad filler sender {sender}")))?;
            if let Some(block) = confirmed
                && self.rpc.nonce_at(from, block).await? > nonce
            {
                // Read from the block that used the nonce: a receipt missing
                // may only be missing from a backend behind.
                if !self.nonce_block(from, nonce, block).await?.contains(&parsed) {
                    fillers::filler_superseded(&self.store, &hash).await?;
                }
                continue;
            }
            self.rpc.send_raw(&Bytes::from(bytes)).await;
        }
        Ok(())
    }
}
