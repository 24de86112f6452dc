//! The EVM family's witness of a restore (see [`crate::restore::chains`]):
//! an address of a platform-held key whose count of mined transactions is
//! above the store's next nonce for it.

use alloy::primitives::Address;
use futures::{StreamExt, TryStreamExt, stream};

use super::rpc::EvmRpc;
use crate::{
    config::ChainConfig,
    restore::lost::{Unknown, WitnessError},
    store::{Store, StoreError},
};

/// Gives each platform wallet of `config`'s chain without a nonce counter
/// one at the chain's count now (at a start, before any is witnessed): a
/// wallet's first transaction after a backup taken since is then known
/// lost, as any later one is. Transactions sent before (a deployment, a
/// funding) are never read as lost.
pub(super) async fn count_platform_wallets(
    store: &Store,
    config: &ChainConfig,
) -> Result<usize, WitnessError> {
    let uncounted = store.uncounted_platform_wallets(config.chain).await?;
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);
    for address in &uncounted {
        let parsed: Address =
            address.parse().map_err(|_| WitnessError::Chain(format!("{address} is not an EVM address")))?;
        let count = rpc.nonce(parsed, true).await.map_err(|e| WitnessError::Chain(e.to_string()))?;
        let mut tx = store.begin().await?;
        crate::store::recovered::advance_nonce(&mut tx, config.chain, &parsed.to_checksum(None), count)
            .await?;
        tx.commit().await.map_err(StoreError::from)?;
    }
    Ok(uncounted.len())
}

/// How many addresses are asked at once.
const AT_ONCE: usize = 8;

/// Every address of a platform-held key on `config`'s chain the chain
/// knows more transactions of than the store, pending ones counted (a
/// lost transaction still waiting in the node's pool is found too).
pub(super) async fn unknown(store: &Store, config: &ChainConfig) -> Result<Vec<Unknown>, WitnessError> {
    let held = store.held_evm_addresses(config.chain).await?;
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);
    let rpc = &rpc;
    let found: Vec<Option<Unknown>> = stream::iter(held)
        .map(|(address, stored)| async move {
            let parsed: Address = address
                .parse()
                .map_err(|_| WitnessError::Chain(format!("{address} is not an EVM address")))?;
            let chain_next = rpc.nonce(parsed, true).await.map_err(|e| WitnessError::Chain(e.to_string()))?;
            let stored_next = stored.unwrap_or(0);
            Ok::<_, WitnessError>((chain_next > stored_next).then(|| Unknown {
                chain: config.chain,
                address: parsed.to_checksum(None),
                stored_next,
                chain_next,
            }))
        })
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().collect())
}
