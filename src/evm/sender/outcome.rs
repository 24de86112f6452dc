//! How a transfer ends: decided by the transaction of its lineage that is
//! included deep enough, or, for an EIP-3009 authorization, by the token's
//! record of who used it; settled with every fee its transactions cost.

use alloy::primitives::B256;
use tracing::warn;

use super::{super::rpc::FeeReceipt, EvmSender, authorization::AuthorizationUse};
use crate::transfers::{
    FailureDetails, Fee, Outgoing, Route, SendError, SentTransaction, TransferStatus, TxRole, TxState,
    failure, settle, transactions,
};

impl EvmSender {
    /// `tx`, a transaction of `t`, is included at or below `confirmed`: the
    /// transfer is `CONFIRMED`, `FAILED` (reverted) or `DROPPED` (its
    /// cancellation won). An authorization transfer that did not confirm by
    /// its own transaction ends only as its authorization says: used by
    /// anyone, `CONFIRMED` with the transaction that used it; otherwise only
    /// once it can never be used.
    pub(super) async fn decide(
        &self,
        t: &Outgoing,
        tx: &SentTransaction,
        receipt: &FeeReceipt,
        confirmed: Option<u64>,
    ) -> Result<(), SendError> {
        let (status, reason) = match (tx.role, receipt.succeeded()) {
            (TxRole::Cancel, _) => (TransferStatus::Dropped, None),
            (_, true) => (TransferStatus::Confirmed, None),
            (_, false) => (TransferStatus::Failed, Some(failure("REVERTED", "the transaction reverted"))),
        };
        if t.route != Route::Authorization || status == TransferStatus::Confirmed {
            return self.settle(t, status, Some(&tx.hash), reason).await;
        }
        match self.authorization_use(t).await? {
            AuthorizationUse::UsedBy { hash, block, block_hash } => {
                if confirmed.is_some_and(|c| block <= c) && self.canonical_at(block, block_hash).await? {
                    warn!(chain = %self.config.chain, transfer = %t.id, ours = %tx.hash, used_by = %hash, "the authorization was used by another transaction; it confirms the transfer");
                    return self.settle(t, TransferStatus::Confirmed, Some(&hash), None).await;
                }
                Ok(())
            }
            AuthorizationUse::UsedUnseen => Ok(()),
            AuthorizationUse::Unused if self.authorization_void(t).await? => {
                self.settle(t, status, Some(&tx.hash), reason).await
            }
            AuthorizationUse::Unused => Ok(()),
        }
    }

    /// None of `t`'s transactions can be included any more: their nonce went
    /// to another transaction at a final block. Nothing of the transfer moved,
    /// unless its authorization was used by someone else.
    pub(super) async fn lost(&self, t: &Outgoing, confirmed: Option<u64>) -> Result<(), SendError> {
        if t.route == Route::Authorization {
            match self.authorization_use(t).await? {
                AuthorizationUse::UsedBy { hash, block, block_hash }
                    if confirmed.is_some_and(|c| block <= c)
                        && self.canonical_at(block, block_hash).await? =>
                {
                    return self.settle(t, TransferStatus::Confirmed, Some(&hash), None).await;
                }
                AuthorizationUse::Unused if self.authorization_void(t).await? => {}
                _ => return Ok(()),
            }
        }
        warn!(chain = %self.config.chain, transfer = %t.id, "the transfer's nonce went to another transaction at a final block: it can never be included");
        self.settle(t, TransferStatus::Dropped, None, None).await
    }

    /// Whether `receipt`'s block is the canonical block at its number, as a
    /// deposit's is: the watcher's recorded block at that number when it
    /// holds one, a fresh header by number otherwise. A receipt from a
    /// backend on a minority fork, or a provider's invention, decides
    /// nothing: the transfer is asked about again at the next step (an
    /// off-ramp's payout never goes to the bank on it).
    pub(super) async fn canonical(&self, receipt: &FeeReceipt) -> Result<bool, SendError> {
        self.canonical_at(receipt.block_number.to::<u64>(), receipt.block_hash).await
    }

    /// Whether `block_hash` is the canonical block at `number`: see
    /// [`EvmSender::canonical`].
    pub(super) async fn canonical_at(&self, number: u64, block_hash: B256) -> Result<bool, SendError> {
        let recorded = self.store.blocks_below(self.config.chain, number, 1).await?;
        let hash = match recorded.first().filter(|b| b.number == number) {
            Some(block) => {
                block.hash.parse::<B256>().map_err(|_| SendError::Invalid("bad recorded hash".into()))?
            }
            None => match self.rpc.headers(&[number]).await?.first() {
                Some(header) => header.hash,
                None => return Ok(false),
            },
        };
        Ok(hash == block_hash)
    }

    /// The first transaction of `group` with a receipt, and the receipt.
    pub(super) async fn included<'a>(
        &self,
        group: &[&'a SentTransaction],
    ) -> Result<Option<(&'a SentTransaction, FeeReceipt)>, SendError> {
        for tx in group {
            let hash: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
            if let Some(receipt) = self.rpc.fee_receipt(hash).await? {
                return Ok(Some((tx, receipt)));
            }
        }
        Ok(None)
    }

    pub(super) async fn record_inclusion(
        &self,
        tx: &SentTransaction,
        receipt: &FeeReceipt,
    ) -> Result<(), SendError> {
        let state = if receipt.succeeded() { TxState::Mined } else { TxState::Reverted };
        let block = format!("{:#x}", receipt.block_hash);
        let number = receipt.block_number.to::<u64>();
        if tx.state != state || tx.block_hash.as_deref() != Some(block.as_str()) {
            let fee = receipt.execution_fee() + receipt.l1_fee.unwrap_or_default();
            transactions::update_transaction(&self.store, &tx.hash, state, Some((number, &block)), Some(fee))
                .await?;
        }
        Ok(())
    }

    /// Ends a transfer with every fee its included transactions cost.
    pub(super) async fn settle(
        &self,
        t: &Outgoing,
        status: TransferStatus,
        hash: Option<&str>,
        failure: Option<FailureDetails>,
    ) -> Result<(), SendError> {
        let mut fees = Vec::new();
        for tx in self.store.transfer_transactions(&t.id).await? {
            if tx.block_number.is_none() {
                continue;
            }
            let parsed: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
            // No receipt: reorged out since, so nothing was paid for it.
            let Some(receipt) = self.rpc.fee_receipt(parsed).await? else { continue };
            fees.extend(receipt_fees(&tx.hash, &receipt));
        }
        settle(&self.store, &self.config, &t.id, status, hash, failure, fees).await?;
        Ok(())
    }

    pub(super) async fn fail(&self, t: &Outgoing, code: &str, message: &str) -> Result<(), SendError> {
        self.settle(t, TransferStatus::Failed, None, Some(failure(code, message))).await
    }
}

/// What an included transaction cost, for the gas ledger: `gasUsed ×
/// effectiveGasPrice`, and the OP-stack's L1 data fee when there is one.
pub(super) fn receipt_fees(hash: &str, receipt: &FeeReceipt) -> Vec<Fee> {
    let mut fees = vec![Fee {
        transaction_hash: hash.to_string(),
        kind: "NETWORK_FEE",
        amount: receipt.execution_fee(),
    }];
    if let Some(l1) = receipt.l1_fee.filter(|f| !f.is_zero()) {
        fees.push(Fee { transaction_hash: hash.to_string(), kind: "L1_DATA_FEE", amount: l1 });
    }
    fees
}
