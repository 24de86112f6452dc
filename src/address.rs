//! Addresses, parsed and normalised once at the edge: EVM addresses in their
//! EIP-55 checksummed form, Solana addresses as base58 32-byte public keys.

use alloy::primitives::Address;

use crate::chain::Family;

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
}
