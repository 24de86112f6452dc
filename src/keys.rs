//! Signing keys, behind the [`Signer`] trait so that a KMS or an HSM can take
//! the place of the mnemonic. The mnemonic implementation derives every key
//! from one BIP-39 phrase with alloy's (EVM, BIP-32 secp256k1) and
//! solana-keypair's (SLIP-10 ed25519) own derivation:
//!
//! | key | EVM path | Solana path |
//! |---|---|---|
//! | gas sponsor | `m/44'/60'/0'/0/0` | `m/44'/501'/0'/0'` |
//! | omnibus wallet | `m/44'/60'/0'/0/1` | `m/44'/501'/1'/0'` |
//! | segregated account *n* (n ≥ 2) | `m/44'/60'/0'/0/n` | `m/44'/501'/n'/0'` |
//!
//! These are the paths wallets such as MetaMask and Phantom use for their
//! *n*-th address, so an operator can recover any key with standard tools.
//! No key or phrase is ever formatted: `Debug` prints only addresses.

use std::{
    collections::HashMap,
    fmt,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use alloy::{
    primitives::{Address, B256, Signature},
    signers::{
        SignerSync,
        local::{
            MnemonicBuilder, PrivateKeySigner,
            coins_bip39::{English, Mnemonic},
        },
    },
};
use futures::future::BoxFuture;
use solana_derivation_path::DerivationPath;
use solana_keypair::Keypair;
use solana_seed_derivable::SeedDerivable;
use solana_signer::Signer as _;
use zeroize::Zeroizing;

/// The environment variable holding the phrase itself.
pub const MNEMONIC_ENV: &str = "CUSTODY_INDEXER_MNEMONIC";
/// The environment variable naming a file that holds the phrase.
pub const MNEMONIC_FILE_ENV: &str = "CUSTODY_INDEXER_MNEMONIC_FILE";

/// The first derivation index of a segregated account's key.
pub const FIRST_ACCOUNT_INDEX: u32 = 2;

/// Which key: the chain family's gas sponsor, the omnibus wallet, or a
/// segregated account's own key by derivation index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyRef {
    Sponsor,
    Omnibus,
    Account(u32),
}

impl KeyRef {
    pub fn index(self) -> u32 {
        match self {
            KeyRef::Sponsor => 0,
            KeyRef::Omnibus => 1,
            KeyRef::Account(n) => n,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no signing keys: set {MNEMONIC_ENV} or {MNEMONIC_FILE_ENV}")]
    Missing,
    #[error("set only one of {MNEMONIC_ENV} and {MNEMONIC_FILE_ENV}")]
    Ambiguous,
    #[error("cannot read the mnemonic file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Never carries the phrase or any word of it.
    #[error("the mnemonic is not a valid BIP-39 English phrase")]
    InvalidMnemonic,
    #[error("key index {0} is outside the derivable range")]
    Index(u32),
    #[error("signing failed: {0}")]
    Signing(String),
}

/// What signs for the service. Implementations must never log, format or
/// return key material.
pub trait Signer: Send + Sync {
    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError>;
    /// The base58 public key.
    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError>;
    /// Signs a 32-byte digest (a transaction's or an EIP-712 signing hash).
    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>>;
    /// Signs a serialized Solana message with ed25519.
    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>>;
}

/// Keys derived from a BIP-39 mnemonic held in memory (zeroed on drop).
pub struct MnemonicSigner {
    phrase: Zeroizing<String>,
    seed: Zeroizing<[u8; 64]>,
    evm: Mutex<HashMap<u32, PrivateKeySigner>>,
    solana: Mutex<HashMap<u32, Arc<Keypair>>>,
}

impl fmt::Debug for MnemonicSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MnemonicSigner").finish_non_exhaustive()
    }
}

impl MnemonicSigner {
    pub fn from_phrase(phrase: &str) -> Result<Self, KeyError> {
        let phrase = Zeroizing::new(phrase.split_whitespace().collect::<Vec<_>>().join(" "));
        let mnemonic =
            Mnemonic::<English>::new_from_phrase(&phrase).map_err(|_| KeyError::InvalidMnemonic)?;
        let seed = Zeroizing::new(mnemonic.to_seed(None).map_err(|_| KeyError::InvalidMnemonic)?);
        Ok(Self { phrase, seed, evm: Mutex::default(), solana: Mutex::default() })
    }

    /// The signer the environment configures: the phrase in
    /// `CUSTODY_INDEXER_MNEMONIC`, or in the file `CUSTODY_INDEXER_MNEMONIC_FILE`
    /// names. `Ok(None)` when neither is set.
    pub fn from_env() -> Result<Option<Self>, KeyError> {
        let inline = std::env::var(MNEMONIC_ENV).ok().filter(|s| !s.trim().is_empty()).map(Zeroizing::new);
        let file = std::env::var_os(MNEMONIC_FILE_ENV).filter(|s| !s.is_empty()).map(PathBuf::from);
        match (inline, file) {
            (Some(_), Some(_)) => Err(KeyError::Ambiguous),
            (Some(phrase), None) => Self::from_phrase(&phrase).map(Some),
            (None, Some(path)) => {
                let text = Zeroizing::new(
                    std::fs::read_to_string(&path).map_err(|source| KeyError::Read { path, source })?,
                );
                Self::from_phrase(&text).map(Some)
            }
            (None, None) => Ok(None),
        }
    }

    fn evm_key(&self, key: KeyRef) -> Result<PrivateKeySigner, KeyError> {
        let index = key.index();
        let mut cache = self.evm.lock().expect("key cache lock");
        if let Some(signer) = cache.get(&index) {
            return Ok(signer.clone());
        }
        let signer = MnemonicBuilder::<English>::default()
            .phrase(self.phrase.as_str())
            .index(index)
            .map_err(|_| KeyError::Index(index))?
            .build()
            .map_err(|_| KeyError::InvalidMnemonic)?;
        cache.insert(index, signer.clone());
        Ok(signer)
    }

    fn solana_key(&self, key: KeyRef) -> Result<Arc<Keypair>, KeyError> {
        let index = key.index();
        let mut cache = self.solana.lock().expect("key cache lock");
        if let Some(keypair) = cache.get(&index) {
            return Ok(keypair.clone());
        }
        let path = DerivationPath::new_bip44(Some(index), Some(0));
        let keypair = Keypair::from_seed_and_derivation_path(self.seed.as_slice(), Some(path))
            .map_err(|_| KeyError::Index(index))?;
        let keypair = Arc::new(keypair);
        cache.insert(index, keypair.clone());
        Ok(keypair)
    }
}

impl Signer for MnemonicSigner {
    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        Ok(self.evm_key(key)?.address())
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        Ok(self.solana_key(key)?.pubkey().to_string())
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(async move {
            self.evm_key(key)?.sign_hash_sync(&hash).map_err(|e| KeyError::Signing(e.to_string()))
        })
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(async move {
            let signature = self.solana_key(key)?.try_sign_message(&message);
            let signature = signature.map_err(|e| KeyError::Signing(e.to_string()))?;
            Ok(signature.into())
        })
    }
}

/// The key's EVM address on every configured EVM chain and its Solana address
/// on every configured Solana chain.
pub fn account_addresses(
    signer: &dyn Signer,
    chains: &crate::config::Chains,
    key: KeyRef,
) -> Result<Vec<crate::account::AccountAddress>, crate::store::StoreError> {
    let of = |family: crate::chain::Family| {
        chains.iter().filter(move |c| c.family() == family).map(|c| c.chain).collect()
    };
    let key_error = |e: KeyError| crate::store::StoreError::Invalid(e.to_string());
    let mut out = Vec::new();
    let evm: Vec<crate::chain::Chain> = of(crate::chain::Family::Evm);
    if !evm.is_empty() {
        let address = signer.evm_address(key).map_err(key_error)?.to_checksum(None);
        out.push(crate::account::AccountAddress { chains: evm, address });
    }
    let solana: Vec<crate::chain::Chain> = of(crate::chain::Family::Solana);
    if !solana.is_empty() {
        out.push(crate::account::AccountAddress {
            chains: solana,
            address: signer.solana_address(key).map_err(key_error)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The BIP-39 test phrase every wallet documents.
    const PHRASE: &str = "test test test test test test test test test test test junk";

    #[test]
    fn derives_the_standard_wallet_addresses() {
        let signer = MnemonicSigner::from_phrase(PHRASE).unwrap();
        // anvil's and hardhat's first two dev accounts come from this phrase.
        assert_eq!(
            signer.evm_address(KeyRef::Sponsor).unwrap().to_checksum(None),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        );
        assert_eq!(
            signer.evm_address(KeyRef::Omnibus).unwrap().to_checksum(None),
            "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
        );
        let sponsor = signer.solana_address(KeyRef::Sponsor).unwrap();
        let account = signer.solana_address(KeyRef::Account(2)).unwrap();
        assert_ne!(sponsor, account);
        assert_eq!(bs58::decode(&sponsor).into_vec().unwrap().len(), 32);
        // Deterministic: a second signer from the same phrase agrees.
        let again = MnemonicSigner::from_phrase(&format!("  {PHRASE}\n")).unwrap();
        assert_eq!(again.solana_address(KeyRef::Sponsor).unwrap(), sponsor);
    }

    #[test]
    fn an_invalid_phrase_is_refused_without_echoing_it() {
        let err = MnemonicSigner::from_phrase("test test test secretword").unwrap_err().to_string();
        assert!(!err.contains("secretword"), "{err}");
        assert!(format!("{:?}", MnemonicSigner::from_phrase(PHRASE).unwrap()).contains("MnemonicSigner"));
        assert!(!format!("{:?}", MnemonicSigner::from_phrase(PHRASE).unwrap()).contains("junk"));
    }

    #[tokio::test]
    async fn signatures_recover_to_the_key_address() {
        let signer = MnemonicSigner::from_phrase(PHRASE).unwrap();
        let hash = B256::repeat_byte(7);
        let signature = signer.sign_evm_hash(KeyRef::Account(5), hash).await.unwrap();
        let recovered = signature.recover_address_from_prehash(&hash).unwrap();
        assert_eq!(recovered, signer.evm_address(KeyRef::Account(5)).unwrap());

        let message = b"message".to_vec();
        let signature = signer.sign_solana(KeyRef::Account(5), message.clone()).await.unwrap();
        let pubkey: [u8; 32] = bs58::decode(signer.solana_address(KeyRef::Account(5)).unwrap())
            .into_vec()
            .unwrap()
            .try_into()
            .unwrap();
        let verified = solana_signature_valid(&pubkey, &message, &signature);
        assert!(verified);
    }

    fn solana_signature_valid(pubkey: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> bool {
        solana_keypair::Signature::from(*signature).verify(pubkey, message)
    }
}
