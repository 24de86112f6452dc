//! The fields of blocks, transactions and receipts the indexer reads, and
//! no more: see the parent module.

use alloy::primitives::{Address, B256, Bloom, U64, U256};
use serde::Deserialize;

/// A block with the fields the indexer reads: with its transactions, or
/// (`RpcBlock<B256>`) with their hashes only.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "T: Deserialize<'de>"))]
pub struct RpcBlock<T = RpcTransaction> {
    pub number: U64,
    pub hash: B256,
    pub parent_hash: B256,
    pub timestamp: U64,
    /// The timestamp in milliseconds, where the node serves it (Base, whose
    /// blocks come every 200 ms while `timestamp` stays in whole seconds).
    #[serde(default)]
    pub timestamp_ms: Option<U64>,
    /// Which (address, topic) pairs the block's logs may hold; all zero on
    /// chains that do not publish blooms (see [`crate::evm::completeness`]).
    #[serde(default)]
    pub logs_bloom: Bloom,
    /// The root of the block's transactions trie: the empty trie's root
    /// exactly when the block holds none.
    pub transactions_root: B256,
    #[serde(default)]
    pub transactions: Vec<T>,
}

impl<T> RpcBlock<T> {
    /// The block's time in milliseconds since the epoch: `timestampMs` when
    /// the node serves one within `timestamp`'s second, else `timestamp`'s
    /// whole second. A value outside that second is not the block's time
    /// and is not trusted.
    pub fn time_ms(&self) -> u64 {
        let seconds: u64 = self.timestamp.to();
        let whole = seconds.saturating_mul(1000);
        match self.timestamp_ms.map(|ms| ms.to::<u64>()) {
            Some(ms) if ms / 1000 == seconds => ms,
            _ => whole,
        }
    }

    /// Whether the answer lists no transaction for a block whose header says
    /// it holds some: a node that has the header but not yet (or no longer)
    /// the body answers so, as go-ethereum's client refuses to take. The
    /// other way round is not checked: Polygon's nodes listed a state-sync
    /// transaction the trie did not hold.
    pub fn body_missing(&self) -> bool {
        self.transactions.is_empty() && self.transactions_root != alloy::consensus::EMPTY_ROOT_HASH
    }
}

/// A block header projection, for hashes only.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcHeader {
    pub number: U64,
    pub hash: B256,
    pub parent_hash: B256,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct RpcBlockTime {
    pub(super) timestamp: U64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcTransaction {
    pub hash: B256,
    pub from: Address,
    #[serde(default)]
    pub to: Option<Address>,
    #[serde(default)]
    pub value: U256,
    #[serde(default)]
    pub block_number: Option<U64>,
    #[serde(default)]
    pub block_hash: Option<B256>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcReceipt {
    pub transaction_hash: B256,
    /// The block that mined the transaction, as the answering node has it.
    pub block_hash: B256,
    /// Absent before Byzantium, where a receipt carried a state root instead.
    #[serde(default)]
    pub status: Option<U64>,
    /// The state root a receipt carried before Byzantium.
    #[serde(default)]
    pub root: Option<B256>,
}

/// A receipt with its logs: where a reconciliation reads a block's token
/// transfers beside the logs answer (`eth_getLogs`), which a provider may
/// have left one out of.
#[derive(Debug, Clone, Deserialize)]
pub struct RpcReceiptLogs {
    #[serde(flatten)]
    pub receipt: RpcReceipt,
    #[serde(default)]
    pub logs: Vec<alloy::rpc::types::Log>,
}

impl RpcReceipt {
    pub fn succeeded(&self) -> bool {
        succeeded(self.status)
    }

    /// Whether the receipt tells the transaction's outcome: see [`outcome_told`].
    pub fn outcome_told(&self) -> bool {
        outcome_told(self.status, self.root)
    }
}

/// A receipt of `eth_getBlockReceipts`, with what finds a native transfer:
/// whose block it is, who sent the transaction, to whom, and whether it
/// succeeded.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockReceipt {
    pub transaction_hash: B256,
    pub block_hash: B256,
    pub from: Address,
    /// `null` for a contract creation.
    #[serde(default)]
    pub to: Option<Address>,
    /// Absent before Byzantium, where a receipt carried a state root instead.
    #[serde(default)]
    pub status: Option<U64>,
    /// The state root a receipt carried before Byzantium.
    #[serde(default)]
    pub root: Option<B256>,
}

impl BlockReceipt {
    pub fn succeeded(&self) -> bool {
        succeeded(self.status)
    }

    /// Whether the receipt tells the transaction's outcome: see [`outcome_told`].
    pub fn outcome_told(&self) -> bool {
        outcome_told(self.status, self.root)
    }
}

/// A receipt with what the sender needs: where it was included, whether it
/// succeeded and what it cost.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeeReceipt {
    pub transaction_hash: B256,
    pub block_number: U64,
    pub block_hash: B256,
    #[serde(default)]
    pub status: Option<U64>,
    /// The state root a receipt carried before Byzantium.
    #[serde(default)]
    pub root: Option<B256>,
    pub gas_used: U256,
    pub effective_gas_price: U256,
    /// OP-stack chains: the L1 data fee the sender paid on top.
    #[serde(default)]
    pub l1_fee: Option<U256>,
}

impl FeeReceipt {
    pub fn succeeded(&self) -> bool {
        succeeded(self.status)
    }

    /// Whether the receipt tells the transaction's outcome: see [`outcome_told`].
    pub fn outcome_told(&self) -> bool {
        outcome_told(self.status, self.root)
    }

    /// `gasUsed × effectiveGasPrice`.
    pub fn execution_fee(&self) -> U256 {
        self.gas_used * self.effective_gas_price
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FeeHeader {
    #[serde(default)]
    pub(super) base_fee_per_gas: Option<U256>,
}

/// A receipt's status: `0x1` succeeded; absent (before Byzantium) counts
/// as success, the transaction being in the block.
fn succeeded(status: Option<U64>) -> bool {
    status.is_none_or(|s| s == U64::from(1))
}

/// A receipt tells its transaction's outcome by its status, or before
/// Byzantium by its state root (the transaction then succeeded, being in
/// the block). A receipt with neither, as a faulty or lying backend may
/// answer, tells nothing: taken as a success it would credit a transfer
/// that reverted.
fn outcome_told(status: Option<U64>, root: Option<B256>) -> bool {
    status.is_some() || root.is_some()
}

/// Where a transaction stands now, for deposits whose block was reorged away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    /// The node does not know it: dropped.
    Unknown,
    /// In the mempool.
    Pending,
    Mined(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_stack_receipt_carries_its_l1_data_fee() {
        // The fields an OP-stack node adds to a receipt (Base, Optimism).
        let op = serde_json::json!({
            "transactionHash": "0x5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c",
            "blockNumber": "0x1a2b3c",
            "blockHash": "0x8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f",
            "status": "0x1",
            "gasUsed": "0xb41d",
            "effectiveGasPrice": "0xf4628",
            "l1Fee": "0x2d79883d2000",
            "l1GasUsed": "0x640",
            "l1GasPrice": "0x3b9aca00",
            "l1FeeScalar": "1"
        });
        let receipt: FeeReceipt = serde_json::from_value(op).unwrap();
        assert!(receipt.succeeded());
        assert_eq!(receipt.execution_fee(), U256::from(0xb41du64 * 0xf4628u64));
        assert_eq!(receipt.l1_fee, Some(U256::from(0x2d79883d2000u64)));

        // Ethereum receipts have none.
        let plain = serde_json::json!({
            "transactionHash": "0x5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c",
            "blockNumber": "0x1", "blockHash": "0x8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f8f",
            "status": "0x0", "gasUsed": "0x5208", "effectiveGasPrice": "0x3b9aca00"
        });
        let receipt: FeeReceipt = serde_json::from_value(plain.clone()).unwrap();
        assert!(!receipt.succeeded() && receipt.outcome_told());
        assert_eq!((receipt.execution_fee(), receipt.l1_fee), (U256::from(21_000u64 * 1_000_000_000), None));

        // Without its status, only a pre-Byzantium state root tells the outcome.
        let mut untold = plain;
        untold.as_object_mut().unwrap().remove("status");
        let receipt: FeeReceipt = serde_json::from_value(untold.clone()).unwrap();
        assert!(!receipt.outcome_told(), "a receipt telling nothing");
        untold["root"] = serde_json::json!(format!("0x{}", "4d".repeat(32)));
        let receipt: FeeReceipt = serde_json::from_value(untold).unwrap();
        assert!(receipt.outcome_told() && receipt.succeeded());
    }
}
