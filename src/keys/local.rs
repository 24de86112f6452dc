//! The `local` signer: every key derived in the process from one BIP-39
//! phrase (see the paths in [`super`]), for `sandbox` and `dev`.

use std::{
    collections::HashMap,
    fmt,
    io::Read,
    num::NonZeroU32,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use alloy::{
    primitives::{Address, B256, Signature},
    signers::{
        SignerSync,
        local::{
            PrivateKeySigner,
            coins_bip39::{English, Wordlist},
        },
    },
};
use coins_bip32::xkeys::XPriv;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use solana_keypair::Keypair;
use solana_seed_derivable::SeedDerivable;
use solana_signer::Signer as _;
use zeroize::Zeroizing;

use super::{Backend, KeyError, KeyRef, MNEMONIC_ENV, MNEMONIC_FILE_ENV, Signer};
use crate::chain::Curve;

/// A BIP-39 phrase, its words separated by single spaces, zeroed on drop;
/// `Debug` never shows it.
pub struct Phrase(Zeroizing<String>);

impl fmt::Debug for Phrase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Phrase(…)")
    }
}

impl Phrase {
    /// The words of `text`, white space normalized, copied once into a
    /// buffer large enough that it never reallocates (a reallocation would
    /// leave a copy behind).
    pub fn new(text: &str) -> Self {
        let mut phrase = Zeroizing::new(String::with_capacity(text.len()));
        for word in text.split_whitespace() {
            if !phrase.is_empty() {
                phrase.push(' ');
            }
            phrase.push_str(word);
        }
        Self(phrase)
    }

    /// The phrase of raw bytes (a variable's or a file's), which are zeroed
    /// with the caller's buffer; `None` when blank.
    fn of_bytes(bytes: &[u8]) -> Result<Option<Self>, KeyError> {
        let text = std::str::from_utf8(bytes).map_err(|_| KeyError::InvalidMnemonic)?;
        let phrase = Self::new(text);
        Ok((!phrase.0.is_empty()).then_some(phrase))
    }

    /// The BIP-39 seed (empty passphrase), once the words and checksum are
    /// checked against the English list.
    fn seed(&self) -> Result<Zeroizing<[u8; 64]>, KeyError> {
        check_words(&self.0)?;
        let mut seed = Zeroizing::new([0u8; 64]);
        let rounds = NonZeroU32::new(2048).expect("non-zero");
        aws_lc_rs::pbkdf2::derive(
            aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA512,
            rounds,
            b"mnemonic",
            self.0.as_bytes(),
            seed.as_mut_slice(),
        );
        Ok(seed)
    }
}

/// BIP-39: 12 to 24 words of the English list whose last bits are the
/// first bits of the SHA-256 of the entropy the others encode.
fn check_words(phrase: &str) -> Result<(), KeyError> {
    let count = phrase.split(' ').count();
    if ![12, 15, 18, 21, 24].contains(&count) {
        return Err(KeyError::InvalidMnemonic);
    }
    let mut bits = Zeroizing::new(vec![0u8; (count * 11).div_ceil(8)]);
    for (n, word) in phrase.split(' ').enumerate() {
        let index = English::get_index(word).map_err(|_| KeyError::InvalidMnemonic)?;
        for bit in 0..11 {
            if index >> (10 - bit) & 1 == 1 {
                let at = n * 11 + bit;
                bits[at / 8] |= 0x80 >> (at % 8);
            }
        }
    }
    let checksum_bits = count / 3;
    let entropy = &bits[..(count * 11 - checksum_bits) / 8];
    let expected = Sha256::digest(entropy)[0] >> (8 - checksum_bits);
    let found = bits[entropy.len()] >> (8 - checksum_bits);
    if expected == found { Ok(()) } else { Err(KeyError::InvalidMnemonic) }
}

/// Keys derived from a BIP-39 seed held in memory (zeroed on drop); the
/// phrase itself is not kept.
pub struct MnemonicSigner {
    seed: Zeroizing<[u8; 64]>,
    evm: Mutex<HashMap<KeyRef, PrivateKeySigner>>,
    solana: Mutex<HashMap<KeyRef, Arc<Keypair>>>,
}

impl fmt::Debug for MnemonicSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MnemonicSigner").finish_non_exhaustive()
    }
}

impl MnemonicSigner {
    pub fn from_phrase(phrase: &str) -> Result<Self, KeyError> {
        Self::from(&Phrase::new(phrase))
    }

    pub fn from(phrase: &Phrase) -> Result<Self, KeyError> {
        Ok(Self { seed: phrase.seed()?, evm: Mutex::default(), solana: Mutex::default() })
    }

    /// The signer the environment configures: the phrase in
    /// `CUSTODY_INDEXER_MNEMONIC`, or in the file `CUSTODY_INDEXER_MNEMONIC_FILE`
    /// names. `Ok(None)` when neither is set. A variable that is not UTF-8
    /// is an invalid phrase, not an unset one.
    pub fn from_env() -> Result<Option<Self>, KeyError> {
        let inline = std::env::var_os(MNEMONIC_ENV).map(|v| Zeroizing::new(v.into_encoded_bytes()));
        if inline.as_ref().is_some_and(|v| !v.is_empty()) {
            // Read: nobody needs it in the environment block any more.
            match crate::scrub::scrub(MNEMONIC_ENV) {
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "cannot overwrite {MNEMONIC_ENV} in the process's environment: /proc/<pid>/environ still shows it; prefer {MNEMONIC_FILE_ENV}")
                }
            }
        }
        let inline = inline.map(|bytes| Phrase::of_bytes(&bytes)).transpose()?.flatten();
        let file = std::env::var_os(MNEMONIC_FILE_ENV).filter(|s| !s.is_empty()).map(PathBuf::from);
        let phrase = match (inline, file) {
            (Some(_), Some(_)) => return Err(KeyError::Ambiguous),
            (Some(phrase), None) => phrase,
            (None, Some(path)) => read_phrase(path)?,
            (None, None) => return Ok(None),
        };
        Self::from(&phrase).map(Some)
    }

    fn evm_key(&self, key: KeyRef) -> Result<PrivateKeySigner, KeyError> {
        let mut cache = self.evm.lock().expect("key cache lock");
        if let Some(signer) = cache.get(&key) {
            return Ok(signer.clone());
        }
        let path = key.evm_path();
        let root =
            XPriv::root_from_seed(self.seed.as_slice(), None).map_err(|_| KeyError::InvalidMnemonic)?;
        let child = root.derive_path(path.as_str()).map_err(|_| KeyError::Path(path.clone()))?;
        let signing: &coins_bip32::ecdsa::SigningKey = child.as_ref();
        let signer = PrivateKeySigner::from_signing_key(signing.clone());
        cache.insert(key, signer.clone());
        Ok(signer)
    }

    fn solana_key(&self, key: KeyRef) -> Result<Arc<Keypair>, KeyError> {
        let mut cache = self.solana.lock().expect("key cache lock");
        if let Some(keypair) = cache.get(&key) {
            return Ok(keypair.clone());
        }
        let path = key.solana_path();
        let keypair = Keypair::from_seed_and_derivation_path(self.seed.as_slice(), Some(path.clone()))
            .map_err(|_| KeyError::Path(format!("{path:?}")))?;
        let keypair = Arc::new(keypair);
        cache.insert(key, keypair.clone());
        Ok(keypair)
    }
}

impl MnemonicSigner {
    /// The key's secret (the secp256k1 scalar, or the Ed25519 seed) and its
    /// public key (the uncompressed secp256k1 point, or Ed25519's 32
    /// bytes): for `keys import-local` alone, which puts them into a token.
    pub(crate) fn key_pair(
        &self,
        key: KeyRef,
        family: crate::chain::Family,
    ) -> Result<(Zeroizing<[u8; 32]>, Vec<u8>), KeyError> {
        match crate::family::rules::curve(family) {
            Curve::Secp256k1 => {
                let signer = self.evm_key(key)?;
                let secret = Zeroizing::new(<[u8; 32]>::from(signer.credential().to_bytes()));
                let public = signer.credential().verifying_key().to_encoded_point(false).as_bytes().to_vec();
                Ok((secret, public))
            }
            Curve::Ed25519 => {
                let keypair = self.solana_key(key)?;
                Ok((Zeroizing::new(*keypair.secret_bytes()), keypair.pubkey().to_bytes().to_vec()))
            }
        }
    }
}

impl Signer for MnemonicSigner {
    fn backend(&self) -> Backend {
        Backend::Local
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        Ok(self.evm_key(key)?.address())
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        Ok(self.solana_key(key)?.pubkey().to_string())
    }

    fn holds(&self, _: KeyRef, _: crate::chain::Family) -> Result<bool, KeyError> {
        Ok(true)
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

/// The phrase in the file at `path`, read into one zeroized buffer sized
/// from the file's length so that reading never reallocates it.
fn read_phrase(path: PathBuf) -> Result<Phrase, KeyError> {
    let read = |path: &PathBuf| -> std::io::Result<Zeroizing<Vec<u8>>> {
        let mut file = std::fs::File::open(path)?;
        let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
        let mut bytes = Zeroizing::new(Vec::with_capacity(size + 64));
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    let bytes = read(&path).map_err(|source| KeyError::Read { path, source })?;
    Phrase::of_bytes(&bytes)?.ok_or(KeyError::InvalidMnemonic)
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
    fn the_issuer_key_is_on_a_path_no_account_index_reaches() {
        assert_eq!(KeyRef::Issuer.evm_path(), "m/44'/60'/1'/0/0");
        assert_eq!(format!("{:?}", KeyRef::Issuer.solana_path()), "m/44'/501'/0'/1'");
        assert_eq!(KeyRef::Account(7).evm_path(), "m/44'/60'/0'/0/7");
        assert_eq!(format!("{:?}", KeyRef::Account(7).solana_path()), "m/44'/501'/7'/0'");
        let signer = MnemonicSigner::from_phrase(PHRASE).unwrap();
        let (evm, solana) =
            (signer.evm_address(KeyRef::Issuer).unwrap(), signer.solana_address(KeyRef::Issuer).unwrap());
        for key in [KeyRef::Sponsor, KeyRef::Omnibus].into_iter().chain((2..500).map(KeyRef::Account)) {
            assert_ne!(signer.evm_address(key).unwrap(), evm, "{key:?}");
            assert_ne!(signer.solana_address(key).unwrap(), solana, "{key:?}");
        }
        let again = MnemonicSigner::from_phrase(PHRASE).unwrap();
        assert_eq!(again.evm_address(KeyRef::Issuer).unwrap(), evm, "deterministic");
    }

    #[test]
    fn the_settlement_key_is_on_a_path_of_its_own() {
        assert_eq!(KeyRef::Settlement.evm_path(), "m/44'/60'/2'/0/0");
        assert_eq!(format!("{:?}", KeyRef::Settlement.solana_path()), "m/44'/501'/0'/2'");
        let signer = MnemonicSigner::from_phrase(PHRASE).unwrap();
        let evm = signer.evm_address(KeyRef::Settlement).unwrap();
        let solana = signer.solana_address(KeyRef::Settlement).unwrap();
        let others = [KeyRef::Sponsor, KeyRef::Omnibus, KeyRef::Issuer].into_iter();
        for key in others.chain((2..500).map(KeyRef::Account)) {
            assert_ne!(signer.evm_address(key).unwrap(), evm, "{key:?}");
            assert_ne!(signer.solana_address(key).unwrap(), solana, "{key:?}");
        }
    }

    #[test]
    fn an_invalid_phrase_is_refused_without_echoing_it() {
        let err = MnemonicSigner::from_phrase("test test test secretword").unwrap_err().to_string();
        assert!(!err.contains("secretword"), "{err}");
        assert!(format!("{:?}", MnemonicSigner::from_phrase(PHRASE).unwrap()).contains("MnemonicSigner"));
        assert!(!format!("{:?}", MnemonicSigner::from_phrase(PHRASE).unwrap()).contains("junk"));
    }

    #[test]
    fn the_phrase_is_checked_never_shown_and_not_kept() {
        let words = |last: &str| format!("{} {last}", ["abandon"; 11].join(" "));
        let phrase = Phrase::new(&format!("\t{}  \n", words("about")));
        assert_eq!(format!("{phrase:?}"), "Phrase(…)");
        // The BIP-39 test vector's seed, and the first address wallets show for it.
        assert_eq!(phrase.seed().unwrap()[..4], [0x5e, 0xb0, 0x0b, 0xbd]);
        let signer = MnemonicSigner::from(&phrase).unwrap();
        let address = signer.evm_address(KeyRef::Sponsor).unwrap().to_checksum(None);
        assert_eq!(address, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
        assert!(!format!("{signer:?}").contains("abandon"));

        for bad in [words("abandon"), words("notaword"), "abandon about".into()] {
            let error = MnemonicSigner::from_phrase(&bad).unwrap_err();
            assert!(matches!(error, KeyError::InvalidMnemonic), "{bad}");
            assert!(!format!("{error} {error:?}").contains("abandon"), "{error:?}");
        }
        // Bytes that are not UTF-8 are an invalid phrase, not a missing one.
        assert!(matches!(Phrase::of_bytes(&[0x61, 0xff]), Err(KeyError::InvalidMnemonic)));
        assert!(Phrase::of_bytes(b" \n").unwrap().is_none());
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
