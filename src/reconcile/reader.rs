//! A chain's balance reader for reconciliation, of the chain's family,
//! made by [`crate::family::reconcile_reader`].

use crate::{evm::rpc::EvmRpc, solana::rpc::SolanaRpc};

/// A chain's balance reader, at most `reconcile_max_rps` requests a second.
pub enum Reader {
    Evm(EvmRpc),
    Solana(SolanaRpc),
}
