//! The assets whose transfers wait before they are signed, held back by the
//! wing that owns the asset (an issued stablecoin whose decimals are not
//! verified yet: see `issuance::decimals`). Only a transfer not yet started
//! waits: one already signed or authorized goes on.

use std::{
    collections::HashSet,
    sync::{LazyLock, RwLock},
};

use crate::chain::Chain;

/// The held assets of this process, by chain and contract.
static HELD: LazyLock<RwLock<HashSet<(Chain, String)>>> = LazyLock::new(Default::default);

/// Holds the transfers of `contract` on `chain` back.
pub fn hold(chain: Chain, contract: &str) {
    HELD.write().expect("held assets").insert((chain, contract.to_string()));
}

/// Lets the transfers of `contract` on `chain` go on.
pub fn release(chain: Chain, contract: &str) {
    HELD.write().expect("held assets").remove(&(chain, contract.to_string()));
}

/// Whether the transfers of `contract` on `chain` are held back.
pub fn is_held(chain: Chain, contract: &str) -> bool {
    HELD.read().expect("held assets").contains(&(chain, contract.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_asset_is_held_until_released_on_its_chain_only() {
        let contract = "0x00000000000000000000000000000000000000a1";
        assert!(!is_held(Chain::BaseSepolia, contract));
        hold(Chain::BaseSepolia, contract);
        assert!(is_held(Chain::BaseSepolia, contract));
        assert!(!is_held(Chain::OptimismSepolia, contract));
        release(Chain::BaseSepolia, contract);
        assert!(!is_held(Chain::BaseSepolia, contract));
    }
}
