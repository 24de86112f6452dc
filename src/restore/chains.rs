//! The chains' witness of a restore: an address of a platform-held key
//! that sent transactions the store does not know (lost in a restore, or
//! sent by a key used outside the platform). Each family says how it finds
//! them (see [`crate::family::seam::ChainFamily::lost_senders`]): on EVM
//! chains, an address whose count of mined transactions is above the
//! store's next nonce for it. Transactions the platform sends through its
//! senders move the store's counter first, so they never read as one; a
//! platform wallet is counted from the first start that finds it without a
//! counter (see [`count_platform_wallets`]). Solana keys are not yet held
//! against the chain.

pub use super::lost::{Unknown, WitnessError};
use crate::{config::ChainConfig, family, store::Store};

/// Every address of a platform-held key on `config`'s chain that sent
/// transactions the store does not know.
pub async fn unknown(store: &Store, config: &ChainConfig) -> Result<Vec<Unknown>, WitnessError> {
    family::of(config.family()).lost_senders(store, config).await
}

/// Gives each platform wallet of `config`'s chain without a counter of
/// its transactions one at the chain's count now (at a start, before any
/// is witnessed): a wallet's first transaction after a backup taken since
/// is then known lost, as any later one is. Transactions sent before (a
/// deployment, a funding) are never read as lost. How many.
pub async fn count_platform_wallets(store: &Store, config: &ChainConfig) -> Result<usize, WitnessError> {
    family::of(config.family()).count_wallets(store, config).await
}
