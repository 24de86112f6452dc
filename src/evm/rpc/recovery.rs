//! What `transfers recover` reads of a chain: the transactions of blocks
//! with who sent them at which nonce and what they called, to find the
//! transactions of platform-held keys a restored store lost.

use alloy::primitives::{Address, B256, Bytes, U64, U256};
use serde::Deserialize;

use super::{EvmRpc, RpcBlock, RpcFailure};

/// A block's transaction as a recovery reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcSentTx {
    pub hash: B256,
    pub from: Address,
    /// `null` for a contract creation.
    #[serde(default)]
    pub to: Option<Address>,
    #[serde(default)]
    pub value: U256,
    pub nonce: U64,
    #[serde(default)]
    pub gas: U64,
    #[serde(default)]
    pub input: Bytes,
}

/// A transaction found in a block.
#[derive(Debug, Clone)]
pub struct InBlock {
    pub number: u64,
    pub hash: B256,
    /// The block's time, in milliseconds.
    pub time_ms: u64,
    pub tx: RpcSentTx,
}

impl EvmRpc {
    /// The transactions of blocks `from..=to`, each with its block, in order.
    pub async fn sent_in(&self, from: u64, to: u64) -> Result<Vec<InBlock>, RpcFailure> {
        let numbers: Vec<u64> = (from..=to).collect();
        let blocks: Vec<RpcBlock<RpcSentTx>> = self.by_numbers(&numbers, true).await?;
        let blocks = self.with_bodies(blocks)?;
        Ok(blocks
            .into_iter()
            .flat_map(|block| {
                let (number, hash, time_ms) = (block.number.to::<u64>(), block.hash, block.time_ms());
                block.transactions.into_iter().map(move |tx| InBlock { number, hash, time_ms, tx })
            })
            .collect())
    }
}
