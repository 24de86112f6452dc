//! The one place that dispatches on a chain's family. What a family does
//! (watch, send, backfill, read balances and supplies, place a test
//! stablecoin) is the [`seam::ChainFamily`] trait, implemented in the
//! family's folder (`evm/family.rs`, `solana/family.rs`); its pure rules
//! (addresses, destinations, a key's address) are in [`rules`]. A new family
//! is a folder, one arm in [`of`] and one in each rule. The wings' own rules
//! that take a family as input (a transfer's route, a refund's retry) are
//! exhaustive matches the compiler lists.

pub mod keys;
pub mod rules;
pub mod seam;

use crate::{
    assets::BalanceReader,
    chain::Family,
    config::{ChainConfig, Chains},
    evm::rpc::EvmRpc,
    reconcile::reader::Reader,
    solana::rpc::SolanaRpc,
};
use seam::ChainFamily;

/// What `family` does.
pub fn of(family: Family) -> &'static dyn ChainFamily {
    match family {
        Family::Evm => &crate::evm::family::Evm,
        Family::Solana => &crate::solana::family::Solana,
    }
}

/// `config`'s chain's reader for reconciliation, at most
/// `reconcile_max_rps` requests a second.
pub fn reconcile_reader(config: &ChainConfig) -> Reader {
    let (chain, urls, rate) = (config.chain, &config.rpc_urls, config.reconcile_max_rps);
    match config.family() {
        Family::Evm => {
            Reader::Evm(EvmRpc::paced(chain, urls, config.max_block_range, config.batch_size, rate))
        }
        Family::Solana => Reader::Solana(SolanaRpc::paced(chain, urls, rate)),
    }
}

/// Reads balances on every chain of `chains`, each through its family.
pub fn balance_reader(chains: Chains) -> BalanceReader {
    let clients = chains.iter().map(|c| (c.chain, of(c.family()).balances(c))).collect();
    BalanceReader::new(chains, clients)
}
