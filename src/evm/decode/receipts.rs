//! Blocks read as their transaction hashes and receipts, made into the
//! blocks [`super::deposits_in_block`] reads. Each answer is checked against
//! the others: a backend behind answers an empty list or `null` for a block
//! it lacks, one on another fork another block's receipts or transactions.

use std::collections::HashMap;

use alloy::primitives::{B256, U256};

use super::{EvmWatchSet, Succeeded};
use crate::evm::rpc::{BlockReceipt, RpcBlock, RpcTransaction};

/// The blocks as if read with their transactions: each transaction's sender
/// and recipient from its receipt, its value zero until [`fill_values`]
/// sets the candidates'; and the transactions that succeeded. Each block's
/// receipts must be its own, one for each of its transactions, in order.
pub fn from_receipts(
    blocks: Vec<RpcBlock<B256>>,
    receipts: Vec<Vec<BlockReceipt>>,
) -> Result<(Vec<RpcBlock>, Succeeded), String> {
    if blocks.len() != receipts.len() {
        return Err(format!("{} receipt lists for {} blocks", receipts.len(), blocks.len()));
    }
    let mut succeeded = Succeeded::default();
    let mut out = Vec::with_capacity(blocks.len());
    for (block, receipts) in blocks.into_iter().zip(receipts) {
        let number = block.number;
        if receipts.len() != block.transactions.len() {
            return Err(format!(
                "block {number} holds {} transactions but {} receipts were answered",
                block.transactions.len(),
                receipts.len()
            ));
        }
        let mut transactions = Vec::with_capacity(receipts.len());
        for (hash, receipt) in block.transactions.iter().zip(receipts) {
            if receipt.transaction_hash != *hash || receipt.block_hash != block.hash {
                return Err(format!(
                    "a receipt answered for block {number} is not of its transaction {hash}"
                ));
            }
            if !receipt.outcome_told() {
                return Err(format!("the receipt of transaction {hash} holds neither a status nor a root"));
            }
            if receipt.succeeded() {
                succeeded.insert(*hash);
            }
            transactions.push(RpcTransaction {
                hash: *hash,
                from: receipt.from,
                to: receipt.to,
                value: U256::ZERO,
                block_number: Some(number),
                block_hash: Some(block.hash),
            });
        }
        out.push(RpcBlock {
            number,
            hash: block.hash,
            parent_hash: block.parent_hash,
            timestamp: block.timestamp,
            timestamp_ms: block.timestamp_ms,
            logs_bloom: block.logs_bloom,
            transactions_root: block.transactions_root,
            transactions,
        });
    }
    Ok((out, succeeded))
}

/// The successful transactions of the block to a watched address: only the
/// transaction itself tells whether, and how much, value it carried.
pub fn value_candidates(block: &RpcBlock, succeeded: &Succeeded, watch: &EvmWatchSet) -> Vec<B256> {
    block
        .transactions
        .iter()
        .filter(|tx| succeeded.contains(&tx.hash) && tx.to.is_some_and(|to| watch.account_of(&to).is_some()))
        .map(|tx| tx.hash)
        .collect()
}

/// Sets the value of each transaction read by hash into its block. `read`
/// must answer `asked`, one for one, in order; each must be of the block its
/// receipt was (a backend on another fork answers the transaction as mined
/// elsewhere, one behind as pending), from and to whom the receipt said.
pub fn fill_values(blocks: &mut [RpcBlock], asked: &[B256], read: Vec<RpcTransaction>) -> Result<(), String> {
    if read.len() != asked.len() || read.iter().zip(asked).any(|(tx, hash)| tx.hash != *hash) {
        return Err(format!("{} transactions answered are not the {} asked", read.len(), asked.len()));
    }
    let mut read: HashMap<B256, RpcTransaction, foldhash::fast::RandomState> =
        read.into_iter().map(|tx| (tx.hash, tx)).collect();
    for block in blocks.iter_mut() {
        for tx in &mut block.transactions {
            let Some(found) = read.remove(&tx.hash) else { continue };
            if found.block_hash != Some(block.hash) || (found.from, found.to) != (tx.from, tx.to) {
                return Err(format!(
                    "transaction {} was answered as another block's than {} or with other parties than its receipt",
                    tx.hash, block.number
                ));
            }
            tx.value = found.value;
        }
    }
    match read.keys().next() {
        Some(hash) => Err(format!("transaction {hash} is in none of the scanned blocks")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use alloy::{primitives::Address, rpc::types::Log};
    use serde::de::DeserializeOwned;
    use serde_json::Value;

    use super::*;
    use crate::{
        chain::Chain,
        config::Chains,
        deposits::resource::Detected,
        deposits::watch::WatchSet,
        evm::{
            decode::{BlockInput, EvmAssets, deposits_in_block, native_candidates, succeeded},
            rpc::RpcReceipt,
        },
    };

    fn fixture<T: DeserializeOwned>(name: &str) -> T {
        serde_json::from_value(crate::fixtures::mainnet("evm", name)).unwrap()
    }

    /// Mainnet block 18,000,000 as read with its transactions, as read with
    /// their hashes, its `eth_getBlockReceipts` answer and its logs.
    struct Block18m {
        full: RpcBlock,
        hashes: RpcBlock<B256>,
        receipts: Vec<BlockReceipt>,
        raw_receipts: Vec<Value>,
        logs: Vec<Log>,
    }

    fn block_18m() -> Block18m {
        let mut json: Value = fixture("eth-mainnet-18000000.eth_getBlockByNumber_full.json");
        let full: RpcBlock = serde_json::from_value(json.clone()).unwrap();
        let hashes: Vec<Value> =
            json["transactions"].as_array().unwrap().iter().map(|t| t["hash"].clone()).collect();
        json["transactions"] = Value::Array(hashes);
        let raw_receipts: Vec<Value> = fixture("eth-mainnet-18000000.eth_getBlockReceipts.json");
        let logs = raw_receipts
            .iter()
            .flat_map(|r| r["logs"].as_array().unwrap().clone())
            .map(|l| serde_json::from_value(l).unwrap())
            .collect();
        Block18m {
            full,
            hashes: serde_json::from_value(json).unwrap(),
            receipts: serde_json::from_value(Value::Array(raw_receipts.clone())).unwrap(),
            raw_receipts,
            logs,
        }
    }

    fn watch(addresses: impl IntoIterator<Item = Address>) -> EvmWatchSet {
        let pairs = addresses
            .into_iter()
            .enumerate()
            .map(|(i, a)| (a.to_checksum(None), format!("acc-{i}")))
            .collect();
        WatchSet::build(pairs, |s| s.parse().ok())
    }

    fn decode(block: &RpcBlock, ok: &Succeeded, logs: &[Log], watch: &EvmWatchSet) -> Vec<Detected> {
        let chains = Chains::load(None).unwrap();
        let assets = EvmAssets::from_config(chains.get(Chain::EthereumMainnet).unwrap());
        let input = BlockInput { block, succeeded: ok, logs, traces: None };
        deposits_in_block(Chain::EthereumMainnet, &input, watch, &assets)
    }

    #[test]
    fn a_block_read_by_its_receipts_yields_the_deposits_of_the_block_read_with_its_transactions() {
        let b = block_18m();
        let mut recipients: Vec<Address> = b.full.transactions.iter().filter_map(|t| t.to).collect();
        recipients.extend(b.receipts.iter().map(|r| r.from));
        let watch = watch(recipients);

        // With its transactions: the receipts of the native candidates.
        let candidates = native_candidates(&b.full, &watch);
        let receipts: Vec<RpcReceipt> = b
            .raw_receipts
            .iter()
            .filter(|r| candidates.iter().any(|c| r["transactionHash"] == c.to_string()))
            .map(|r| serde_json::from_value(r.clone()).unwrap())
            .collect();
        let expected = decode(&b.full, &succeeded(&receipts), &b.logs, &watch);

        // By its receipts: the successful transactions to watched addresses,
        // read by hash for their value.
        let (mut blocks, ok) = from_receipts(vec![b.hashes], vec![b.receipts]).unwrap();
        let wanted = value_candidates(&blocks[0], &ok, &watch);
        let read: Vec<RpcTransaction> =
            b.full.transactions.iter().filter(|t| wanted.contains(&t.hash)).cloned().collect();
        assert_eq!(read.len(), wanted.len());
        fill_values(&mut blocks, &wanted, read).unwrap();
        let found = decode(&blocks[0], &ok, &b.logs, &watch);

        assert_eq!(found, expected);
        let native =
            found.iter().filter(|d| d.position == crate::deposits::resource::Position::Native).count();
        assert_eq!(native, 39, "39 successful value transfers; a 40th reverted");
        assert!(wanted.len() > native, "zero-value calls to watched addresses are read and yield nothing");
    }

    #[test]
    fn block_21925176_as_hashes_and_receipts_is_whole() {
        let hashes: RpcBlock<B256> =
            fixture("eth-mainnet-21925176.eth_getBlockByNumber_hashes-only.result.json");
        let raw: Vec<Value> = fixture("eth-mainnet-21925176.eth_getBlockReceipts.result.json");
        let ok_count = raw.iter().filter(|r| r["status"] == "0x1").count();
        let receipts: Vec<BlockReceipt> = serde_json::from_value(Value::Array(raw)).unwrap();
        let (blocks, ok) = from_receipts(vec![hashes], vec![receipts]).unwrap();
        assert_eq!(blocks[0].transactions.len(), 202);
        assert_eq!(ok.len(), ok_count);
        assert!(ok_count < 202, "the block holds failed transactions too");
    }

    #[test]
    fn receipts_that_are_not_the_blocks_own_are_refused() {
        let b = block_18m();
        let other: Vec<BlockReceipt> = fixture("eth-mainnet-21925176.eth_getBlockReceipts.result.json");
        let mut swapped = b.receipts.clone();
        swapped.swap(3, 4);
        let mut forked = b.receipts.clone();
        forked[5].block_hash = B256::with_last_byte(7);
        let mut untold = b.receipts.clone();
        untold[6].status = None;
        let cases: Vec<(&str, Vec<Vec<BlockReceipt>>)> = vec![
            ("an empty list, as a backend behind may answer", vec![vec![]]),
            ("one receipt short", vec![b.receipts[..93].to_vec()]),
            ("two receipts out of order", vec![swapped]),
            ("a receipt of the same transaction in another block", vec![forked]),
            ("another block's receipts", vec![other]),
            ("a receipt with neither status nor root", vec![untold]),
            ("no list at all", vec![]),
        ];
        for (what, answer) in cases {
            assert!(from_receipts(vec![b.hashes.clone()], answer).is_err(), "{what} is accepted");
        }
        assert!(from_receipts(vec![b.hashes], vec![b.receipts]).is_ok());
    }

    #[test]
    fn a_transaction_answered_from_another_block_or_with_other_parties_is_refused() {
        let b = block_18m();
        let (blocks, _) = from_receipts(vec![b.hashes], vec![b.receipts]).unwrap();
        let tx = b.full.transactions.iter().find(|t| !t.value.is_zero()).unwrap().clone();
        let fill = |read: RpcTransaction| {
            let mut blocks = blocks.clone();
            fill_values(&mut blocks, &[tx.hash], vec![read]).map(|()| blocks)
        };

        let filled = fill(tx.clone()).unwrap();
        let set = filled[0].transactions.iter().find(|t| t.hash == tx.hash).unwrap();
        assert_eq!(set.value, tx.value);
        assert_eq!(filled[0].transactions.iter().filter(|t| !t.value.is_zero()).count(), 1);

        let cases = [
            (
                "mined in another block",
                RpcTransaction { block_hash: Some(B256::with_last_byte(9)), ..tx.clone() },
            ),
            ("not mined", RpcTransaction { block_hash: None, ..tx.clone() }),
            ("to another recipient", RpcTransaction { to: Some(Address::with_last_byte(1)), ..tx.clone() }),
            ("from another sender", RpcTransaction { from: Address::with_last_byte(1), ..tx.clone() }),
            ("of no scanned block", RpcTransaction { hash: B256::with_last_byte(3), ..tx.clone() }),
        ];
        for (what, read) in cases {
            assert!(fill(read).is_err(), "a transaction {what} is accepted");
        }
        let mut unanswered = blocks.clone();
        assert!(fill_values(&mut unanswered, &[tx.hash], vec![]).is_err(), "a candidate left unanswered");
    }
}
