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

use std::{path::PathBuf, time::Duration};

use alloy::primitives::{Address, B256, Signature};
use futures::future::BoxFuture;

use super::{Backend, KeyError, KeyRef, Scope, Signer, bounded::Bounded};
use crate::chain::Family;

mod ecdsa;
mod objects;
mod token;

pub use ecdsa::evm_signature;

/// The variable naming the PKCS#11 library (after the scope's prefix).
pub const MODULE_VAR: &str = "PKCS11_MODULE";
/// The variable naming the token, by its label.
pub const TOKEN_VAR: &str = "PKCS11_TOKEN";
/// The variable naming the file holding the user PIN.
pub const PIN_FILE_VAR: &str = "PKCS11_PIN_FILE";
/// The variable bounding how long one call waits for the token, in
/// seconds ([`DEFAULT_TIMEOUT`] when unset).
pub const TIMEOUT_VAR: &str = "PKCS11_TIMEOUT_SECS";
/// The variable by which the operator attests that the module is a
/// hardware token (`true`): without it a token counts as software.
pub const HARDWARE_VAR: &str = "PKCS11_HARDWARE";
/// How long one call waits for the token by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// How long a call may wait for the token before it counts as an outage.
    pub timeout: Duration,
    /// The operator's attestation that the module is a hardware token
    /// (`CUSTODY_INDEXER_PKCS11_HARDWARE=true`, or the issuer's).
    pub hardware: bool,
}

impl TokenSettings {
    /// The settings the environment gives the service's signer, each
    /// variable required.
    pub fn from_env() -> Result<Self, KeyError> {
        Self::from_vars(Scope::Main, |name| std::env::var(name).ok())
    }

    /// The settings `vars` gives by variable name, for `scope`.
    pub fn from_vars(scope: Scope, vars: impl Fn(&str) -> Option<String>) -> Result<Self, KeyError> {
        let var = |suffix: &str| {
            let name = scope.var(suffix);
            vars(&name).filter(|v| !v.trim().is_empty()).ok_or(KeyError::Setting(name))
        };
        let timeout = match vars(&scope.var(TIMEOUT_VAR)).filter(|v| !v.trim().is_empty()) {
            None => DEFAULT_TIMEOUT,
            Some(text) => {
                text.trim().parse::<u64>().ok().filter(|secs| *secs > 0).map(Duration::from_secs).ok_or(
                    KeyError::BadSetting(scope.var(TIMEOUT_VAR), "a whole number of seconds, at least 1"),
                )?
            }
        };
        let hardware = match vars(&scope.var(HARDWARE_VAR)).map(|v| v.trim().to_ascii_lowercase()).as_deref()
        {
            None | Some("" | "false") => false,
            Some("true") => true,
            Some(_) => return Err(KeyError::BadSetting(scope.var(HARDWARE_VAR), "true or false")),
        };
        Ok(TokenSettings {
            module: var(MODULE_VAR)?.into(),
            token: var(TOKEN_VAR)?,
            pin_file: var(PIN_FILE_VAR)?.into(),
            timeout,
            hardware,
        })
    }
}

fn token_error(what: &str) -> impl Fn(cryptoki::error::Error) -> KeyError + '_ {
    move |error| KeyError::Token(format!("{what}: {error}"))
}

/// The signer of a PKCS#11 token: every call on the token is bounded in
/// time ([`super::bounded`]), so a token that hangs is an outage.
pub struct Pkcs11Signer {
    token: Bounded<token::Token>,
}

impl std::fmt::Debug for Pkcs11Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs11Signer").finish_non_exhaustive()
    }
}

impl Pkcs11Signer {
    /// Opens the token `settings` names and logs in as its user.
    pub fn open(settings: &TokenSettings) -> Result<Self, KeyError> {
        Ok(Pkcs11Signer { token: Bounded::new(token::Token::open(settings)?, settings.timeout) })
    }

    /// `custody-indexer:<role>:<owner>:<family>`.
    pub fn label(key: KeyRef, family: Family) -> String {
        super::describe(key, family)
    }

    /// Puts `key` for `family` into the token: `secret` as its private
    /// half (sensitive, never extractable from then on) and `public` beside
    /// it; refused when the token already holds the key.
    pub fn import(
        &self,
        key: KeyRef,
        family: Family,
        secret: zeroize::Zeroizing<[u8; 32]>,
        public: Vec<u8>,
    ) -> Result<(), KeyError> {
        self.token.call_now(move |token| token.import(key, family, &secret, &public))
    }
}

impl Pkcs11Signer {
    /// Removes `key` for `family` from the token: an import that does not
    /// sign, and nothing else.
    pub fn remove(&self, key: KeyRef, family: Family) -> Result<(), KeyError> {
        self.token.call_now(move |token| token.remove(key, family))
    }
}

impl Signer for Pkcs11Signer {
    fn backend(&self) -> Backend {
        self.token.target().backend()
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        match self.token.target().known_evm(key) {
            Some(address) => Ok(address),
            None => self.token.call_now(move |token| token.evm_address(key)),
        }
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        match self.token.target().known_solana(key) {
            Some(address) => Ok(address),
            None => self.token.call_now(move |token| token.solana_address(key)),
        }
    }

    fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
        self.token.call_now(move |token| token.holds(key, family))
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(self.token.call(move |token| token.sign_evm_hash(key, hash)))
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(self.token.call(move |token| token.sign_solana(key, &message)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_token_is_attested_as_hardware_by_its_own_scopes_variable_only() {
        let base = ["PKCS11_MODULE", "PKCS11_TOKEN", "PKCS11_PIN_FILE"];
        let settings = |scope: Scope, set: &[(&str, &str)]| {
            TokenSettings::from_vars(scope, |name| {
                let prefixed = |suffix: &str| scope.var(suffix) == name;
                if base.iter().any(|s| prefixed(s)) {
                    return Some("x".to_string());
                }
                set.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
            })
        };
        type Case<'a> = (Scope, &'a [(&'a str, &'a str)], Option<bool>);
        let cases: [Case; 7] = [
            (Scope::Main, &[], Some(false)),
            (Scope::Main, &[("CUSTODY_INDEXER_PKCS11_HARDWARE", "true")], Some(true)),
            (Scope::Main, &[("CUSTODY_INDEXER_PKCS11_HARDWARE", " TRUE ")], Some(true)),
            (Scope::Main, &[("CUSTODY_INDEXER_PKCS11_HARDWARE", "false")], Some(false)),
            (Scope::Main, &[("CUSTODY_INDEXER_PKCS11_HARDWARE", "yes")], None),
            (Scope::Issuer, &[("CUSTODY_INDEXER_PKCS11_HARDWARE", "true")], Some(false)),
            (Scope::Issuer, &[("CUSTODY_INDEXER_ISSUER_PKCS11_HARDWARE", "true")], Some(true)),
        ];
        for (scope, set, hardware) in cases {
            let found = settings(scope, set);
            assert_eq!(found.as_ref().ok().map(|s| s.hardware), hardware, "{scope:?} {set:?}: {found:?}");
        }
    }
}
