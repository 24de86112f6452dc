//! Pure decoding: blocks, receipts, logs and traces in, detected deposits
//! out. No I/O, so it is tested on recorded mainnet responses.

use std::collections::{HashMap, HashSet};

use alloy::{
    primitives::{Address, B256, U256},
    rpc::types::{
        Log,
        trace::geth::{CallFrame, GethTrace, TraceResult},
    },
    sol,
    sol_types::SolEvent,
};

use super::rpc::{RpcBlock, RpcReceipt};
use crate::{
    amount::Amount,
    chain::Chain,
    config::ChainConfig,
    deposits::resource::{Detected, Position, TokenTransfer},
    deposits::watch::WatchSet,
};

sol! {
    /// ERC-20 `Transfer`; ERC-721 shares the signature with a fourth topic.
    event Transfer(address indexed from, address indexed to, uint256 value);
}

mod receipts;

pub use receipts::{fill_values, from_receipts, value_candidates};

pub type EvmWatchSet = WatchSet<Address>;

pub use crate::config::EIP7708_SYSTEM;

fn eip7708_system() -> Address {
    EIP7708_SYSTEM.parse().expect("the EIP-7708 address")
}

/// The assets a chain accepts, keyed for matching.
#[derive(Debug, Clone)]
pub struct EvmAssets {
    native: (String, u8),
    tokens: HashMap<Address, (String, u8)>,
    /// The first block whose native transfers are read from EIP-7708 logs.
    eip7708_from: Option<u64>,
}

impl EvmAssets {
    pub fn from_config(config: &ChainConfig) -> Self {
        let tokens = config
            .assets
            .iter()
            .filter_map(|a| Some((a.contract_address.parse().ok()?, (a.symbol.clone(), a.decimals))))
            .collect();
        Self {
            native: (config.native.symbol.clone(), config.native.decimals),
            tokens,
            eip7708_from: config.eip7708_from_block,
        }
    }

    /// The addresses whose `Transfer` logs are read: the listed tokens',
    /// and EIP-7708's when the chain file sets `eip7708_from_block`.
    pub fn contracts(&self) -> Vec<Address> {
        let mut contracts: Vec<Address> = self.tokens.keys().copied().collect();
        if self.eip7708_from.is_some() {
            contracts.push(eip7708_system());
        }
        contracts.sort();
        contracts
    }

    /// Whether `block`'s native transfers are read from its EIP-7708 logs.
    pub fn native_logged(&self, block: u64) -> bool {
        self.eip7708_from.is_some_and(|from| block >= from)
    }
}

pub fn transfer_topic() -> B256 {
    Transfer::SIGNATURE_HASH
}

/// Transactions in the block that send native value to a watched address:
/// their receipts decide whether they count.
pub fn native_candidates(block: &RpcBlock, watch: &EvmWatchSet) -> Vec<B256> {
    block
        .transactions
        .iter()
        .filter(|tx| !tx.value.is_zero() && tx.to.is_some_and(|to| watch.account_of(&to).is_some()))
        .map(|tx| tx.hash)
        .collect()
}

/// Each native candidate's receipt must be its own: of the transaction
/// asked, `(transaction, block)`, mined in the block it was read in, and
/// telling the outcome (see [`RpcReceipt::outcome_told`]). A
/// backend on another fork, where the transaction was mined in another
/// block (perhaps with another outcome), or one answering for another
/// transaction, would otherwise decide whether a deposit counts.
pub fn check_receipts(asked: &[(B256, B256)], receipts: &[RpcReceipt]) -> Result<(), String> {
    if asked.len() != receipts.len() {
        return Err(format!("{} receipts answered for {} transactions", receipts.len(), asked.len()));
    }
    for ((transaction, block), receipt) in asked.iter().zip(receipts) {
        if receipt.transaction_hash != *transaction {
            return Err(format!(
                "the receipt answered for transaction {transaction} is of {}",
                receipt.transaction_hash
            ));
        }
        if receipt.block_hash != *block {
            return Err(format!(
                "transaction {transaction} was read in block {block} but its receipt is of block {}",
                receipt.block_hash
            ));
        }
        if !receipt.outcome_told() {
            return Err(format!(
                "the receipt of transaction {transaction} holds neither a status nor a root"
            ));
        }
    }
    Ok(())
}

/// What a block's transactions moved into watched addresses: native value of
/// successful transactions, `Transfer` logs of listed tokens, and (with
/// traces) native value sent by contracts. Zero amounts, unlisted tokens,
/// removed logs and failed transactions produce nothing.
pub struct BlockInput<'a> {
    pub block: &'a RpcBlock,
    /// The successful transactions among (at least) the block's native
    /// candidates: see [`succeeded`].
    pub succeeded: &'a Succeeded,
    /// The block's `Transfer` logs of listed contracts.
    pub logs: &'a [Log],
    /// The block's call traces, when the chain enables them.
    pub traces: Option<&'a [TraceResult]>,
}

/// Hashes of transactions that succeeded.
pub type Succeeded = HashSet<B256, foldhash::fast::RandomState>;

/// The transactions whose receipts say they succeeded, read once for a
/// whole scanned range.
pub fn succeeded(receipts: &[RpcReceipt]) -> Succeeded {
    receipts.iter().filter(|r| r.succeeded()).map(|r| r.transaction_hash).collect()
}

pub fn deposits_in_block(
    chain: Chain,
    input: &BlockInput<'_>,
    watch: &EvmWatchSet,
    assets: &EvmAssets,
) -> Vec<Detected> {
    // From EIP-7708 on, every native transfer (a transaction's value and an
    // internal call's alike) is also a log: read from the logs alone, each
    // is counted once.
    let logged = assets.native_logged(input.block.number.to());
    let mut moved = Vec::new();
    if !logged {
        moved.extend(transaction_values(input, assets));
    }
    moved.extend(logged_moves(input, watch, assets, logged));
    if !logged {
        moved.extend(traced_moves(input, assets));
    }
    moved.into_iter().filter_map(|m| detected(chain, input.block, watch, m)).collect()
}

/// A transfer of an asset in a block, before it is matched to the watched
/// addresses.
struct Moved<'a> {
    tx_hash: B256,
    position: Position,
    from: Address,
    to: Address,
    symbol: &'a str,
    raw: U256,
    decimals: u8,
}

/// The deposit `moved` is, when its receiver is watched and it moves more
/// than nothing.
fn detected(chain: Chain, block: &RpcBlock, watch: &EvmWatchSet, moved: Moved<'_>) -> Option<Detected> {
    let account_id = watch.account_of(&moved.to)?;
    if moved.raw.is_zero() {
        return None;
    }
    Some(Detected {
        chain,
        tx_hash: moved.tx_hash.to_string(),
        position: moved.position,
        block_number: block.number.to(),
        block_hash: block.hash.to_string(),
        block_time_ms: block.time_ms(),
        account_id: account_id.to_string(),
        account_address: moved.to.to_checksum(None),
        source_address: moved.from.to_checksum(None),
        source_account_id: watch.account_of(&moved.from).map(|id| id.to_string()),
        currency_symbol: moved.symbol.to_string(),
        amount: Amount::from_raw(moved.raw, moved.decimals),
    })
}

/// The native value of the block's successful transactions.
fn transaction_values<'a>(
    input: &'a BlockInput<'_>,
    assets: &'a EvmAssets,
) -> impl Iterator<Item = Moved<'a>> {
    let (symbol, decimals) = (assets.native.0.as_str(), assets.native.1);
    input.block.transactions.iter().filter(|tx| input.succeeded.contains(&tx.hash)).filter_map(move |tx| {
        Some(Moved {
            tx_hash: tx.hash,
            position: Position::Native,
            from: tx.from,
            to: tx.to?,
            symbol,
            raw: tx.value,
            decimals,
        })
    })
}

/// The `Transfer` logs of listed tokens to watched addresses, and from
/// EIP-7708 on (`logged`) those of the native coin.
fn logged_moves<'a>(
    input: &BlockInput<'_>,
    watch: &EvmWatchSet,
    assets: &'a EvmAssets,
    logged: bool,
) -> Vec<Moved<'a>> {
    let (block, native) = (input.block, (assets.native.0.as_str(), assets.native.1));
    let system = eip7708_system();
    let symbol_of = |address: Address| match assets.tokens.get(&address) {
        Some((symbol, decimals)) => Some((symbol.as_str(), *decimals)),
        None => (logged && address == system).then_some(native),
    };
    // Only a block read from its EIP-7708 logs needs its transactions' values.
    let top_level = if logged { top_level_transfers(block, input.succeeded) } else { HashMap::new() };
    let mut out = Vec::new();
    for t in logged_transfers(block, input.logs, symbol_of) {
        if watch.account_of(&t.to).is_none() {
            continue;
        }
        // A transaction's own value keeps the position it had before
        // EIP-7708, so a block read again under the other rule (a chain
        // file's `eip7708_from_block` set after it was indexed, a
        // transaction re-mined across the fork) finds the same deposit.
        let own_value = t.symbol == native.0
            && t.occurrence == 0
            && top_level.get(&t.tx_hash) == Some(&(t.from, t.to, t.value));
        let position = if own_value {
            Position::Native
        } else {
            let (from, to, raw) = (format!("{:#x}", t.from), format!("{:#x}", t.to), t.value.to_string());
            Position::Log(TokenTransfer::new(t.symbol, &from, &to, &raw, t.occurrence))
        };
        let (tx_hash, from, to, symbol, raw, decimals) =
            (t.tx_hash, t.from, t.to, t.symbol, t.value, t.decimals);
        out.push(Moved { tx_hash, position, from, to, symbol, raw, decimals });
    }
    out
}

/// The native value internal calls moved, from the block's call traces.
fn traced_moves<'a>(input: &'a BlockInput<'_>, assets: &'a EvmAssets) -> Vec<Moved<'a>> {
    let (symbol, decimals) = (assets.native.0.as_str(), assets.native.1);
    let traces = input.traces.unwrap_or_default();
    let mut out = Vec::new();
    for (tx, trace) in input.block.transactions.iter().zip(traces) {
        let TraceResult::Success { result: GethTrace::CallTracer(root), .. } = trace else {
            continue;
        };
        for (path, frame) in internal_transfers(root) {
            let Some(to) = frame.to else { continue };
            let raw = frame.value.unwrap_or_default();
            out.push(Moved {
                tx_hash: tx.hash,
                position: Position::Trace(path),
                from: frame.from,
                to,
                symbol,
                raw,
                decimals,
            });
        }
    }
    out
}

/// The block's successful transactions that carry value: who sent how
/// much to whom.
fn top_level_transfers(block: &RpcBlock, succeeded: &Succeeded) -> HashMap<B256, (Address, Address, U256)> {
    block
        .transactions
        .iter()
        .filter(|tx| !tx.value.is_zero() && succeeded.contains(&tx.hash))
        .filter_map(|tx| Some((tx.hash, (tx.from, tx.to?, tx.value))))
        .collect()
}

/// From EIP-7708 on, the first successful transaction of `block` that sends
/// value to a watched address without the log the protocol emits for it:
/// a logs answer that is incomplete (a backend behind), or a chain file
/// whose `eip7708_from_block` precedes the fork. Either way the block is not
/// read, rather than a deposit missed.
pub fn unlogged_value(
    block: &RpcBlock,
    logs: &[Log],
    succeeded: &Succeeded,
    watch: &EvmWatchSet,
    assets: &EvmAssets,
) -> Option<B256> {
    if !assets.native_logged(block.number.to()) {
        return None;
    }
    let system = eip7708_system();
    let logged: HashSet<(B256, Address, Address, U256)> = logs
        .iter()
        .filter(|log| !log.removed && log.address() == system)
        .filter_map(|log| {
            let transfer = Transfer::decode_log(&log.inner).ok()?;
            Some((log.transaction_hash?, transfer.from, transfer.to, transfer.value))
        })
        .collect();
    top_level_transfers(block, succeeded)
        .into_iter()
        .filter(|(_, (_, to, _))| watch.account_of(to).is_some())
        .find(|(hash, (from, to, value))| !logged.contains(&(*hash, *from, *to, *value)))
        .map(|(hash, _)| hash)
}

/// A `Transfer` log of a listed token (or, from EIP-7708 on, of the native
/// coin), with its occurrence among the identical transfers of its
/// transaction.
struct TokenLog<'a> {
    tx_hash: B256,
    symbol: &'a str,
    decimals: u8,
    from: Address,
    to: Address,
    value: U256,
    occurrence: u32,
}

/// The block's `Transfer` logs of the addresses `symbol_of` names an asset
/// for, in log order, each numbered among the logs of its transaction that
/// move the same asset, from the same sender, to the same receiver, the
/// same amount. Removed logs and logs of another block are not counted; a
/// log of an address `symbol_of` does not know (EIP-7708's before its
/// block, say) is no transfer.
fn logged_transfers<'a>(
    block: &RpcBlock,
    logs: &[Log],
    symbol_of: impl Fn(Address) -> Option<(&'a str, u8)>,
) -> Vec<TokenLog<'a>> {
    let mut logs: Vec<&Log> =
        logs.iter().filter(|log| !log.removed && log.block_hash == Some(block.hash)).collect();
    logs.sort_by_key(|log| log.log_index);
    let mut seen: HashMap<(B256, Address, Address, Address, U256), u32, foldhash::fast::RandomState> =
        HashMap::default();
    let mut out = Vec::new();
    for log in logs {
        let Some((symbol, decimals)) = symbol_of(log.address()) else {
            continue;
        };
        let Ok(transfer) = Transfer::decode_log(&log.inner) else {
            continue;
        };
        let Some(tx_hash) = log.transaction_hash else {
            continue;
        };
        let (from, to, value) = (transfer.from, transfer.to, transfer.value);
        let count = seen.entry((tx_hash, log.address(), from, to, value)).or_default();
        let occurrence = *count;
        *count += 1;
        out.push(TokenLog { tx_hash, symbol, decimals, from, to, value, occurrence });
    }
    out
}

/// Value-carrying internal calls of a successful transaction, with their path
/// in the call tree. A frame that reverted undoes its whole subtree.
fn internal_transfers(root: &CallFrame) -> Vec<(String, &CallFrame)> {
    fn walk<'a>(frame: &'a CallFrame, path: String, out: &mut Vec<(String, &'a CallFrame)>) {
        for (i, call) in frame.calls.iter().enumerate() {
            if call.error.is_some() || call.revert_reason.is_some() {
                continue;
            }
            let path = if path.is_empty() { i.to_string() } else { format!("{path}.{i}") };
            let moves_value = matches!(call.typ.as_str(), "CALL" | "SELFDESTRUCT" | "CREATE" | "CREATE2");
            if moves_value && call.value.is_some_and(|v| !v.is_zero()) {
                out.push((path.clone(), call));
            }
            walk(call, path, out);
        }
    }
    let mut out = Vec::new();
    if root.error.is_none() {
        walk(root, String::new(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests;
