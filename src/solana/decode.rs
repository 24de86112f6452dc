//! Pure decoding of Solana transactions, as `getTransaction` and `getBlock`
//! return them (`json` or `jsonParsed` encoding, versions legacy, 0 and 1),
//! into deposits. No I/O: tested on recorded mainnet responses.
//!
//! Keys are the static keys, then for version 0 the addresses loaded from
//! lookup tables; version 1 (SIMD-0385) has static keys only and carries its
//! compute budget in `message.transactionConfig`, its priority fee inside
//! `meta.fee`. Neither changes what a deposit is. A transaction of another
//! version, in another encoding or without its status is not guessed at:
//! [`readable`] names it, and the RPC edge refuses the answer holding it.
//!
//! - Only a transaction that executed successfully counts: one that failed,
//!   or was included without executing (SIMD-0290: `err` set, `fee` 0),
//!   produces nothing.
//! - SOL: a watched wallet's lamport balance rose and lamports were moved into
//!   it from another party: a system transfer from another account, or a
//!   token account owned by someone else paying out its lamports into the
//!   wallet (`CloseAccount`, `UnwrapLamports`). The amount is the balance's
//!   rise. The wallet closing or unwrapping its own token accounts returns
//!   its own lamports and is no deposit.
//! - SPL: the rise of a watched owner's balance of a listed mint, summed over
//!   the owner's token accounts from `preTokenBalances` / `postTokenBalances`
//!   (an account missing from the pre list was created in the transaction and
//!   started at 0). For a Token-2022 mint with a transfer fee that is what the
//!   wallet received, the fee withheld already taken off, never the gross.
//!   The source is the owner whose balance of the mint fell most, else the
//!   fee payer.

use std::collections::{BTreeMap, HashMap};

use alloy::primitives::U256;
use solana_transaction::versioned::TransactionVersion;
use solana_transaction_status_client_types::{
    EncodedTransaction, EncodedTransactionWithStatusMeta, UiMessage, UiTransactionStatusMeta,
    UiTransactionTokenBalance, option_serializer::OptionSerializer,
};

use crate::{
    amount::Amount,
    chain::Chain,
    config::ChainConfig,
    deposits::resource::{Detected, Position},
    deposits::watch::WatchSet,
};

pub const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";
pub const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
pub const TOKEN_2022_PROGRAM: &str = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";

/// The newest transaction version the decoder reads, and the
/// `maxSupportedTransactionVersion` every request declares.
pub const READABLE_VERSION: u8 = 1;

pub use crate::rpc::UnreadableTransaction;

/// What this release reads, as an unreadable transaction's message says it.
const READS: &str = "versions legacy to 1";

/// A transaction of a version newer than [`READABLE_VERSION`] the node
/// refused to serve; `message` is its answer.
pub fn refused(slot: Option<u64>, signature: Option<&str>, message: &str) -> UnreadableTransaction {
    UnreadableTransaction {
        slot,
        signature: signature.map(String::from),
        reads: READS,
        reason: format!("the node serves it only to clients reading newer versions ({message})"),
    }
}

/// Whether [`deposits_in_transaction`] can read `tx`: a version up to
/// [`READABLE_VERSION`] (none given is legacy), `json` encoding, with its
/// status meta. Anything else could hide a deposit, so it is an error for
/// the caller, never a transaction skipped.
pub fn readable(slot: u64, tx: &EncodedTransactionWithStatusMeta) -> Result<(), UnreadableTransaction> {
    let signature = match &tx.transaction {
        EncodedTransaction::Json(ui) => ui.signatures.first().cloned(),
        EncodedTransaction::Accounts(list) => list.signatures.first().cloned(),
        EncodedTransaction::LegacyBinary(_) | EncodedTransaction::Binary(..) => None,
    };
    let unreadable = |reason: String| UnreadableTransaction {
        slot: Some(slot),
        signature: signature.clone(),
        reads: READS,
        reason,
    };
    match &tx.version {
        None | Some(TransactionVersion::Legacy(_)) => {}
        Some(TransactionVersion::Number(n)) if *n <= READABLE_VERSION => {}
        Some(TransactionVersion::Number(n)) => return Err(unreadable(format!("version {n}"))),
    }
    let EncodedTransaction::Json(ui) = &tx.transaction else {
        return Err(unreadable("not in json encoding".into()));
    };
    if ui.signatures.is_empty() {
        return Err(unreadable("no signature".into()));
    }
    if tx.meta.is_none() {
        return Err(unreadable("no status meta".into()));
    }
    Ok(())
}

/// Watched wallets (and their token accounts) by base58 address, matched
/// without decoding every key of every transaction.
pub type SolanaWatchSet = WatchSet<Box<str>>;

#[derive(Debug, Clone)]
struct Mint {
    symbol: String,
    decimals: u8,
    program: Option<String>,
}

/// The assets a Solana chain accepts, keyed by mint.
#[derive(Debug, Clone)]
pub struct SolanaAssets {
    native: (String, u8),
    mints: HashMap<String, Mint>,
}

impl SolanaAssets {
    pub fn from_config(config: &ChainConfig) -> Self {
        let mints = config
            .assets
            .iter()
            .map(|a| {
                let mint =
                    Mint { symbol: a.symbol.clone(), decimals: a.decimals, program: a.token_program.clone() };
                (a.contract_address.clone(), mint)
            })
            .collect();
        Self { native: (config.native.symbol.clone(), config.native.decimals), mints }
    }

    /// `(mint, token program)` of every listed token.
    pub fn mints(&self) -> impl Iterator<Item = (&str, &str)> {
        self.mints.iter().map(|(mint, m)| (mint.as_str(), m.program.as_deref().unwrap_or(TOKEN_PROGRAM)))
    }
}

/// Where a transaction sits.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    pub chain: Chain,
    pub slot: u64,
    /// The block's hash (`getBlock`'s `blockhash`).
    pub block_hash: &'a str,
    /// Seconds since the epoch.
    pub block_time: u64,
}

/// Deposits into watched wallets made by one transaction. A transaction
/// that is not [`readable`] yields none: check it first.
pub fn deposits_in_transaction(
    at: Slot<'_>,
    tx: &EncodedTransactionWithStatusMeta,
    watch: &SolanaWatchSet,
    assets: &SolanaAssets,
) -> Vec<Detected> {
    let (Some(meta), EncodedTransaction::Json(ui)) = (&tx.meta, &tx.transaction) else { return Vec::new() };
    if meta.err.is_some() || meta.status.is_err() {
        return Vec::new();
    }
    let Some(signature) = ui.signatures.first() else { return Vec::new() };
    let keys = account_keys(&ui.message, meta);
    let detected = |position: Position, to: &str, from: &str, symbol: &str, raw: u128, decimals: u8| {
        let account_id = watch.account_of(to)?;
        Some(Detected {
            chain: at.chain,
            tx_hash: signature.clone(),
            position,
            block_number: at.slot,
            block_hash: at.block_hash.to_string(),
            block_time_ms: at.block_time.saturating_mul(1000),
            account_id: account_id.to_string(),
            account_address: to.to_string(),
            source_address: from.to_string(),
            source_account_id: watch.account_of(from).map(|id| id.to_string()),
            currency_symbol: symbol.to_string(),
            amount: Amount::from_raw(U256::from(raw), decimals),
        })
    };

    let mut out = Vec::new();
    let credits = credits::lamport_credits(&ui.message, meta, &keys);
    for (index, key) in keys.iter().enumerate() {
        if watch.account_of(key.as_str()).is_none() {
            continue;
        }
        let (Some(pre), Some(post)) = (meta.pre_balances.get(index), meta.post_balances.get(index)) else {
            continue;
        };
        let Some(rise) = post.checked_sub(*pre).filter(|r| *r > 0) else { continue };
        let Some(source) = credits
            .iter()
            .filter(|t| t.to == *key && t.from != *key)
            .max_by_key(|t| t.lamports)
            .map(|t| t.from.as_str())
        else {
            continue;
        };
        let position = Position::Lamports { wallet: key.clone() };
        out.extend(detected(position, key, source, &assets.native.0, u128::from(rise), assets.native.1));
    }

    let changes = token_changes(meta);
    for ((owner, mint), change) in &changes {
        let Some(listed) = assets.mints.get(mint) else { continue };
        if change.delta <= 0 || watch.account_of(owner.as_str()).is_none() {
            continue;
        }
        if listed.program.as_ref().is_some_and(|p| change.program.as_ref().is_some_and(|q| p != q)) {
            continue;
        }
        let source = changes
            .iter()
            .filter(|((o, m), c)| m == mint && o != owner && c.delta < 0)
            .min_by_key(|(_, c)| c.delta)
            .map(|((o, _), _)| o.as_str())
            .or(keys.first().map(String::as_str))
            .unwrap_or_default();
        let position = Position::Token { owner: owner.clone(), mint: mint.clone() };
        out.extend(detected(position, owner, source, &listed.symbol, change.delta as u128, listed.decimals));
    }
    out
}

/// Every account key in index order: static keys, then for version 0 the
/// addresses loaded from lookup tables (writable, then read-only). Parsed
/// messages list them all already.
pub fn account_keys(message: &UiMessage, meta: &UiTransactionStatusMeta) -> Vec<String> {
    match message {
        UiMessage::Parsed(parsed) => parsed.account_keys.iter().map(|k| k.pubkey.clone()).collect(),
        UiMessage::Raw(raw) => {
            let mut keys = raw.account_keys.clone();
            if let OptionSerializer::Some(loaded) = &meta.loaded_addresses {
                keys.extend(loaded.writable.iter().cloned());
                keys.extend(loaded.readonly.iter().cloned());
            }
            keys
        }
    }
}

/// How much `owner`'s balance changed over a transaction: its lamports
/// (`mint` none; the fee included when it paid it), or its balance of
/// `mint` across every token account it owns. Zero for a transaction
/// without metadata.
pub fn balance_change(tx: &EncodedTransactionWithStatusMeta, owner: &str, mint: Option<&str>) -> i128 {
    let (Some(meta), EncodedTransaction::Json(ui)) = (&tx.meta, &tx.transaction) else { return 0 };
    match mint {
        Some(mint) => token_changes(meta).get(&(owner.to_string(), mint.to_string())).map_or(0, |c| c.delta),
        None => {
            let keys = account_keys(&ui.message, meta);
            let Some(index) = keys.iter().position(|k| k == owner) else { return 0 };
            let (pre, post) = (meta.pre_balances.get(index), meta.post_balances.get(index));
            post.zip(pre).map_or(0, |(post, pre)| i128::from(*post) - i128::from(*pre))
        }
    }
}

/// The change of each owner's balance of each mint over the transaction.
#[derive(Debug, Default)]
struct Change {
    delta: i128,
    program: Option<String>,
}

fn token_changes(meta: &UiTransactionStatusMeta) -> BTreeMap<(String, String), Change> {
    let mut changes: BTreeMap<(String, String), Change> = BTreeMap::new();
    let mut apply = |balances: &OptionSerializer<Vec<UiTransactionTokenBalance>>, sign: i128| {
        let OptionSerializer::Some(balances) = balances else { return };
        for balance in balances {
            let OptionSerializer::Some(owner) = &balance.owner else { continue };
            let Ok(amount) = balance.ui_token_amount.amount.parse::<u64>() else { continue };
            let change = changes.entry((owner.clone(), balance.mint.clone())).or_default();
            change.delta += sign * i128::from(amount);
            if let OptionSerializer::Some(program) = &balance.program_id {
                change.program = Some(program.clone());
            }
        }
    };
    apply(&meta.pre_token_balances, -1);
    apply(&meta.post_token_balances, 1);
    changes
}

mod credits;
#[cfg(test)]
mod tests;
