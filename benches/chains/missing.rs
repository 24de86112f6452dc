//! When a chain's deposits fall short of its transfers: which blocks differ.

use std::collections::BTreeMap;

use alloy::providers::Provider;
use custody_indexer::{chain::Chain, store::Store};
use sqlx::{AnyPool, Row};

use crate::nodes::EvmNode;

/// Prints, on stderr, what the watchers of the chains that fell short
/// recorded of their last steps: how far they indexed and their last error.
pub async fn health(store: &Store, recorded: &BTreeMap<Chain, u64>, sent: &BTreeMap<Chain, u64>) {
    for health in store.chain_health().await.unwrap() {
        if recorded.get(&health.chain) != sent.get(&health.chain) {
            eprintln!(
                "{}: head {:?}, indexed {:?}, last step {:?}, last error {:?} ({:?}) at {:?}",
                health.chain,
                health.head,
                health.indexed,
                health.checked_at,
                health.last_error,
                health.last_error_kind,
                health.last_error_at
            );
        }
    }
}

/// Prints, on stderr, every block of `node` whose transactions and recorded
/// deposits disagree with the load's shape (none, or one batch and its
/// native transfers).
pub async fn blocks(database_url: &str, node: &EvmNode) {
    let pool = AnyPool::connect(database_url).await.unwrap();
    let rows = sqlx::query(
        "SELECT block_number, COUNT(*) AS n FROM deposits WHERE chain = $1 GROUP BY block_number",
    )
    .bind(node.chain.as_str())
    .fetch_all(&pool)
    .await
    .unwrap();
    let recorded: std::collections::HashMap<i64, i64> =
        rows.iter().map(|r| (r.get::<i64, _>("block_number"), r.get::<i64, _>("n"))).collect();
    let head = node.anvil.head().await;
    eprintln!("{}: blocks whose deposits differ from their transactions (head {head})", node.chain);
    for number in 0..=head {
        let block = node.anvil.provider.get_block_by_number(number.into()).await.unwrap().unwrap();
        let transactions = block.transactions.len() as i64;
        let deposits = recorded.get(&(number as i64)).copied().unwrap_or(0);
        if (transactions > 0) != (deposits > 0) {
            eprintln!("  block {number}: {transactions} transactions, {deposits} deposits recorded");
        }
    }
    pool.close().await;
}
