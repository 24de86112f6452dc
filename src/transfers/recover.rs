//! `transfers recover --chain CHAIN`: after a restore, every transaction of
//! a platform-held key that the chain holds and the store does not (see
//! [`crate::restore::chains`]) is found, block by block from the store's
//! last record of its sender, and recorded in one transaction with the
//! `transfers.recovered` entry that reopens the chain: one that moved an
//! account's money as a transfer (`CONFIRMED` or `FAILED` as it was mined,
//! request id `recovered:` and its hash, listed under that account), every
//! one in `recovered_transactions`, and each sender's nonce moved up to
//! the chain's count. Its sender then resumes and its transfers are
//! accepted again.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use serde::{Deserialize, Serialize};

use super::recovered::{Moved, classify, selector};
use alloy::rpc::types::BlockNumberOrTag;

use crate::{
    audit::{self, Actor, Record},
    config::{ChainConfig, Confirmation},
    evm::rpc::{EvmRpc, InBlock},
    restore::{
        RECOVERED,
        chains::{self, Unknown, WitnessError},
    },
    store::{
        Store, StoreError,
        recovered::{self, Owner, RecoveredTransfer, RecoveredTx},
    },
};

/// Why a chain was not recorded recovered.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// Not every unknown transaction was found: nothing was recorded.
    #[error("{0}")]
    Incomplete(String),
    #[error("reason: say what was restored and what was checked")]
    NoReason,
    /// The chain did not answer: try again.
    #[error("the chain did not answer: {0}")]
    Chain(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RecoverError {
    /// Whether the same recovery, asked again, may succeed as it is.
    pub fn is_retryable(&self) -> bool {
        match self {
            RecoverError::Chain(_) => true,
            RecoverError::Store(error) => error.retryable(),
            RecoverError::Incomplete(_) | RecoverError::NoReason => false,
        }
    }
}

/// One transaction recorded, as `transfers recover` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Listed {
    pub hash: String,
    pub sender: String,
    /// The transfer recorded for it; none for a platform wallet's own.
    pub transfer_id: Option<String>,
    pub account_id: Option<String>,
    pub amount: Option<String>,
    pub currency_symbol: Option<String>,
    pub destination: Option<String>,
    /// `CONFIRMED` or `FAILED` for a transfer; `MINED` or `REVERTED` for a
    /// platform wallet's own.
    pub status: String,
}

/// What a recovery recorded.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Recovery {
    pub chain: String,
    pub recorded_by: i64,
    pub transactions: Vec<Listed>,
}

/// How many blocks are read at once.
const BLOCKS_AT_ONCE: u64 = 50;

/// Finds and records every transaction of a platform-held key on
/// `config`'s chain the store does not know, and the chain recovered, on
/// `actor`'s word.
pub async fn recover(
    store: &Store,
    config: &ChainConfig,
    actor: &Actor,
    reason: &str,
) -> Result<Recovery, RecoverError> {
    if reason.trim().is_empty() {
        return Err(RecoverError::NoReason);
    }
    let chain_error =
        |e: &dyn std::fmt::Display| RecoverError::Chain(crate::redact::redact_urls(&e.to_string()));
    let unknown = chains::unknown(store, config).await.map_err(|error| match error {
        WitnessError::Store(error) => RecoverError::Store(error),
        WitnessError::Chain(why) => chain_error(&why),
    })?;
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);
    let found = find(store, (&rpc, config), &unknown).await?;
    let mut records = Vec::with_capacity(found.len());
    let mut claimed = Vec::new();
    for block in &found {
        let receipt =
            rpc.fee_receipt(block.tx.hash).await.map_err(|e| chain_error(&e))?.ok_or_else(|| {
                RecoverError::Chain(format!("transaction {} has no receipt yet: try again", block.tx.hash))
            })?;
        let fee = receipt.execution_fee() + receipt.l1_fee.unwrap_or_default();
        let row = recovered_tx(config, block, receipt.succeeded(), fee);
        let transfer = transfer_of(store, config, block, &mut claimed).await?;
        records.push((row, transfer));
    }
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    for (row, transfer) in &records {
        recovered::record(&mut tx, row, transfer.as_ref()).await?;
    }
    for u in &unknown {
        recovered::advance_nonce(&mut tx, config.chain, &u.address, u.chain_next).await?;
    }
    let record = Record {
        actor,
        action: RECOVERED,
        target_kind: "chain",
        target_id: config.chain.as_str(),
        organization_id: None,
        reason: Some(reason),
        request_id: None,
        detail: None,
    };
    let seq = audit::append(&mut tx, store.cipher().ok(), record).await?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(chain = %config.chain, recorded = records.len(), entry = seq, "chain recovered after a restore");
    let transactions = records.iter().map(|(row, transfer)| listed(row, transfer.as_ref())).collect();
    Ok(Recovery { chain: config.chain.as_str().to_string(), recorded_by: seq, transactions })
}

/// Every transaction of `unknown`'s addresses at the nonces the store
/// lacks, read block by block from the lowest block the store last knew
/// one of them at, up to the chain's head; all of them, or an error.
async fn find(
    store: &Store,
    (rpc, config): (&EvmRpc, &ChainConfig),
    unknown: &[Unknown],
) -> Result<Vec<InBlock>, RecoverError> {
    let chain_error =
        |e: &dyn std::fmt::Display| RecoverError::Chain(crate::redact::redact_urls(&e.to_string()));
    let mut wanted: BTreeMap<Address, (u64, u64)> = BTreeMap::new();
    let mut from = u64::MAX;
    for u in unknown {
        let address: Address = u
            .address
            .parse()
            .map_err(|_| RecoverError::Incomplete(format!("{} is not an address", u.address)))?;
        wanted.insert(address, (u.stored_next, u.chain_next));
        from = from.min(store.last_known_block(u.chain, &u.address).await?.unwrap_or(0));
    }
    let missing: u64 = unknown.iter().map(|u| u.chain_next - u.stored_next).sum();
    if missing == 0 {
        return Ok(Vec::new());
    }
    // Only what is final: a transaction still pending, or in a block a
    // reorg may drop, is asked for again later.
    let Some(head) = confirmed(rpc, config).await.map_err(|e| chain_error(&e))? else {
        return Err(RecoverError::Chain("no block is final yet: try again".into()));
    };
    // One transaction per (sender, nonce): a node answering one twice
    // counts it once.
    let mut by_nonce: BTreeMap<(Address, u64), InBlock> = BTreeMap::new();
    let mut at = from;
    while at <= head && (by_nonce.len() as u64) < missing {
        let to = head.min(at + BLOCKS_AT_ONCE - 1);
        for block in rpc.sent_in(at, to).await.map_err(|e| chain_error(&e))? {
            let nonce = block.tx.nonce.to::<u64>();
            if wanted.get(&block.tx.from).is_some_and(|(low, high)| (*low..*high).contains(&nonce)) {
                by_nonce.entry((block.tx.from, nonce)).or_insert(block);
            }
        }
        at = to + 1;
    }
    if (by_nonce.len() as u64) < missing {
        return Err(RecoverError::Chain(format!(
            "found {} of the {missing} transactions the store lacks in final blocks {from} to {head} (the rest may \
             be pending or not final yet): nothing was recorded; try again",
            by_nonce.len()
        )));
    }
    Ok(by_nonce.into_values().collect())
}

/// The newest block the chain's confirmation policy holds final.
async fn confirmed(rpc: &EvmRpc, config: &ChainConfig) -> Result<Option<u64>, crate::rpc::RpcFailure> {
    Ok(match config.confirmation {
        Confirmation::Depth(depth) => rpc.head().await?.checked_sub(depth),
        Confirmation::Finalized => rpc.tagged(BlockNumberOrTag::Finalized).await?,
    })
}

/// The row of a found transaction.
fn recovered_tx(config: &ChainConfig, block: &InBlock, succeeded: bool, fee: U256) -> RecoveredTx {
    let tx = &block.tx;
    RecoveredTx {
        chain: config.chain,
        hash: tx.hash.to_string(),
        sender: tx.from.to_checksum(None),
        nonce: tx.nonce.to(),
        to: tx.to.map(|to| to.to_checksum(None)),
        value: tx.value.to_string(),
        selector: selector(&tx.input),
        succeeded,
        block_number: block.number,
        block_hash: block.hash.to_string(),
        fee_raw: fee.to_string(),
        gas_limit: tx.gas.to(),
        at: i64::try_from(block.time_ms).unwrap_or(i64::MAX).saturating_mul(1000),
    }
}

/// The transfer a found transaction is recorded as, when it moved the
/// money of an account whose keys the service holds: the transfer the
/// store holds unsent that asked for exactly that move (one not `claimed`
/// by another transaction of this recovery), settled by it, or a
/// transfer of its own.
async fn transfer_of(
    store: &Store,
    config: &ChainConfig,
    block: &InBlock,
    claimed: &mut Vec<String>,
) -> Result<Option<RecoveredTransfer>, StoreError> {
    let tx = &block.tx;
    let tokens: Vec<Address> = config.assets.iter().filter_map(|a| a.contract_address.parse().ok()).collect();
    let (from, to, amount, symbol, decimals) = match classify(tx.from, tx.to, tx.value, &tx.input, &tokens) {
        Moved::Other => return Ok(None),
        Moved::Native { to, amount } => {
            (tx.from, to, amount, config.native.symbol.clone(), config.native.decimals)
        }
        Moved::Token { asset, from, to, amount } => {
            let listed =
                config.assets.iter().filter(|a| a.contract_address.parse::<Address>().is_ok()).nth(asset);
            let Some(listed) = listed else { return Ok(None) };
            (from, to, amount, listed.symbol.clone(), listed.decimals)
        }
    };
    let Some(owner) = store.keyed_owner(config.chain, &from.to_checksum(None)).await? else {
        return Ok(None);
    };
    let route = route(&owner, from != tx.from);
    let (source, destination) = (from.to_checksum(None), to.to_checksum(None));
    let like =
        store.unsent_like(config.chain, (&source, &destination), (&symbol, &amount.to_string())).await?;
    let settles = like.into_iter().find(|id| !claimed.contains(id));
    claimed.extend(settles.clone());
    Ok(Some(RecoveredTransfer {
        id: settles.clone().unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        settles,
        owner,
        source,
        destination,
        symbol,
        amount_raw: amount.to_string(),
        decimals,
        route,
    }))
}

/// The route a recovered transfer is shown with.
fn route(owner: &Owner, authorized: bool) -> &'static str {
    match (owner.kind.as_str(), authorized) {
        ("OMNIBUS", _) => "OMNIBUS",
        (_, true) => "AUTHORIZATION",
        _ => "TOP_UP",
    }
}

fn listed(row: &RecoveredTx, transfer: Option<&RecoveredTransfer>) -> Listed {
    let status = match (transfer.is_some(), row.succeeded) {
        (true, true) => "CONFIRMED",
        (true, false) => "FAILED",
        (false, true) => "MINED",
        (false, false) => "REVERTED",
    };
    let amount = transfer.and_then(|t| {
        let raw: U256 = t.amount_raw.parse().ok()?;
        Some(crate::amount::Amount::from_raw(raw, t.decimals).to_string())
    });
    Listed {
        hash: row.hash.clone(),
        sender: row.sender.clone(),
        transfer_id: transfer.map(|t| t.id.clone()),
        account_id: transfer.map(|t| t.owner.account_id.clone()),
        amount,
        currency_symbol: transfer.map(|t| t.symbol.clone()),
        destination: transfer.map(|t| t.destination.clone()),
        status: status.to_string(),
    }
}
