//! Keys in a PKCS#11 token (any HSM; SoftHSM2 in the tests), through
//! `cryptoki`. Each key is generated inside the token, never extractable
//! (`CKA_SENSITIVE` true, `CKA_EXTRACTABLE` false), and labelled
//! `custody-indexer:<role>:<owner>:<family>` so that asking for it again
//! finds it instead of making another. secp256k1 keys sign a 32-byte digest
//! with `CKM_ECDSA` (the token answers `r‖s`: `s` is brought to the lower
//! half and the recovery id found by recovering the key's address); Ed25519
//! keys sign a Solana message with `CKM_EDDSA`.
//!
//! The user PIN is read from a file into a zeroized buffer; no key, PIN or
//! signature input is ever logged.

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    sync::Mutex,
};

use alloy::primitives::{Address, B256, Signature, U256};
use cryptoki::{
    context::{CInitializeArgs, CInitializeFlags, Pkcs11},
    mechanism::{
        Mechanism,
        eddsa::{EddsaParams, EddsaSignatureScheme},
    },
    object::{Attribute, AttributeType, ObjectClass, ObjectHandle},
    session::{Session, UserType},
    types::AuthPin,
};
use futures::future::BoxFuture;
use zeroize::Zeroizing;

use super::{KeyError, KeyRef, Signer};
use crate::chain::Family;

/// The environment variable naming the PKCS#11 library.
pub const MODULE_ENV: &str = "CUSTODY_INDEXER_PKCS11_MODULE";
/// The environment variable naming the token, by its label.
pub const TOKEN_ENV: &str = "CUSTODY_INDEXER_PKCS11_TOKEN";
/// The environment variable naming the file holding the user PIN.
pub const PIN_FILE_ENV: &str = "CUSTODY_INDEXER_PKCS11_PIN_FILE";

/// secp256k1's OID (1.3.132.0.10), DER: the EVM keys' `CKA_EC_PARAMS`.
const SECP256K1: [u8; 7] = [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a];
/// Ed25519's OID (1.3.101.112), DER: the Solana keys' `CKA_EC_PARAMS`.
const ED25519: [u8; 5] = [0x06, 0x03, 0x2b, 0x65, 0x70];

/// Where the token is: the library, the token's label, the PIN's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSettings {
    pub module: PathBuf,
    pub token: String,
    pub pin_file: PathBuf,
}

impl TokenSettings {
    /// The settings the environment gives, each variable required.
    pub fn from_env() -> Result<Self, KeyError> {
        let var = |name: &'static str| {
            std::env::var(name).ok().filter(|v| !v.trim().is_empty()).ok_or(KeyError::Setting(name))
        };
        Ok(TokenSettings {
            module: var(MODULE_ENV)?.into(),
            token: var(TOKEN_ENV)?,
            pin_file: var(PIN_FILE_ENV)?.into(),
        })
    }
}

/// A key found in (or made in) the token: its private half, and its
/// public key as the chain names it (an EVM address; Ed25519's 32 bytes).
#[derive(Clone, Copy)]
struct Found<P> {
    private: ObjectHandle,
    public: P,
}

/// A failed opening of the token.
struct Retry {
    at: std::time::Instant,
    error: String,
    /// The PIN file's modification time when the token refused the PIN.
    refused_pin: Option<Option<std::time::SystemTime>>,
}

/// How long after a failed opening the token is tried again.
const REOPEN_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// A logged-in session on the token, and the library it was opened with
/// (finalized when the last of them is dropped, the session first).
struct Open {
    session: Session,
    _context: Pkcs11,
}

/// The token's settings, a session on it while it answers, and the keys
/// found so far. A failed call drops the session and what was found with
/// it: the next call loads the library again, finds the token, logs in
/// (the PIN read from its file again) and finds each key anew, so a token
/// that went away and came back signs again without a restart.
pub struct Pkcs11Signer {
    settings: TokenSettings,
    software: bool,
    // The session is used by one caller at a time; the library's own
    // locking (`CKF_OS_LOCKING_OK`) guards the token.
    open: Mutex<Option<Open>>,
    /// When the token may be opened again after a failed attempt, and the
    /// error to answer until then: a token that does not answer is not
    /// asked at every call, and a PIN it refused is never tried again (an
    /// HSM locks its user after a few) until its file changes.
    retry: Mutex<Option<Retry>>,
    evm: Mutex<HashMap<KeyRef, Found<Address>>>,
    solana: Mutex<HashMap<KeyRef, Found<[u8; 32]>>>,
    /// Each key's public half once read: kept across sessions, so an
    /// address is known while the token is away, and a key found again
    /// must be the same key.
    known: Mutex<HashMap<(KeyRef, Family), Vec<u8>>>,
}

impl fmt::Debug for Pkcs11Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11Signer").finish_non_exhaustive()
    }
}

fn token_error(what: &str) -> impl Fn(cryptoki::error::Error) -> KeyError + '_ {
    move |error| KeyError::Token(format!("{what}: {error}"))
}

/// The user PIN in `path`, trimmed, in a zeroized buffer.
fn read_pin(path: &Path) -> Result<AuthPin, KeyError> {
    let bytes = Zeroizing::new(
        std::fs::read(path).map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?,
    );
    let text =
        std::str::from_utf8(&bytes).map_err(|_| KeyError::Token("the PIN file is not UTF-8".into()))?;
    Ok(AuthPin::new(text.trim().into()))
}

impl Pkcs11Signer {
    /// Opens the token `settings` names and logs in as its user.
    pub fn open(settings: &TokenSettings) -> Result<Self, KeyError> {
        let (open, software) = connect(settings)?;
        Ok(Pkcs11Signer {
            settings: settings.clone(),
            software,
            open: Mutex::new(Some(open)),
            retry: Mutex::default(),
            evm: Mutex::default(),
            solana: Mutex::default(),
            known: Mutex::default(),
        })
    }

    /// `f` with the session, opened again first if the last call failed;
    /// a failure drops it and the keys found through it.
    fn with_session<T>(&self, f: impl FnOnce(&Session) -> Result<T, KeyError>) -> Result<T, KeyError> {
        let mut open = self.open.lock().expect("token session lock");
        let session = match open.take() {
            Some(session) => session,
            None => self.reconnect()?,
        };
        let answer = f(&session.session);
        if answer.is_ok() {
            *open = Some(session);
        } else {
            drop(session);
            self.evm.lock().expect("key cache lock").clear();
            self.solana.lock().expect("key cache lock").clear();
        }
        answer
    }
}

impl Pkcs11Signer {
    /// The token opened again, unless the last attempt failed a moment ago
    /// or the token refused the PIN its file still holds. Whatever stops it
    /// now, the token does not answer.
    fn reconnect(&self) -> Result<Open, KeyError> {
        let pin_changed = || std::fs::metadata(&self.settings.pin_file).and_then(|m| m.modified()).ok();
        let mut retry = self.retry.lock().expect("token retry lock");
        if let Some(last) = retry.as_ref() {
            let same_pin = last.refused_pin.is_some_and(|at| at == pin_changed());
            if same_pin || last.at.elapsed() < REOPEN_AFTER {
                return Err(KeyError::Token(last.error.clone()));
            }
        }
        match connect(&self.settings) {
            Ok((open, _)) => {
                *retry = None;
                Ok(open)
            }
            Err(error) => {
                let text = error.to_string();
                let refused_pin = text.contains("refuses the PIN").then(pin_changed);
                if refused_pin.is_some() {
                    tracing::error!(error = %text, "signer: the token refuses the PIN; not tried again until the PIN file changes");
                }
                *retry = Some(Retry { at: std::time::Instant::now(), error: text.clone(), refused_pin });
                Err(KeyError::Token(text))
            }
        }
    }
}

/// Loads the library, finds the token by its label and logs in as its
/// user; whether the token is a software one (SoftHSM: its manufacturer,
/// or the library's file name, says so).
fn connect(settings: &TokenSettings) -> Result<(Open, bool), KeyError> {
    let pin = read_pin(&settings.pin_file)?;
    let context = Pkcs11::new(&settings.module).map_err(token_error("the PKCS#11 library does not load"))?;
    context
        .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .map_err(token_error("the PKCS#11 library does not start"))?;
    let slots = context.get_slots_with_token().map_err(token_error("no slot answers"))?;
    let slot = slots
        .into_iter()
        .find(|slot| context.get_token_info(*slot).is_ok_and(|info| info.label().trim() == settings.token))
        .ok_or_else(|| KeyError::Token(format!("no token is labelled {:?}", settings.token)))?;
    let info = context.get_token_info(slot).map_err(token_error("the token does not describe itself"))?;
    let named = |text: &str| text.to_ascii_lowercase().contains("softhsm");
    let software = named(info.manufacturer_id())
        || settings.module.file_name().is_some_and(|name| named(&name.to_string_lossy()));
    let session = context.open_rw_session(slot).map_err(token_error("the token opens no session"))?;
    session.login(UserType::User, Some(&pin)).map_err(token_error("the token refuses the PIN"))?;
    Ok((Open { session, _context: context }, software))
}

impl Pkcs11Signer {
    /// `custody-indexer:<role>:<owner>:<family>`.
    pub fn label(key: KeyRef, family: Family) -> String {
        super::describe(key, family)
    }

    /// The key labelled for `key` and `family`: found, or made in the token.
    fn find_or_make(&self, key: KeyRef, family: Family) -> Result<(ObjectHandle, Vec<u8>), KeyError> {
        self.with_session(|session| Self::find_or_make_in(session, key, family))
    }

    fn find_or_make_in(
        session: &Session,
        key: KeyRef,
        family: Family,
    ) -> Result<(ObjectHandle, Vec<u8>), KeyError> {
        let label = Self::label(key, family);
        let of = |class| vec![Attribute::Class(class), Attribute::Label(label.clone().into_bytes())];
        let private = session.find_objects(&of(ObjectClass::PRIVATE_KEY)).map_err(token_error("find"))?;
        let public = session.find_objects(&of(ObjectClass::PUBLIC_KEY)).map_err(token_error("find"))?;
        // Two keys under one label (two processes that made it at once) are
        // never chosen between: each might sign for another address.
        if private.len() > 1 || public.len() > 1 {
            return Err(KeyError::Token(format!(
                "{label} names {} private and {} public keys: keep the one whose address holds funds, \
                 remove the others with the token's tools",
                private.len(),
                public.len()
            )));
        }
        let (private, public) = match (private.first(), public.first()) {
            (Some(private), Some(public)) => (*private, *public),
            _ => {
                let (mechanism, params) = match family {
                    Family::Evm => (Mechanism::EccKeyPairGen, SECP256K1.to_vec()),
                    Family::Solana => (Mechanism::EccEdwardsKeyPairGen, ED25519.to_vec()),
                };
                let id = label.clone().into_bytes();
                let public = [
                    Attribute::Token(true),
                    Attribute::Private(false),
                    Attribute::Verify(true),
                    Attribute::EcParams(params),
                    Attribute::Label(label.clone().into_bytes()),
                    Attribute::Id(id.clone()),
                ];
                let private = [
                    Attribute::Token(true),
                    Attribute::Private(true),
                    Attribute::Sensitive(true),
                    Attribute::Extractable(false),
                    Attribute::Sign(true),
                    Attribute::Label(label.clone().into_bytes()),
                    Attribute::Id(id),
                ];
                let (public, private) = session
                    .generate_key_pair(&mechanism, &public, &private)
                    .map_err(token_error("the token makes no key"))?;
                tracing::info!(%label, "signer: key made in the token");
                (private, public)
            }
        };
        let point = session.get_attributes(public, &[AttributeType::EcPoint]).map_err(token_error("read"))?;
        let point = point
            .into_iter()
            .find_map(|attribute| match attribute {
                Attribute::EcPoint(point) => Some(point),
                _ => None,
            })
            .ok_or_else(|| KeyError::Token(format!("{label} has no public point")))?;
        let size = if family == Family::Evm { 65 } else { 32 };
        Ok((private, unwrap_octets(point, size)))
    }

    /// Keeps `point` as the key's public half the first time; refuses
    /// another one later (a token swapped for another, a key replaced).
    fn same_as_known(&self, key: KeyRef, family: Family, point: &[u8]) -> Result<(), KeyError> {
        let mut known = self.known.lock().expect("key cache lock");
        match known.get(&(key, family)) {
            Some(before) if before.as_slice() != point => Err(KeyError::Token(format!(
                "{} is another key than the one this process signed with: the token was replaced",
                Self::label(key, family)
            ))),
            Some(_) => Ok(()),
            None => {
                known.insert((key, family), point.to_vec());
                Ok(())
            }
        }
    }

    /// The public half read before, if any.
    fn known(&self, key: KeyRef, family: Family) -> Option<Vec<u8>> {
        self.known.lock().expect("key cache lock").get(&(key, family)).cloned()
    }

    fn evm_key(&self, key: KeyRef) -> Result<Found<Address>, KeyError> {
        if let Some(found) = self.evm.lock().expect("key cache lock").get(&key) {
            return Ok(*found);
        }
        let (private, point) = self.find_or_make(key, Family::Evm)?;
        self.same_as_known(key, Family::Evm, &point)?;
        if point.len() != 65 || point[0] != 0x04 {
            return Err(KeyError::Token(format!(
                "{} is not an uncompressed secp256k1 key",
                Self::label(key, Family::Evm)
            )));
        }
        let found = Found { private, public: Address::from_raw_public_key(&point[1..]) };
        self.evm.lock().expect("key cache lock").insert(key, found);
        Ok(found)
    }

    fn solana_key(&self, key: KeyRef) -> Result<Found<[u8; 32]>, KeyError> {
        if let Some(found) = self.solana.lock().expect("key cache lock").get(&key) {
            return Ok(*found);
        }
        let (private, point) = self.find_or_make(key, Family::Solana)?;
        self.same_as_known(key, Family::Solana, &point)?;
        let public: [u8; 32] = point.try_into().map_err(|_| {
            KeyError::Token(format!("{} is not an Ed25519 key", Self::label(key, Family::Solana)))
        })?;
        let found = Found { private, public };
        self.solana.lock().expect("key cache lock").insert(key, found);
        Ok(found)
    }

    fn sign(&self, mechanism: &Mechanism, private: ObjectHandle, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.with_session(|session| {
            session.sign(mechanism, private, data).map_err(token_error("the token does not sign"))
        })
    }
}

/// A `CKA_EC_POINT` of `size` bytes, without its DER OCTET STRING wrapping
/// when it has one (PKCS#11 asks for the wrapping; some tokens answer the
/// raw point).
fn unwrap_octets(point: Vec<u8>, size: usize) -> Vec<u8> {
    match point.as_slice() {
        [0x04, len, rest @ ..] if point.len() == size + 2 && usize::from(*len) == size => rest.to_vec(),
        _ => point,
    }
}

/// secp256k1's group order.
const ORDER: U256 = U256::from_be_bytes([
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xba,
    0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
]);

/// The EVM signature of `hash` by `address` from a token's `r‖s`: `s` in
/// the lower half of the order (as Ethereum requires), and the recovery
/// id that recovers `address`.
pub fn evm_signature(raw: &[u8], hash: B256, address: Address) -> Result<Signature, KeyError> {
    let bad = || KeyError::BadSignature("the token's ECDSA signature is not 64 bytes of r and s".into());
    let (r, s) = (raw.get(..32).ok_or_else(bad)?, raw.get(32..64).ok_or_else(bad)?);
    if raw.len() != 64 {
        return Err(bad());
    }
    let (r, mut s) = (U256::from_be_slice(r), U256::from_be_slice(s));
    if s > ORDER >> 1 {
        s = ORDER - s;
    }
    [false, true]
        .into_iter()
        .map(|parity| Signature::new(r, s, parity))
        .find(|signature| signature.recover_address_from_prehash(&hash).is_ok_and(|found| found == address))
        .ok_or_else(|| KeyError::BadSignature("the token's signature recovers another key".into()))
}

impl Signer for Pkcs11Signer {
    fn backend(&self) -> super::Backend {
        super::Backend::Pkcs11 { token: self.settings.token.clone(), software: self.software }
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        match self.known(key, Family::Evm) {
            Some(point) if point.len() == 65 => Ok(Address::from_raw_public_key(&point[1..])),
            _ => Ok(self.evm_key(key)?.public),
        }
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        match self.known(key, Family::Solana) {
            Some(point) => Ok(bs58::encode(point).into_string()),
            None => Ok(bs58::encode(self.solana_key(key)?.public).into_string()),
        }
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(async move {
            let found = self.evm_key(key)?;
            let raw = self.sign(&Mechanism::Ecdsa, found.private, hash.as_slice())?;
            evm_signature(&raw, hash, found.public)
        })
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(async move {
            let found = self.solana_key(key)?;
            let mechanism = Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure));
            let raw = self.sign(&mechanism, found.private, &message)?;
            raw.try_into()
                .map_err(|_| KeyError::BadSignature("the token's Ed25519 signature is not 64 bytes".into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::{SignerSync, local::PrivateKeySigner};

    #[test]
    fn a_high_s_signature_is_brought_low_and_its_recovery_id_found() {
        let key = PrivateKeySigner::random();
        for n in 0u8..8 {
            let hash = B256::repeat_byte(n + 1);
            let signature = key.sign_hash_sync(&hash).unwrap();
            let (r, s) = (signature.r(), signature.s());
            // A token may answer either s; both give the low-s signature.
            for s in [s, ORDER - s] {
                let raw = [r.to_be_bytes::<32>(), s.to_be_bytes::<32>()].concat();
                let found = evm_signature(&raw, hash, key.address()).unwrap();
                assert_eq!(found, signature, "{n}");
                assert!(found.s() <= ORDER >> 1);
            }
            let other = PrivateKeySigner::random().address();
            let raw = [r.to_be_bytes::<32>(), s.to_be_bytes::<32>()].concat();
            assert!(evm_signature(&raw, hash, other).is_err(), "another key's address");
        }
        assert!(evm_signature(&[0u8; 63], B256::ZERO, Address::ZERO).is_err());
    }

    #[test]
    fn a_point_is_read_with_or_without_its_der_wrapping() {
        for first in [0x00u8, 63, 65] {
            let mut raw = [0x04u8; 65].to_vec();
            raw[1] = first;
            assert_eq!(unwrap_octets([&[0x04, 65][..], &raw].concat(), 65), raw);
            assert_eq!(unwrap_octets(raw.clone(), 65), raw, "a raw point starting 04 {first}");
        }
        let ed = [7u8; 32].to_vec();
        assert_eq!(unwrap_octets([&[0x04, 32][..], &ed].concat(), 32), ed);
        assert_eq!(unwrap_octets(ed.clone(), 32), ed);
    }

    #[test]
    fn keys_are_labelled_by_role_owner_and_family() {
        let table = [
            (KeyRef::Sponsor, Family::Evm, "custody-indexer:sponsor:platform:evm"),
            (KeyRef::Omnibus, Family::Solana, "custody-indexer:omnibus:platform:solana"),
            (KeyRef::Account(7), Family::Evm, "custody-indexer:account:7:evm"),
            (KeyRef::Issuer, Family::Solana, "custody-indexer:issuer:platform:solana"),
            (KeyRef::Settlement, Family::Evm, "custody-indexer:settlement:platform:evm"),
        ];
        for (key, family, label) in table {
            assert_eq!(Pkcs11Signer::label(key, family), label);
        }
    }
}
