//! A chain family's pure rules: its addresses, parsed and normalised once
//! at the edge (EVM addresses in their EIP-55 checksummed form, Solana
//! addresses as base58 32-byte public keys), what a transfer may be sent
//! to, and a key's address as the family writes it.

use alloy::primitives::Address;

use crate::{
    account::AccountAddress,
    chain::{Chain, Family},
    keys::{KeyError, KeyRef, Signer},
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    #[error("{0:?} is not a 20-byte hex address")]
    NotEvm(String),
    #[error("{0:?} fails its EIP-55 checksum")]
    BadChecksum(String),
    #[error("{0:?} is not a base58 32-byte Solana address")]
    NotSolana(String),
}

/// The canonical text of an address on a chain family. Mixed-case EVM input
/// must carry a valid EIP-55 checksum; all-lower or all-upper hex is accepted.
pub fn normalize(family: Family, text: &str) -> Result<String, AddressError> {
    match family {
        Family::Evm => parse_evm(text).map(|a| a.to_checksum(None)),
        Family::Solana => {
            let bytes = bs58::decode(text).into_vec().map_err(|_| AddressError::NotSolana(text.into()))?;
            if bytes.len() == 32 { Ok(text.to_string()) } else { Err(AddressError::NotSolana(text.into())) }
        }
    }
}

pub fn parse_evm(text: &str) -> Result<Address, AddressError> {
    let hex = text.strip_prefix("0x").ok_or_else(|| AddressError::NotEvm(text.into()))?;
    let address: Address = text.parse().map_err(|_| AddressError::NotEvm(text.into()))?;
    let mixed = hex.chars().any(|c| c.is_ascii_lowercase()) && hex.chars().any(|c| c.is_ascii_uppercase());
    if mixed && address.to_checksum(None) != text {
        return Err(AddressError::BadChecksum(text.into()));
    }
    Ok(address)
}

/// Why a destination cannot receive a transfer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadDestination {
    #[error(transparent)]
    Address(#[from] AddressError),
    #[error("{0} is the zero address: what is sent there is burnt")]
    Zero(String),
    #[error(
        "{0} is not a wallet: it is off the ed25519 curve (a token account or a program-derived address); \
         give the owner's wallet address"
    )]
    NotWallet(String),
}

/// The canonical text of a transfer's destination on `chain`. Beyond a valid
/// address: never the EVM zero address, and on Solana a wallet, i.e. a point
/// on the ed25519 curve. Token accounts and program-derived addresses are off
/// it; a token transfer to one would create a token account that only the
/// program could move, and the API has no field to say one is meant.
pub fn destination(chain: Chain, text: &str) -> Result<String, BadDestination> {
    match chain.family() {
        Family::Evm => {
            let address = parse_evm(text)?;
            if address.is_zero() {
                return Err(BadDestination::Zero(text.to_string()));
            }
            Ok(address.to_checksum(None))
        }
        Family::Solana => {
            let normalized = normalize(Family::Solana, text)?;
            let key: solana_pubkey::Pubkey =
                normalized.parse().map_err(|_| AddressError::NotSolana(text.to_string()))?;
            if !key.is_on_curve() {
                return Err(BadDestination::NotWallet(normalized));
            }
            Ok(normalized)
        }
    }
}

/// Whether two transaction ids of `family` name the same transaction: EVM
/// hashes are hex (any case); Solana signatures are base58, whose case
/// matters.
pub fn same_transaction(family: Family, a: &str, b: &str) -> bool {
    match family {
        Family::Evm => a.eq_ignore_ascii_case(b),
        Family::Solana => a == b,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evm_addresses_are_checksummed_and_validated() {
        let usdc = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";
        assert_eq!(normalize(Family::Evm, &usdc.to_lowercase()).unwrap(), usdc);
        assert_eq!(normalize(Family::Evm, usdc).unwrap(), usdc);
        assert_eq!(
            normalize(Family::Evm, "0xa0B86991c6218b36c1d19D4a2e9Eb0cE3606eB48"),
            Err(AddressError::BadChecksum("0xa0B86991c6218b36c1d19D4a2e9Eb0cE3606eB48".into()))
        );
        assert!(normalize(Family::Evm, "0x1234").is_err());
        assert!(normalize(Family::Evm, "A0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48").is_err());
    }

    #[test]
    fn solana_addresses_are_32_byte_base58() {
        let usdc = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
        assert_eq!(normalize(Family::Solana, usdc).unwrap(), usdc);
        assert!(normalize(Family::Solana, "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48").is_err());
        assert!(normalize(Family::Solana, "abc").is_err());
    }

    #[test]
    fn transaction_ids_compare_as_their_family_writes_them() {
        let hash = "0xAbC0000000000000000000000000000000000000000000000000000000000001";
        assert!(same_transaction(Family::Evm, hash, &hash.to_lowercase()));
        assert!(!same_transaction(Family::Evm, hash, "0x01"));
        let signature =
            "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW";
        assert!(same_transaction(Family::Solana, signature, signature));
        assert!(!same_transaction(Family::Solana, signature, &signature.to_lowercase()));
    }

    #[test]
    fn destinations_are_wallets() {
        let evm = Chain::EthereumTestnet;
        let zero = "0x0000000000000000000000000000000000000000";
        assert_eq!(destination(evm, zero), Err(BadDestination::Zero(zero.into())));
        let usdc = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";
        assert_eq!(destination(evm, &usdc.to_lowercase()).as_deref(), Ok(usdc));
        let solana = Chain::SolanaDevnet;
        let phrase =
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
        let signer = crate::keys::MnemonicSigner::from_phrase(phrase).unwrap();
        let wallet = crate::keys::Signer::solana_address(&signer, crate::keys::KeyRef::Omnibus).unwrap();
        assert_eq!(destination(solana, &wallet).as_deref(), Ok(wallet.as_str()));
        // The wallet's USDC token account: a program-derived address.
        let mint: solana_pubkey::Pubkey = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".parse().unwrap();
        let program = crate::solana::decode::TOKEN_PROGRAM;
        let token_account =
            crate::solana::instructions::ata(&wallet.parse().unwrap(), &mint, program).to_string();
        assert_eq!(
            destination(solana, &token_account),
            Err(BadDestination::NotWallet(token_account.clone()))
        );
        assert!(matches!(destination(solana, "0x00"), Err(BadDestination::Address(_))));
    }
}
