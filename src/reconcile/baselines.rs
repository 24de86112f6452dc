//! Baselines recorded when watching starts. An address's baseline is its
//! balance at the end of the block before its watch began; read then, a
//! block or two after the watcher reached it, any full node still holds
//! that state, where a read an hour later (the first reconciliation) needs
//! an archive node. `run` records it for each newly watched address and
//! asset once the block is settled, while it is within [`RECENT`] blocks
//! of the indexed height; an address watched before stays for the first
//! reconciliation to read from an archive node.

use alloy::primitives::Address;

use super::{Anchor, Baseline, ReconcileError, evm};
use crate::{config::ChainConfig, evm::rpc::EvmRpc, store::Store};

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
            store.record_baseline(chain, &watched.address, &asset.symbol, at, Baseline::Recorded).await?;
            recorded += 1;
        }
    }
    Ok(recorded)
}
