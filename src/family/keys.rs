//! A key's address on each family, written as the family writes addresses.

use crate::{
    account::AccountAddress,
    chain::{Chain, Family},
    keys::{KeyError, KeyRef, Signer},
};

/// The key's address on a chain of `family`, written as that family writes
/// addresses (an EVM address checksummed).
pub fn key_address(signer: &dyn Signer, family: Family, key: KeyRef) -> Result<String, KeyError> {
    match family {
        Family::Evm => Ok(signer.evm_address(key)?.to_checksum(None)),
        Family::Solana => signer.solana_address(key),
    }
}

/// The key's address on each family of `chains`, with the chains it serves
/// there (an account's `addresses`), families in a fixed order.
pub fn account_addresses(
    signer: &dyn Signer,
    chains: impl IntoIterator<Item = Chain>,
    key: KeyRef,
) -> Result<Vec<AccountAddress>, KeyError> {
    let chains: Vec<Chain> = chains.into_iter().collect();
    let mut out = Vec::new();
    for family in [Family::Evm, Family::Solana] {
        let chains: Vec<Chain> = chains.iter().copied().filter(|c| c.family() == family).collect();
        if !chains.is_empty() {
            out.push(AccountAddress { chains, address: key_address(signer, family, key)? });
        }
    }
    Ok(out)
}
