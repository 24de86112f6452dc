//! The one place that dispatches on a chain's family. What a family does
//! (watch, send, backfill, read balances and supplies, place a test
//! stablecoin) is the [`seam::ChainFamily`] trait, implemented in the
//! family's folder (`evm/family.rs`, `solana/family.rs`); its pure rules
//! (addresses, destinations, a key's address) are in [`rules`]. A new family
//! is a folder, one arm in [`of`] and one in each rule. The wings' own rules
//! that take a family as input (a transfer's route, a refund's retry) are
//! exhaustive matches the compiler lists.

pub mod rules;
pub mod seam;

use crate::{assets::BalanceReader, chain::Family, config::Chains};
use seam::ChainFamily;

/// What `family` does.
pub fn of(family: Family) -> &'static dyn ChainFamily {
    match family {
        Family::Evm => &crate::evm::family::Evm,
        Family::Solana => &crate::solana::family::Solana,
    }
}

/// Reads balances on every chain of `chains`, each through its family.
pub fn balance_reader(chains: Chains) -> BalanceReader {
    let clients = chains.iter().map(|c| (c.chain, of(c.family()).balances(c))).collect();
    BalanceReader::new(chains, clients)
}
