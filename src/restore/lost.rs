//! What the chains' witness of a restore finds (see [`super::chains`]),
//! as each family answers it.

use crate::{chain::Chain, store::StoreError};

/// An address whose chain holds transactions the store does not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unknown {
    pub chain: Chain,
    pub address: String,
    /// The store's next nonce for it (0 when it never sent through the store).
    pub stored_next: u64,
    /// The chain's count of its transactions, pending ones counted.
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
