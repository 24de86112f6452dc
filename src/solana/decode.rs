//! Pure decoding of Solana transactions, as `getTransaction` and `getBlock`
//! return them (`json` or `jsonParsed` encoding, versions legacy and 0), into
//! deposits. No I/O: tested on recorded mainnet responses.
//!
//! - SOL: a successful transaction that raises a watched wallet's lamport
//!   balance and carries a system transfer into it from another account; the
//!   amount is the balance's rise.
//! - SPL: the rise of a watched owner's balance of a listed mint, summed over
//!   the owner's token accounts from `preTokenBalances` / `postTokenBalances`
//!   (an account missing from the pre list was created in the transaction and
//!   started at 0). The source is the owner whose balance of the mint fell
//!   most, else the fee payer.

use std::collections::{BTreeMap, HashMap};

use alloy::primitives::U256;
use solana_transaction_status_client_types::{
    EncodedTransaction, EncodedTransactionWithStatusMeta, UiInstruction, UiMessage, UiParsedInstruction,
    UiTransactionStatusMeta, UiTransactionTokenBalance, option_serializer::OptionSerializer,
};

use crate::{
    amount::Amount,
    chain::Chain,
    config::ChainConfig,
    deposit::{Detected, Position},
    watch::WatchSet,
};

pub const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";
pub const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
pub const TOKEN_2022_PROGRAM: &str = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";

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

/// Deposits into watched wallets made by one transaction.
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
            block_time: at.block_time,
            account_id: account_id.to_string(),
            account_address: to.to_string(),
            source_address: from.to_string(),
            source_account_id: watch.account_of(from).map(|id| id.to_string()),
            currency_symbol: symbol.to_string(),
            amount: Amount::from_raw(U256::from(raw), decimals),
        })
    };

    let mut out = Vec::new();
    let transfers = system_transfers(&ui.message, meta, &keys);
    for (index, key) in keys.iter().enumerate() {
        if watch.account_of(key.as_str()).is_none() {
            continue;
        }
        let (Some(pre), Some(post)) = (meta.pre_balances.get(index), meta.post_balances.get(index)) else {
            continue;
        };
        let Some(rise) = post.checked_sub(*pre).filter(|r| *r > 0) else { continue };
        let Some(source) = transfers
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

/// A system-program transfer, top-level or by CPI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemTransfer {
    pub from: String,
    pub to: String,
    pub lamports: u64,
}

fn system_transfers(
    message: &UiMessage,
    meta: &UiTransactionStatusMeta,
    keys: &[String],
) -> Vec<SystemTransfer> {
    let outer: Vec<&UiInstruction> = match message {
        UiMessage::Parsed(parsed) => parsed.instructions.iter().collect(),
        UiMessage::Raw(_) => Vec::new(),
    };
    let mut out: Vec<SystemTransfer> = outer.into_iter().filter_map(|ix| system_transfer(ix, keys)).collect();
    if let UiMessage::Raw(raw) = message {
        for ix in &raw.instructions {
            let accounts: Vec<Option<&String>> = ix.accounts.iter().map(|i| keys.get(*i as usize)).collect();
            let program = keys.get(ix.program_id_index as usize);
            out.extend(compiled_transfer(program.map(String::as_str), &accounts, &ix.data));
        }
    }
    if let OptionSerializer::Some(inner) = &meta.inner_instructions {
        out.extend(
            inner.iter().flat_map(|set| set.instructions.iter()).filter_map(|ix| system_transfer(ix, keys)),
        );
    }
    out
}

fn system_transfer(ix: &UiInstruction, keys: &[String]) -> Option<SystemTransfer> {
    match ix {
        UiInstruction::Compiled(c) => {
            let accounts: Vec<Option<&String>> = c.accounts.iter().map(|i| keys.get(*i as usize)).collect();
            compiled_transfer(keys.get(c.program_id_index as usize).map(String::as_str), &accounts, &c.data)
        }
        UiInstruction::Parsed(UiParsedInstruction::PartiallyDecoded(p)) => {
            let accounts: Vec<Option<&String>> = p.accounts.iter().map(Some).collect();
            compiled_transfer(Some(&p.program_id), &accounts, &p.data)
        }
        UiInstruction::Parsed(UiParsedInstruction::Parsed(p)) => {
            if p.program_id != SYSTEM_PROGRAM {
                return None;
            }
            let kind = p.parsed.get("type")?.as_str()?;
            if kind != "transfer" && kind != "transferWithSeed" {
                return None;
            }
            let info = p.parsed.get("info")?;
            Some(SystemTransfer {
                from: info.get("source")?.as_str()?.to_string(),
                to: info.get("destination")?.as_str()?.to_string(),
                lamports: info.get("lamports")?.as_u64()?,
            })
        }
    }
}

/// Decodes `Transfer` (2: from, to) and `TransferWithSeed` (11: from, base, to)
/// of the system program from base58 instruction data.
fn compiled_transfer(
    program: Option<&str>,
    accounts: &[Option<&String>],
    data: &str,
) -> Option<SystemTransfer> {
    if program != Some(SYSTEM_PROGRAM) {
        return None;
    }
    let data = bs58::decode(data).into_vec().ok()?;
    let kind = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?);
    let lamports = u64::from_le_bytes(data.get(4..12)?.try_into().ok()?);
    let (from, to) = match kind {
        2 => (accounts.first()?, accounts.get(1)?),
        11 => (accounts.first()?, accounts.get(2)?),
        _ => return None,
    };
    Some(SystemTransfer { from: (*from)?.clone(), to: (*to)?.clone(), lamports })
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

#[cfg(test)]
mod tests;
