//! A chain family's pure rules: its addresses, parsed and normalised once
//! at the edge (EVM addresses in their EIP-55 checksummed form, Solana
//! addresses as base58 32-byte public keys), what a transfer may be sent
//! to, its name, its keys' curve, how its sponsor pays gas, its tokens'
//! type and what its chain files hold.

use alloy::primitives::Address;

use crate::{
    assets::resource::AssetType,
    chain::{Chain, Curve, Family, Sponsorship},
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
    if any_case(family) { a.eq_ignore_ascii_case(b) } else { a == b }
}

/// Whether a family's addresses and transaction ids are the same in any
/// case: EVM's hex; Solana's base58 tells cases apart.
pub fn any_case(family: Family) -> bool {
    match family {
        Family::Evm => true,
        Family::Solana => false,
    }
}

/// Whether a sender's transactions take ordered nonces from its counter
/// (EVM); a Solana transaction carries its blockhash's last valid height
/// in the nonce's place.
pub fn ordered_nonces(family: Family) -> bool {
    match family {
        Family::Evm => true,
        Family::Solana => false,
    }
}

/// Whether a transaction every node refused may still land later: an EVM
/// transaction may sit in some node's pool; a Solana one expires with its
/// blockhash.
pub fn refused_may_land(family: Family) -> bool {
    match family {
        Family::Evm => true,
        Family::Solana => false,
    }
}

/// Whether a family's chains have what reconciliation repairs from and a
/// rewind moves to: blocks that name every credit (EVM), and chain files
/// that may name precompiled assets. Solana's differences are reported,
/// never repaired.
pub fn block_ledger(family: Family) -> bool {
    match family {
        Family::Evm => true,
        Family::Solana => false,
    }
}

/// The family as keys, labels and the store name it: `evm`, `solana`.
pub fn name(family: Family) -> &'static str {
    match family {
        Family::Evm => "evm",
        Family::Solana => "solana",
    }
}

/// How a family's gas sponsor pays for an account's transaction.
pub fn sponsorship(family: Family) -> Sponsorship {
    match family {
        Family::Evm => Sponsorship::Gas,
        Family::Solana => Sponsorship::FeePayer,
    }
}

/// The curve a family's keys sign with.
pub fn curve(family: Family) -> Curve {
    match family {
        Family::Evm => Curve::Secp256k1,
        Family::Solana => Curve::Ed25519,
    }
}

/// The type of a family's tokens.
pub fn token_type(family: Family) -> AssetType {
    match family {
        Family::Evm => AssetType::Erc20,
        Family::Solana => AssetType::SplToken,
    }
}

/// The native coin of a family's local node (anvil, the local Solana
/// network): its symbol and decimals.
pub fn local_native(family: Family) -> (&'static str, u8) {
    match family {
        Family::Evm => ("ETH", 18),
        Family::Solana => ("SOL", 9),
    }
}

/// What a chain file of `family` says of its identity and of reading
/// blocks.
pub struct ChainFileKeys {
    pub chain_id: bool,
    pub genesis_hash: bool,
    pub block_reads: bool,
    pub eip7708_from_block: bool,
}

/// Why a chain file of `family` lacks a key it needs, or has one that is
/// another family's.
pub fn chain_file(family: Family, keys: ChainFileKeys) -> Result<(), &'static str> {
    match family {
        Family::Evm if !keys.chain_id => Err("missing chain_id"),
        Family::Solana if !keys.genesis_hash => Err("missing genesis_hash"),
        Family::Solana if keys.block_reads => Err("block_reads is for EVM chains"),
        Family::Solana if keys.eip7708_from_block => Err("eip7708_from_block is for EVM chains"),
        _ => Ok(()),
    }
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

    #[test]
    fn a_chain_file_names_its_own_family_keys() {
        let keys = |chain_id, genesis_hash, block_reads, eip7708_from_block| ChainFileKeys {
            chain_id,
            genesis_hash,
            block_reads,
            eip7708_from_block,
        };
        let cases = [
            (Family::Evm, keys(true, false, true, true), Ok(())),
            (Family::Evm, keys(false, true, false, false), Err("missing chain_id")),
            (Family::Solana, keys(false, true, false, false), Ok(())),
            (Family::Solana, keys(true, false, false, false), Err("missing genesis_hash")),
            (Family::Solana, keys(false, true, true, false), Err("block_reads is for EVM chains")),
            (Family::Solana, keys(false, true, false, true), Err("eip7708_from_block is for EVM chains")),
        ];
        for (family, keys, expected) in cases {
            assert_eq!(chain_file(family, keys), expected, "{family:?}");
        }
    }
}
