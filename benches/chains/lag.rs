//! How far each chain's indexing trails its head over the measured window:
//! an EVM node's own head against the indexed height the watcher records
//! for `health` (so the wait for the next poll counts), a Solana chain's
//! recorded head; with the block time the watchers measured.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use alloy::providers::Provider;
use custody_indexer::{chain::Chain, store::Store};
use tokio::time::Instant;

use crate::nodes::EvmNode;

#[derive(Default)]
pub struct Lag {
    /// The most blocks the indexed height trailed the head, of each reading.
    pub max_blocks: u64,
    /// The block time the watcher measured last.
    pub block_time: Option<Duration>,
}

/// Reads every chain's lag twice a second for `window`.
pub async fn watch(store: &Store, window: Duration, evm: &[Arc<EvmNode>]) -> BTreeMap<Chain, Lag> {
    let deadline = Instant::now() + window;
    let mut lags: BTreeMap<Chain, Lag> = BTreeMap::new();
    while Instant::now() < deadline {
        let mut heads = BTreeMap::new();
        for node in evm {
            if let Ok(head) = node.anvil.provider.get_block_number().await {
                heads.insert(node.chain, head);
            }
        }
        for row in store.chain_health().await.unwrap() {
            let lag = lags.entry(row.chain).or_default();
            let head = heads.get(&row.chain).copied().or(row.head);
            let behind = head.zip(row.indexed).map_or(0, |(head, indexed)| head.saturating_sub(indexed));
            lag.max_blocks = lag.max_blocks.max(behind);
            lag.block_time = row.block_time.or(lag.block_time);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    lags
}

/// One line per chain: its measured block time and its largest lag, in
/// blocks and in seconds.
pub fn print(lags: &BTreeMap<Chain, Lag>) {
    for (chain, lag) in lags {
        let (time, seconds) = match lag.block_time {
            Some(block) => (
                format!("{:.0} ms", block.as_secs_f64() * 1000.0),
                format!("{:.1} s", block.as_secs_f64() * lag.max_blocks as f64),
            ),
            None => ("not measured".into(), "-".into()),
        };
        println!(
            "    {:<17} block time {time:>12}, lag at most {:>4} blocks ({seconds})",
            chain.as_str(),
            lag.max_blocks
        );
    }
}
