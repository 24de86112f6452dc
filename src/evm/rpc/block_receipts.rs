//! Blocks read as their transaction hashes and receipts, for chains whose
//! `block_reads` is `receipts` (see [`crate::config::BlockReads`]).

use std::sync::atomic::Ordering;

use alloy::primitives::B256;

use super::{BlockReceipt, EvmRpc, RpcBlock, RpcFailure, RpcTransaction};

/// Steps in a row whose blocks could not be read by their receipts before
/// the chain reads blocks with their transactions for good.
const RECEIPT_FAILURES_IN_A_ROW: u32 = 10;

impl EvmRpc {
    /// Blocks `from..=to` with their transaction hashes only, in order.
    pub async fn block_hashes(&self, from: u64, to: u64) -> Result<Vec<RpcBlock<B256>>, RpcFailure> {
        self.with_bodies(self.by_numbers(&(from..=to).collect::<Vec<_>>(), false).await?)
    }

    /// Each block's receipts, one list per block hash, in order. Asked by
    /// hash, so a backend on another fork cannot answer for the number; a
    /// node that lacks the block answers `null` or an error, both missing
    /// data, except an error saying it does not serve the method at all.
    pub async fn block_receipts(&self, hashes: &[B256]) -> Result<Vec<Vec<BlockReceipt>>, RpcFailure> {
        const METHOD: &str = "eth_getBlockReceipts";
        let failed = |e| self.unknown_hash(METHOD, e);
        let found: Vec<Option<Vec<BlockReceipt>>> = self.batched(METHOD, hashes, |h| (*h,), failed).await?;
        found
            .into_iter()
            .zip(hashes)
            .map(|(receipts, hash)| {
                receipts.ok_or_else(|| self.missing(METHOD, format!("no receipts for block {hash}")))
            })
            .collect()
    }

    /// Mined transactions by hash, in order. One the node does not know, or
    /// knows only as pending (a backend that has not the block yet), or
    /// answered under another hash, is missing data.
    pub async fn transactions(&self, hashes: &[B256]) -> Result<Vec<RpcTransaction>, RpcFailure> {
        const METHOD: &str = "eth_getTransactionByHash";
        let found: Vec<Option<RpcTransaction>> = self.by_hash(METHOD, hashes).await?;
        found
            .into_iter()
            .zip(hashes)
            .map(|(tx, hash)| match tx {
                Some(tx) if tx.hash == *hash && tx.block_hash.is_some() => Ok(tx),
                _ => Err(self.missing(METHOD, format!("no mined transaction {hash}"))),
            })
            .collect()
    }

    /// Whether blocks are no longer read by their receipts: the node refused
    /// `eth_getBlockReceipts`, or reading by receipts failed too many steps
    /// in a row.
    pub fn block_receipts_refused(&self) -> bool {
        self.block_receipts_refused.load(Ordering::Relaxed)
    }

    pub fn refuse_block_receipts(&self, why: &str) {
        if !self.block_receipts_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(chain = %self.chain, why, "reading blocks with their transactions from now on, not by their receipts");
        }
    }

    /// Counts a step whose blocks could not be read by their receipts (and
    /// were read with their transactions instead); after
    /// [`RECEIPT_FAILURES_IN_A_ROW`] in a row, no step tries again.
    pub fn block_receipts_failed(&self) {
        let failed = self.block_receipt_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failed >= RECEIPT_FAILURES_IN_A_ROW {
            let why = format!("reading by receipts failed {failed} steps in a row");
            self.refuse_block_receipts(&why);
        }
    }

    pub fn block_receipts_served(&self) {
        self.block_receipt_failures.store(0, Ordering::Relaxed);
    }
}
