//! Baselines recorded when watching starts. On EVM an address's baseline
//! is its balance at the end of the block before its watch began; read
//! then, a block or two after the watcher reached it, any full node still
//! holds that state, where a read an hour later (the first
//! reconciliation) needs an archive node. `run` records it for each newly
//! watched address and asset once the block is settled, while it is
//! within [`RECENT`] blocks of the indexed height; an address watched
//! before stays for the first reconciliation to read from an archive node.
//!
//! Solana serves no balance at a past slot: a wallet whose watch began
//! within [`RECENT_SLOTS`] of the indexed slot has its balance read then,
//! at `confirmed`, and recorded at the slot of the answer once the
//! finalized slot has reached it; the ledger counts what came after it.

use alloy::primitives::{Address, U256};
use solana_commitment_config::CommitmentConfig;

use super::{Anchor, Baseline, ReconcileError, anchors::record_baseline, evm, solana};
use crate::{config::ChainConfig, evm::rpc::EvmRpc, solana::rpc::SolanaRpc, store::Store};

/// How far below the indexed slot a Solana watch start may be for its
/// balance read now to be recorded as its baseline: about ten minutes of
/// 400 ms slots. `run` reads it within seconds of the watch going live; a
/// wallet watched before `run` ran is left to the first reconciliation.
pub const RECENT_SLOTS: u64 = 1_500;

/// How long a Solana baseline's read waits for its slot to be finalized.
const FINALIZED_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// How far below the settled and indexed heights a watch start's state is
/// read: Geth keeps the state of the last 128 blocks by default.
pub const RECENT: u64 = 120;

/// Records the baselines of the addresses whose watch began within
/// [`RECENT`] blocks and whose block is settled: how many were recorded.
/// A read a node refuses records nothing (the first reconciliation reads
/// it again, or says it could not).
pub async fn record_new(store: &Store, rpc: &EvmRpc, config: &ChainConfig) -> Result<usize, ReconcileError> {
    let chain = config.chain;
    let Some(state) = store.chain_state(chain).await? else { return Ok(0) };
    let since = state.next_block.saturating_sub(RECENT);
    let fresh = store.unrecorded_baselines(chain, &config.native.symbol, since).await?;
    if fresh.is_empty() {
        return Ok(0);
    }
    let settled = evm::settled(store, rpc, config).await?.height;
    let assets = evm::assets(config, None)?;
    let mut recorded = 0;
    for watched in fresh {
        let block = watched.watch_from.unwrap_or_default().saturating_sub(1);
        let Ok(owner) = watched.address.parse::<Address>() else { continue };
        // Not settled yet; or, with the watcher far behind the chain, too
        // old for a full node's state.
        if block > settled || block.saturating_add(RECENT) < settled {
            continue;
        }
        for asset in &assets {
            let balance = match asset.balance(rpc, owner, block).await {
                Ok(balance) => balance,
                Err(failure) => {
                    tracing::debug!(%chain, address = watched.address, asset = asset.symbol, %failure,
                        "the balance at the watch start could not be read; the first reconciliation reads it");
                    continue;
                }
            };
            let at = Anchor { block, balance };
            record_baseline(store, chain, &watched.address, &asset.symbol, at, Baseline::Recorded).await?;
            recorded += 1;
        }
    }
    Ok(recorded)
}

/// Records the baselines of the Solana wallets whose watch began within
/// [`RECENT_SLOTS`]: each balance read now (at a slot not before the watch
/// start), recorded at its slot once the finalized slot has reached it.
/// How many were recorded.
pub async fn record_new_solana(
    store: &Store,
    rpc: &SolanaRpc,
    config: &ChainConfig,
) -> Result<usize, ReconcileError> {
    let chain = config.chain;
    let Some(state) = store.chain_state(chain).await? else { return Ok(0) };
    let since = state.next_block.saturating_sub(RECENT_SLOTS);
    let fresh = store.unrecorded_baselines(chain, &config.native.symbol, since).await?;
    if fresh.is_empty() {
        return Ok(0);
    }
    let assets = solana::assets(config, None)?;
    // Read as a reconciliation reads them (lamports batched); a read that
    // fails is left to the first reconciliation.
    let mut unread = super::Report::default();
    let read = solana::read_balances(rpc, config, fresh, &assets, &mut unread).await?;
    if !unread.failed.is_empty() {
        tracing::debug!(%chain, failed = ?unread.failed,
            "balances at the watch start could not be read; the first reconciliation reads them");
    }
    // A node behind the watch start answers a balance from before it.
    let read: Vec<_> =
        read.into_iter().filter(|(w, _, at)| at.slot + 1 >= w.watch_from.unwrap_or_default()).collect();
    let highest = read.iter().map(|(_, _, at)| at.slot).max().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + FINALIZED_WITHIN;
    while rpc.slot(CommitmentConfig::finalized()).await? < highest {
        if tokio::time::Instant::now() >= deadline {
            return Ok(0);
        }
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    }
    for (watched, asset, at) in &read {
        let anchor = Anchor { block: at.slot, balance: U256::from(at.amount) };
        record_baseline(store, chain, &watched.address, &asset.symbol, anchor, Baseline::Recorded).await?;
    }
    Ok(read.len())
}
