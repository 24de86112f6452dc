//! The assets whose transfers wait before they are signed, held back by the
//! wing that owns the asset, each for its reason (an issued stablecoin whose
//! decimals are not verified yet, see `issuance::decimals`; an asset whose
//! contract code is not found yet, see `evm::asset_code`): an asset waits
//! while any reason holds it. Only a transfer not yet started waits: one
//! already signed or authorized goes on.

use std::{
    collections::HashSet,
    sync::{LazyLock, RwLock},
};

use crate::chain::Chain;

/// One asset held back: its chain, its contract and why.
type Hold = (Chain, String, &'static str);

/// The held assets of this process.
static HELD: LazyLock<RwLock<HashSet<Hold>>> = LazyLock::new(Default::default);

/// Holds the transfers of `contract` on `chain` back for `why`.
pub fn hold(chain: Chain, contract: &str, why: &'static str) {
    HELD.write().expect("held assets").insert((chain, contract.to_string(), why));
}

/// Lets the transfers of `contract` on `chain` go on as far as `why` goes.
pub fn release(chain: Chain, contract: &str, why: &'static str) {
    HELD.write().expect("held assets").remove(&(chain, contract.to_string(), why));
}

/// Whether the transfers of `contract` on `chain` are held back for any
/// reason.
pub fn is_held(chain: Chain, contract: &str) -> bool {
    HELD.read().expect("held assets").iter().any(|(c, a, _)| *c == chain && a == contract)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_asset_is_held_until_released_on_its_chain_only() {
        let contract = "0x00000000000000000000000000000000000000a1";
        assert!(!is_held(Chain::BaseSepolia, contract));
        hold(Chain::BaseSepolia, contract, "decimals");
        hold(Chain::BaseSepolia, contract, "code");
        assert!(is_held(Chain::BaseSepolia, contract));
        assert!(!is_held(Chain::OptimismSepolia, contract));
        release(Chain::BaseSepolia, contract, "decimals");
        assert!(is_held(Chain::BaseSepolia, contract), "still held for its code");
        release(Chain::BaseSepolia, contract, "code");
        assert!(!is_held(Chain::BaseSepolia, contract));
    }
}
