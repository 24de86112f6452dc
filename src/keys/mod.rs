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
//! | stablecoin issuer | `m/44'/60'/1'/0/0` | `m/44'/501'/0'/1'` |
//!
//! These are the paths wallets such as MetaMask and Phantom use for their
//! *n*-th address, so an operator can recover any key with standard tools.
//! The issuer's paths are outside every account's (BIP-44 account 1 on EVM,
//! change 1 on Solana): no account index can ever derive the key that
//! mints the platform's stablecoins.
//! No key or phrase is ever formatted: `Debug` prints only addresses.
//!
//! The phrase is held only in zeroized buffers, from the variable or file it
//! is read from to the BIP-39 seed (PBKDF2 in aws-lc, which cleanses its
//! state); the signer keeps the seed alone, and derives EVM keys from it
//! with BIP-32 rather than through alloy's builder, which would copy the
//! phrase into a `String` of its own.

use std::{fmt, path::PathBuf, sync::Arc};

use alloy::primitives::{Address, B256, Signature};
use futures::future::BoxFuture;
use solana_derivation_path::DerivationPath;

pub mod accounts;
mod apart;
mod bounded;
pub mod guard;
pub mod import;
pub mod init;
#[cfg(feature = "aws-kms")]
pub mod kms;
mod local;
mod open;
pub mod pins;
pub mod pkcs11;
pub mod rules;
mod split;
pub mod transit;
pub mod watch;

pub use guard::MAX_PER_MINUTE_ENV;
pub use local::{MnemonicSigner, Phrase};
pub use open::{ISSUER_SIGNER_ENV, Scope, from_env};

/// The environment variable holding the phrase itself.
pub const MNEMONIC_ENV: &str = "CUSTODY_INDEXER_MNEMONIC";
/// The environment variable naming a file that holds the phrase.
pub const MNEMONIC_FILE_ENV: &str = "CUSTODY_INDEXER_MNEMONIC_FILE";

/// The first derivation index of a segregated account's key.
pub const FIRST_ACCOUNT_INDEX: u32 = 2;

/// Which key: the chain family's gas sponsor, the omnibus wallet, a
/// segregated account's own key by derivation index, the issuer of the
/// platform's stablecoins, or the settlement wallet that receives what
/// off-ramps pay out (and sends back what a bank refuses or returns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyRef {
    Sponsor,
    Omnibus,
    Account(u32),
    Issuer,
    Settlement,
}

impl KeyRef {
    /// The address index of the sponsor, the omnibus wallet and accounts;
    /// `None` for the issuer and the settlement wallet, which no index reaches.
    pub fn index(self) -> Option<u32> {
        match self {
            KeyRef::Sponsor => Some(0),
            KeyRef::Omnibus => Some(1),
            KeyRef::Account(n) => Some(n),
            KeyRef::Issuer | KeyRef::Settlement => None,
        }
    }

    /// The BIP-32 path of the key on EVM chains: an account of its own
    /// (BIP-44's third level) for the issuer (1) and the settlement wallet (2).
    pub fn evm_path(self) -> String {
        match self {
            KeyRef::Issuer => "m/44'/60'/1'/0/0".into(),
            KeyRef::Settlement => "m/44'/60'/2'/0/0".into(),
            _ => format!("m/44'/60'/0'/0/{}", self.index().unwrap_or_default()),
        }
    }

    /// The SLIP-10 path of the key on Solana: `m/44'/501'/0'/1'` for the
    /// issuer and `m/44'/501'/0'/2'` for the settlement wallet, which no
    /// account's `m/44'/501'/N'/0'` reaches.
    pub fn solana_path(self) -> DerivationPath {
        match self {
            KeyRef::Issuer => DerivationPath::new_bip44(Some(0), Some(1)),
            KeyRef::Settlement => DerivationPath::new_bip44(Some(0), Some(2)),
            _ => DerivationPath::new_bip44(self.index(), Some(0)),
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
    #[error("no key can be derived at {0}")]
    Path(String),
    #[error("signing failed: {0}")]
    Signing(String),
    #[error("{0} is not set: the signer's backend needs it")]
    Setting(String),
    /// A production service with keys its host can read, not allowed.
    #[error("{}", rules::refusal(.0))]
    LocalKeys(&'static str),
    #[error("{0} must be {1}")]
    BadSetting(String, &'static str),
    #[error("{0}: {1:?} is not {2}")]
    UnknownBackend(String, String, &'static str),
    /// A backend this build was made without.
    #[error("{0}={1} needs a build with the cargo feature {1} (cargo build --release --features {1})")]
    NotBuilt(String, &'static str),
    /// The issuer's own signer without a signer for the service's keys.
    #[error(
        "{0} is set, but no signer holds the service's other keys: set {SIGNER_ENV} (or the mnemonic) too"
    )]
    IssuerAlone(String),
    #[error(
        "{MNEMONIC_ENV} or {MNEMONIC_FILE_ENV} is set beside {SIGNER_ENV}={0}: keys come from one source only; \
         unset the mnemonic (or move its keys into the token with keys import-local)"
    )]
    Mixed(String),
    /// The token or its library: unreachable, refusing, or without the key.
    #[error("the key token: {0}")]
    Token(String),
    /// The token refuses the PIN it was given: asking again with the same
    /// PIN changes nothing.
    #[error("the key token: the token refuses the PIN: {0}")]
    PinRefused(String),
    /// The signing service (a Transit engine): unreachable or refusing.
    #[error("the signing service: {0}")]
    Service(String),
    /// A backend without secp256k1 keys asked for an EVM key.
    #[error(
        "{0}: {SIGNER_ENV}=vault-transit has no secp256k1 keys, so it signs for Solana chains only;          use pkcs11 for EVM chains"
    )]
    NoSecp256k1(String),
    /// The backend answered a signature that does not verify against the
    /// key's own public key: never broadcast.
    #[error("the signer answered a signature that does not verify for {0}: not sent")]
    BadSignature(String),
    /// A key that is not the one the platform records (another phrase's,
    /// another key under the label): never imported or used.
    #[error("{0}")]
    NotTheKey(String),
    /// More signatures by one key in a minute than
    /// `CUSTODY_INDEXER_SIGNER_MAX_PER_MINUTE` allows.
    #[error("{0} signed {1} times in the last minute, the most {MAX_PER_MINUTE_ENV} allows: refused")]
    RateLimited(String, u32),
}

impl KeyError {
    /// Whether the same signing can succeed later, with nothing changed
    /// about what is signed: the backend did not answer, answered a bad
    /// signature, or the key's rate was reached. What waits on it keeps
    /// its state.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            KeyError::Token(_) | KeyError::Service(_) | KeyError::BadSignature(_) | KeyError::RateLimited(..)
        )
    }

    /// Whether the backend itself did not answer (its library, token or
    /// server), as opposed to refusing what it was asked.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, KeyError::Token(_) | KeyError::Service(_))
    }
}

/// The environment variable choosing where keys live: `local` (the
/// mnemonic; the default), `pkcs11` or `vault-transit`.
pub const SIGNER_ENV: &str = "CUSTODY_INDEXER_SIGNER";

/// `signer` as everything that signs uses it, whatever the backend (the
/// environment's, or `dev`'s own mnemonic): every signature verified and
/// each key's rate bounded ([`guard`]).
pub fn guarded(signer: Arc<dyn Signer>) -> Result<Arc<dyn Signer>, KeyError> {
    Ok(Arc::new(guard::Guarded::new(signer, guard::max_per_minute_from_env()?)))
}

/// Where a signer's keys live, as `health` and the logs name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// Derived in the process from the mnemonic.
    Local,
    /// In the PKCS#11 token labelled so; `hardware` only on the
    /// operator's attestation (`CUSTODY_INDEXER_PKCS11_HARDWARE=true`) for
    /// a module that is not SoftHSM: otherwise a software token, a library
    /// file on the host.
    Pkcs11 { token: String, hardware: bool },
    /// In a Transit engine, at this mount.
    VaultTransit { mount: String },
    /// In AWS KMS.
    AwsKms,
    /// The issuer's key in a backend of its own, every other key in `main`.
    Split { main: Box<Backend>, issuer: Box<Backend> },
}

impl Backend {
    /// Each backend keys are in: itself, or both of a split.
    pub fn parts(&self) -> Vec<&Backend> {
        match self {
            Backend::Split { main, issuer } => [main.parts(), issuer.parts()].concat(),
            other => vec![other],
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Local => f.write_str("local mnemonic"),
            Backend::Pkcs11 { token, hardware: true } => {
                write!(f, "pkcs11 token {token:?} (attested hardware)")
            }
            Backend::Pkcs11 { token, hardware: false } => write!(f, "pkcs11 software token {token:?}"),
            Backend::VaultTransit { mount } => write!(f, "vault-transit mount {mount:?}"),
            Backend::AwsKms => f.write_str("aws-kms"),
            Backend::Split { main, issuer } => write!(f, "{main}; the issuer's key: {issuer}"),
        }
    }
}

/// A key's name: `custody-indexer:<role>:<owner>:<family>` (a token's label).
pub fn describe(key: KeyRef, family: crate::chain::Family) -> String {
    let (role, owner) = match key {
        KeyRef::Sponsor => ("sponsor", "platform".to_string()),
        KeyRef::Omnibus => ("omnibus", "platform".to_string()),
        KeyRef::Account(index) => ("account", index.to_string()),
        KeyRef::Issuer => ("issuer", "platform".to_string()),
        KeyRef::Settlement => ("settlement", "platform".to_string()),
    };
    format!("custody-indexer:{role}:{owner}:{}", crate::family::rules::name(family))
}

/// What signs for the service. Implementations must never log, format or
/// return key material.
pub trait Signer: Send + Sync {
    /// Where the keys live.
    fn backend(&self) -> Backend;
    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError>;
    /// The base58 public key.
    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError>;
    /// Whether the backend already holds `key` for `family`, asked without
    /// making it (the mnemonic derives every key: it holds them all).
    fn holds(&self, key: KeyRef, family: crate::chain::Family) -> Result<bool, KeyError>;
    /// Signs a 32-byte digest (a transaction's or an EIP-712 signing hash).
    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>>;
    /// Signs a serialized Solana message with ed25519.
    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>>;
}
