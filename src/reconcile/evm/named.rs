//! What moved an asset into or out of one address in one block where its
//! difference changed: the watcher's own decoder over the block, its logs
//! (from the logs answer and from the receipts) and, where the node serves
//! them, its call traces.

use alloy::primitives::{Address, B256, U256};

use super::{Asset, One};
use crate::{
    amount::Amount,
    deposits::{
        resource::{Detected, Position},
        watch::WatchSet,
    },
    evm::decode::{self, BlockInput, EvmAssets},
    reconcile::Movement,
    rpc::RpcFailure,
};

impl One<'_> {
    /// What moved this asset into or out of the address in `block`: the
    /// watcher's decoder over the block, its logs and (where the node
    /// serves them) its call traces, for what came in; the address's own
    /// transactions and the token's logs from it, for what went out.
    /// The credits are the decoder's own findings, as a scan would record
    /// them.
    pub(super) async fn movements(&self, number: u64) -> Result<(Vec<Movement>, Vec<Detected>), RpcFailure> {
        let blocks = self.rpc.blocks(number, number).await?;
        let Some(block) = blocks.first() else { return Ok((Vec::new(), Vec::new())) };
        let hashes: Vec<B256> = block.transactions.iter().map(|tx| tx.hash).collect();
        let receipts = self.rpc.receipts_with_logs(&hashes).await?;
        let succeeded: decode::Succeeded =
            receipts.iter().filter(|r| r.receipt.succeeded()).map(|r| r.receipt.transaction_hash).collect();
        let assets = EvmAssets::from_config(self.config);
        let contracts = assets.contracts();
        let logs = if contracts.is_empty() {
            Vec::new()
        } else {
            let answered =
                self.rpc.logs_by_hash(&[block.hash], &contracts, decode::transfer_topic()).await?.concat();
            transfer_logs(answered, &receipts, &contracts)
        };
        let traces = self.rpc.traces(block.hash).await.ok();
        let watch = WatchSet::build(
            vec![(self.watched.address.clone(), self.watched.account_id.clone())],
            |a: &str| a.parse::<Address>().ok(),
        );
        let input = BlockInput { block, succeeded: &succeeded, logs: &logs, traces: traces.as_deref() };
        let credits: Vec<Detected> = decode::deposits_in_block(self.config.chain, &input, &watch, &assets)
            .into_iter()
            .filter(|d| d.currency_symbol == self.asset.symbol)
            .collect();
        let mut found: Vec<Movement> = credits
            .iter()
            .map(|d| Movement {
                transaction_hash: d.tx_hash.clone(),
                block: number,
                direction: "in",
                amount: d.amount.to_string(),
                how: how(&d.position),
            })
            .collect();
        found.extend(outflows(block, &logs, &succeeded, self.owner, self.asset));
        Ok((found, credits))
    }
}

/// The token `Transfer` logs of a block: those the logs answer holds and
/// those its receipts hold, once each (by transaction and log index), so
/// that a log one answer left out is still decoded.
fn transfer_logs(
    answered: Vec<alloy::rpc::types::Log>,
    receipts: &[crate::evm::rpc::RpcReceiptLogs],
    contracts: &[Address],
) -> Vec<alloy::rpc::types::Log> {
    let topic = decode::transfer_topic();
    let key = |log: &alloy::rpc::types::Log| (log.transaction_hash, log.log_index);
    let mut seen: std::collections::HashSet<_> = answered.iter().map(key).collect();
    let mut logs = answered;
    for log in receipts.iter().flat_map(|r| &r.logs) {
        let transfer = contracts.contains(&log.address()) && log.topics().first() == Some(&topic);
        if transfer && seen.insert(key(log)) {
            logs.push(log.clone());
        }
    }
    logs.sort_by_key(|log| log.log_index);
    logs
}

/// What left `owner` in `block` in `asset`: its own successful
/// transactions' value, or the token's `Transfer` logs from it.
fn outflows(
    block: &crate::evm::rpc::RpcBlock,
    logs: &[alloy::rpc::types::Log],
    succeeded: &decode::Succeeded,
    owner: Address,
    asset: &Asset,
) -> Vec<Movement> {
    let number = block.number.to();
    let amount = |raw: U256| Amount::from_raw(raw, asset.decimals).to_string();
    let out = |hash: String, raw: U256, how: &'static str| Movement {
        transaction_hash: hash,
        block: number,
        direction: "out",
        amount: amount(raw),
        how,
    };
    match asset.token {
        None => block
            .transactions
            .iter()
            .filter(|tx| tx.from == owner && succeeded.contains(&tx.hash) && !tx.value.is_zero())
            .map(|tx| out(tx.hash.to_string(), tx.value, "top_level"))
            .collect(),
        Some(token) => logs
            .iter()
            .filter(|log| log.address() == token && log.topics().get(1) == Some(&owner.into_word()))
            .map(|log| {
                let raw = U256::from_be_slice(log.data().data.get(..32).unwrap_or_default());
                out(log.transaction_hash.unwrap_or_default().to_string(), raw, "token_log")
            })
            .collect(),
    }
}

/// How a decoded movement moved: a transaction's own value, a token's
/// `Transfer` log, or a contract's internal call.
fn how(position: &Position) -> &'static str {
    match position {
        Position::Trace(_) => "internal_call",
        Position::Log(_) => "token_log",
        _ => "top_level",
    }
}
