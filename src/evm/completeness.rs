//! Whether an `eth_getLogs` answer holds every `Transfer` log of the listed
//! contracts, judged against each block's `logsBloom`.
//!
//! A load-balanced URL can send the blocks to a fresh backend and the logs to
//! one that is behind, which answers without the logs of the blocks it lacks
//! and without an error. Each block's bloom says which (address, topic) pairs
//! it may hold: when it admits a listed contract together with the
//! `Transfer` topic and no log of that contract came back for the block, the
//! answer may be incomplete, and that block is read again by its hash
//! (EIP-234: a node without the block answers an error, never `[]`). A bloom
//! false positive costs one small request; a stale answer costs a retry,
//! never a gap. A returned log its block's bloom does not admit shows that the
//! chain publishes empty or wrong blooms: blooms prove nothing there, and
//! every block is read by hash instead.

use std::collections::HashMap;

use alloy::{
    primitives::{Address, B256},
    rpc::types::Log,
};

use super::rpc::RpcBlock;

/// What the blooms say about one range's logs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Blocks (by position in the range) whose logs must be read by hash.
    pub suspect: Vec<usize>,
    /// A returned log that its block's bloom does not admit: this chain's
    /// blooms cannot vouch for any answer.
    pub blooms_unreliable: bool,
}

/// Checks the logs returned for `blocks` (grouped by block number) against
/// the blocks' blooms. Pure: the caller decides what to read again.
pub fn audit(
    blocks: &[RpcBlock],
    logs: &HashMap<u64, Vec<Log>>,
    contracts: &[Address],
    topic: B256,
) -> Audit {
    let mut out = Audit::default();
    for (i, block) in blocks.iter().enumerate() {
        let returned = logs.get(&block.number.to()).map(Vec::as_slice).unwrap_or_default();
        let bloom = &block.logs_bloom;
        let admits =
            |log: &Log| bloom.contains_raw_log(log.address(), log.topics().get(..1).unwrap_or_default());
        if !returned.iter().all(admits) {
            out.blooms_unreliable = true;
        }
        let admitted_without_log = contracts.iter().any(|contract| {
            bloom.contains_raw_log(*contract, &[topic]) && !returned.iter().any(|l| l.address() == *contract)
        });
        // An all-zero bloom on a block that calls a listed contract proves
        // nothing either way: read it.
        let silent_bloom = bloom.is_zero()
            && block.transactions.iter().any(|tx| tx.to.is_some_and(|to| contracts.contains(&to)));
        if admitted_without_log || silent_bloom {
            out.suspect.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Bloom, LogData, U64, address, b256};

    use super::*;
    use crate::evm::rpc::RpcTransaction;

    const TOPIC: B256 = b256!("ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");
    const TOKEN: Address = address!("0x00000000000000000000000000000000000000aa");
    const OTHER: Address = address!("0x00000000000000000000000000000000000000bb");

    fn block(number: u64, bloom: Bloom, calls: &[Address]) -> RpcBlock {
        RpcBlock {
            number: U64::from(number),
            hash: B256::with_last_byte(number as u8),
            parent_hash: B256::with_last_byte(number as u8 - 1),
            timestamp: U64::ZERO,
            timestamp_ms: None,
            logs_bloom: bloom,
            transactions_root: B256::with_last_byte(1),
            transactions: calls
                .iter()
                .map(|to| RpcTransaction {
                    hash: B256::ZERO,
                    from: Address::ZERO,
                    to: Some(*to),
                    value: Default::default(),
                    block_number: Some(U64::from(number)),
                    block_hash: None,
                })
                .collect(),
        }
    }

    fn bloom_of(pairs: &[(Address, B256)]) -> Bloom {
        let mut bloom = Bloom::ZERO;
        for (address, topic) in pairs {
            bloom.accrue_raw_log(*address, &[*topic]);
        }
        bloom
    }

    fn log(number: u64, address: Address) -> Log {
        Log {
            inner: alloy::primitives::Log {
                address,
                data: LogData::new_unchecked(vec![TOPIC], Default::default()),
            },
            block_number: Some(number),
            ..Default::default()
        }
    }

    fn grouped(logs: Vec<Log>) -> HashMap<u64, Vec<Log>> {
        let mut out: HashMap<u64, Vec<Log>> = HashMap::new();
        for log in logs {
            out.entry(log.block_number.unwrap()).or_default().push(log);
        }
        out
    }

    #[test]
    fn a_complete_answer_needs_no_second_read() {
        let blocks = [block(1, bloom_of(&[(TOKEN, TOPIC)]), &[TOKEN]), block(2, Bloom::ZERO, &[OTHER])];
        let logs = grouped(vec![log(1, TOKEN)]);
        assert_eq!(audit(&blocks, &logs, &[TOKEN], TOPIC), Audit::default());
    }

    #[test]
    fn a_block_whose_bloom_admits_a_transfer_without_a_log_is_read_again() {
        // Block 2's transfer is missing: a backend behind answered without it.
        let bloom = bloom_of(&[(TOKEN, TOPIC)]);
        let blocks = [block(1, bloom, &[]), block(2, bloom, &[]), block(3, bloom_of(&[(OTHER, TOPIC)]), &[])];
        let logs = grouped(vec![log(1, TOKEN)]);
        let audit = audit(&blocks, &logs, &[TOKEN, OTHER], TOPIC);
        assert_eq!(audit.suspect, vec![1, 2]);
        assert!(!audit.blooms_unreliable);
    }

    #[test]
    fn a_log_its_bloom_does_not_admit_marks_the_blooms_unreliable() {
        let blocks = [block(1, Bloom::ZERO, &[]), block(2, Bloom::ZERO, &[])];
        let logs = grouped(vec![log(1, TOKEN)]);
        assert!(audit(&blocks, &logs, &[TOKEN], TOPIC).blooms_unreliable);
    }

    #[test]
    fn an_empty_bloom_on_a_block_calling_a_listed_contract_is_read_again() {
        let blocks = [block(1, Bloom::ZERO, &[OTHER]), block(2, Bloom::ZERO, &[TOKEN])];
        assert_eq!(audit(&blocks, &HashMap::new(), &[TOKEN], TOPIC).suspect, vec![1]);
    }
}
