//! The token itself: a logged-in session while it answers, opened again
//! after it stops, and the keys found through it. Every call here blocks
//! on the token; [`super::Pkcs11Signer`] makes them on threads of their own
//! with a time limit.

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, Weak},
};

use alloy::primitives::{Address, B256, Signature};
use cryptoki::{
    context::{CInitializeArgs, CInitializeFlags, Pkcs11},
    mechanism::{
        Mechanism,
        eddsa::{EddsaParams, EddsaSignatureScheme},
    },
    object::ObjectHandle,
    session::{Session, UserType},
    types::AuthPin,
};
use zeroize::Zeroizing;

use super::{TokenSettings, ecdsa::evm_signature, objects, token_error};
use crate::{
    chain::Family,
    keys::{Backend, KeyError, KeyRef},
};

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
    _context: Arc<Pkcs11>,
}

/// The token's settings, a session on it while it answers, and the keys
/// found so far. A failed call drops the session and what was found with
/// it: the next call loads the library again, finds the token, logs in
/// (the PIN read from its file again) and finds each key anew, so a token
/// that went away and came back signs again without a restart.
pub struct Token {
    settings: TokenSettings,
    /// Counted as hardware: attested by the operator, and not SoftHSM.
    hardware: bool,
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

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token").finish_non_exhaustive()
    }
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

impl Token {
    /// Opens the token `settings` names and logs in as its user.
    pub fn open(settings: &TokenSettings) -> Result<Self, KeyError> {
        let (open, softhsm) = connect(settings)?;
        if settings.hardware && softhsm {
            tracing::warn!(
                token = %settings.token,
                "the module is SoftHSM, a library file on this host: counted as a software token whatever \
                 its hardware attestation says"
            );
        }
        Ok(Token {
            settings: settings.clone(),
            hardware: crate::keys::rules::counts_as_hardware(settings.hardware, softhsm),
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

impl Token {
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
                let refused_pin = matches!(error, KeyError::PinRefused(_)).then(pin_changed);
                let text = error.to_string();
                if refused_pin.is_some() {
                    tracing::error!(error = %text, "signer: the token refuses the PIN; not tried again until the PIN file changes");
                }
                *retry = Some(Retry { at: std::time::Instant::now(), error: text.clone(), refused_pin });
                Err(KeyError::Token(text))
            }
        }
    }
}

/// The libraries loaded, by path. PKCS#11 initialises a library once per
/// process: two signers on one module (the service's and the issuer's
/// own) share it, and it is finalised, to be loaded anew, once neither
/// holds a session on it.
static LIBRARIES: Mutex<Vec<(PathBuf, Weak<Pkcs11>)>> = Mutex::new(Vec::new());

/// The library at `module`: the one loaded, or loaded and initialised now.
fn library(module: &Path) -> Result<Arc<Pkcs11>, KeyError> {
    let mut loaded = LIBRARIES.lock().expect("library lock");
    loaded.retain(|(_, library)| library.strong_count() > 0);
    if let Some(library) = loaded.iter().find(|(path, _)| path == module).and_then(|(_, l)| l.upgrade()) {
        return Ok(library);
    }
    let context = Pkcs11::new(module).map_err(token_error("the PKCS#11 library does not load"))?;
    context
        .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .map_err(token_error("the PKCS#11 library does not start"))?;
    let library = Arc::new(context);
    loaded.push((module.to_path_buf(), Arc::downgrade(&library)));
    Ok(library)
}

/// Loads the library, finds the token by its label and logs in as its
/// user; whether the token is SoftHSM (its manufacturer, or the library's
/// file name, says so).
fn connect(settings: &TokenSettings) -> Result<(Open, bool), KeyError> {
    let pin = read_pin(&settings.pin_file)?;
    let context = library(&settings.module)?;
    let slots = context.get_slots_with_token().map_err(token_error("no slot answers"))?;
    let slot = slots
        .into_iter()
        .find(|slot| context.get_token_info(*slot).is_ok_and(|info| info.label().trim() == settings.token))
        .ok_or_else(|| KeyError::Token(format!("no token is labelled {:?}", settings.token)))?;
    let info = context.get_token_info(slot).map_err(token_error("the token does not describe itself"))?;
    let named = |text: &str| text.to_ascii_lowercase().contains("softhsm");
    let softhsm = named(info.manufacturer_id())
        || settings.module.file_name().is_some_and(|name| named(&name.to_string_lossy()));
    let session = context.open_rw_session(slot).map_err(token_error("the token opens no session"))?;
    match session.login(UserType::User, Some(&pin)) {
        // Another signer of this process (the issuer's, on the same token)
        // logged in first: login is the token's, for the whole process.
        Ok(()) | Err(cryptoki::error::Error::Pkcs11(cryptoki::error::RvError::UserAlreadyLoggedIn, _)) => {}
        Err(error) => return Err(KeyError::PinRefused(error.to_string())),
    }
    Ok((Open { session, _context: context }, softhsm))
}

impl Token {
    /// `custody-indexer:<role>:<owner>:<family>`.
    pub fn label(key: KeyRef, family: Family) -> String {
        crate::keys::describe(key, family)
    }

    /// The key labelled for `key` and `family`: found, or made in the token.
    fn find_or_make(&self, key: KeyRef, family: Family) -> Result<(ObjectHandle, Vec<u8>), KeyError> {
        self.with_session(|session| objects::find_or_make(session, &Self::label(key, family), family))
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

    /// The EVM address read before, if any: no call on the token.
    pub fn known_evm(&self, key: KeyRef) -> Option<Address> {
        self.known(key, Family::Evm).filter(|p| p.len() == 65).map(|p| Address::from_raw_public_key(&p[1..]))
    }

    /// The Solana address read before, if any: no call on the token.
    pub fn known_solana(&self, key: KeyRef) -> Option<String> {
        self.known(key, Family::Solana).map(|p| bs58::encode(p).into_string())
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

    /// Puts `key` for `family` into the token: `secret` as its private
    /// half (sensitive, never extractable from then on) and `public` beside
    /// it; refused when the token already holds the key.
    /// Removes `key` for `family` from the token, and from what this
    /// process knows of it.
    pub fn remove(&self, key: KeyRef, family: Family) -> Result<(), KeyError> {
        self.with_session(|session| objects::destroy(session, &Self::label(key, family)))?;
        self.known.lock().expect("key cache lock").remove(&(key, family));
        self.evm.lock().expect("key cache lock").remove(&key);
        self.solana.lock().expect("key cache lock").remove(&key);
        Ok(())
    }

    pub fn import(
        &self,
        key: KeyRef,
        family: Family,
        secret: &[u8; 32],
        public: &[u8],
    ) -> Result<(), KeyError> {
        let label = Self::label(key, family);
        self.with_session(|session| objects::import(session, &label, family, secret, public))
    }

    fn sign(&self, mechanism: &Mechanism, private: ObjectHandle, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.with_session(|session| {
            session.sign(mechanism, private, data).map_err(token_error("the token does not sign"))
        })
    }
}

impl Token {
    pub fn backend(&self) -> Backend {
        Backend::Pkcs11 { token: self.settings.token.clone(), hardware: self.hardware }
    }

    pub fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        match self.known(key, Family::Evm) {
            Some(point) if point.len() == 65 => Ok(Address::from_raw_public_key(&point[1..])),
            _ => Ok(self.evm_key(key)?.public),
        }
    }

    pub fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        match self.known(key, Family::Solana) {
            Some(point) => Ok(bs58::encode(point).into_string()),
            None => Ok(bs58::encode(self.solana_key(key)?.public).into_string()),
        }
    }

    pub fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
        let label = Self::label(key, family);
        let found = self.with_session(|session| objects::find(session, &label, family))?;
        if let Some((_, point)) = &found {
            self.same_as_known(key, family, point)?;
        }
        Ok(found.is_some())
    }

    pub fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> Result<Signature, KeyError> {
        let found = self.evm_key(key)?;
        let raw = self.sign(&Mechanism::Ecdsa, found.private, hash.as_slice())?;
        evm_signature(&raw, hash, found.public)
    }

    pub fn sign_solana(&self, key: KeyRef, message: &[u8]) -> Result<[u8; 64], KeyError> {
        let found = self.solana_key(key)?;
        let mechanism = Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure));
        let raw = self.sign(&mechanism, found.private, message)?;
        raw.try_into()
            .map_err(|_| KeyError::BadSignature("the token's Ed25519 signature is not 64 bytes".into()))
    }
}
