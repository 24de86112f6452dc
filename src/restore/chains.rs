//! The chains' witness of a restore: an EVM address of a platform-held key
//! whose count of mined transactions is above the store's next nonce for
//! it sent transactions the store does not know (lost in a restore, or
//! sent by a key used outside the platform). Transactions the platform
//! sends through its senders move the store's counter first, so they never
//! read as one; a platform wallet is counted from the first start that
//! finds it without a counter (see [`count_platform_wallets`]). Solana
//! keys are not yet held against the chain here.

use alloy::primitives::Address;
use futures::{StreamExt, TryStreamExt, stream};

use crate::{
    chain::{Chain, Family},
    config::ChainConfig,
    evm::rpc::EvmRpc,
    store::{Store, StoreError},
};

/// An address whose chain holds transactions the store does not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unknown {
    pub chain: Chain,
    pub address: String,
    /// The store's next nonce for it (0 when it never sent through the store).
    pub stored_next: u64,
    /// The chain's count of its mined transactions.
    pub chain_next: u64,
}

impl Unknown {
    /// The line naming it.
    pub fn line(&self) -> String {
        format!(
            "{}: {} sent {} transaction(s) the store does not know (nonces {}..{}): see `transfers recover --chain {}`",
            self.chain,
            self.address,
            self.chain_next - self.stored_next,
            self.stored_next,
            self.chain_next - 1,
            self.chain
        )
    }
}

/// Why the chain could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Chain(String),
}

/// Gives each platform wallet of `config`'s chain without a nonce counter
/// one at the chain's count now (at a start, before any is witnessed): a
/// wallet's first transaction after a backup taken since is then known
/// lost, as any later one is. Transactions sent before (a deployment, a
/// funding) are never read as lost.
pub async fn count_platform_wallets(store: &Store, config: &ChainConfig) -> Result<usize, WitnessError> {
    if config.family() != Family::Evm {
        return Ok(0);
    }
    let uncounted = store.uncounted_platform_wallets(config.chain).await?;
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);
    for address in &uncounted {
        let parsed: Address =
            address.parse().map_err(|_| WitnessError::Chain(format!("{address} is not an EVM address")))?;
        let count = rpc.nonce(parsed, false).await.map_err(|e| WitnessError::Chain(e.to_string()))?;
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
/// knows more transactions of than the store; none on a chain of another
/// family than EVM.
pub async fn unknown(store: &Store, config: &ChainConfig) -> Result<Vec<Unknown>, WitnessError> {
    if config.family() != Family::Evm {
        return Ok(Vec::new());
    }
    let held = store.held_evm_addresses(config.chain).await?;
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);
    let rpc = &rpc;
    let found: Vec<Option<Unknown>> = stream::iter(held)
        .map(|(address, stored)| async move {
            let parsed: Address = address
                .parse()
                .map_err(|_| WitnessError::Chain(format!("{address} is not an EVM address")))?;
            let chain_next =
                rpc.nonce(parsed, false).await.map_err(|e| WitnessError::Chain(e.to_string()))?;
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
