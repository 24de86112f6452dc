//! The signer the environment configures: the service's keys from
//! `CUSTODY_INDEXER_SIGNER` and its settings, and the issuer's key from a
//! backend of its own when `CUSTODY_INDEXER_ISSUER_SIGNER` names one (its
//! settings then prefixed `CUSTODY_INDEXER_ISSUER_`), so that the key that
//! mints the platform's stablecoins can live in another token or engine.

use std::sync::Arc;

use super::{
    KeyError, MNEMONIC_ENV, MNEMONIC_FILE_ENV, MnemonicSigner, SIGNER_ENV, Signer, pkcs11, split::Split,
    transit,
};

/// The variable choosing the issuer's own backend: `pkcs11` or
/// `vault-transit`; unset, the issuer's key is the service signer's.
pub const ISSUER_SIGNER_ENV: &str = "CUSTODY_INDEXER_ISSUER_SIGNER";

/// Whose settings: the service's signer (`CUSTODY_INDEXER_…`) or the
/// issuer's own (`CUSTODY_INDEXER_ISSUER_…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Main,
    Issuer,
}

impl Scope {
    /// The variable named `suffix` (`PKCS11_MODULE`, …) in this scope.
    pub fn var(self, suffix: &str) -> String {
        match self {
            Scope::Main => format!("CUSTODY_INDEXER_{suffix}"),
            Scope::Issuer => format!("CUSTODY_INDEXER_ISSUER_{suffix}"),
        }
    }
}

/// The signer the environment configures: `CUSTODY_INDEXER_SIGNER=pkcs11`
/// opens the token (and refuses a mnemonic beside it); `local`, or unset,
/// the mnemonic when one is set; with `CUSTODY_INDEXER_ISSUER_SIGNER`, the
/// issuer's key in a backend of its own. `Ok(None)` when no key source is
/// set. Whoever signs with it wraps it in [`super::guarded`] first.
pub fn from_env() -> Result<Option<Arc<dyn Signer>>, KeyError> {
    let set = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let main = match set(SIGNER_ENV).as_deref() {
        None | Some("local") => MnemonicSigner::from_env()?.map(|s| Arc::new(s) as Arc<dyn Signer>),
        Some(backend @ ("pkcs11" | "vault-transit" | "aws-kms")) => {
            if [MNEMONIC_ENV, MNEMONIC_FILE_ENV].iter().any(|name| set(name).is_some()) {
                return Err(KeyError::Mixed(backend.into()));
            }
            Some(open(Scope::Main, backend, set)?)
        }
        Some(other) => {
            return Err(KeyError::UnknownBackend(
                SIGNER_ENV.into(),
                other.into(),
                "local, pkcs11, aws-kms or vault-transit",
            ));
        }
    };
    let Some(issuer) = set(ISSUER_SIGNER_ENV) else { return Ok(main) };
    let main = main.ok_or_else(|| KeyError::IssuerAlone(ISSUER_SIGNER_ENV.into()))?;
    let issuer = match issuer.as_str() {
        backend @ ("pkcs11" | "vault-transit" | "aws-kms") => open(Scope::Issuer, backend, set)?,
        other => {
            return Err(KeyError::UnknownBackend(
                ISSUER_SIGNER_ENV.into(),
                other.into(),
                "pkcs11, aws-kms or vault-transit",
            ));
        }
    };
    Ok(Some(Arc::new(Split::new(main, issuer))))
}

/// The `backend` (`pkcs11`, `aws-kms` or `vault-transit`) `scope`'s
/// settings name.
fn open(
    scope: Scope,
    backend: &str,
    vars: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Signer>, KeyError> {
    Ok(match backend {
        "pkcs11" => Arc::new(pkcs11::Pkcs11Signer::open(&pkcs11::TokenSettings::from_vars(scope, vars)?)?),
        "aws-kms" => aws_kms(scope, vars)?,
        _ => Arc::new(transit::TransitSigner::open(&transit::TransitSettings::from_vars(scope, vars)?)?),
    })
}

#[cfg(feature = "aws-kms")]
fn aws_kms(scope: Scope, vars: impl Fn(&str) -> Option<String>) -> Result<Arc<dyn Signer>, KeyError> {
    use super::kms;
    Ok(Arc::new(kms::KmsSigner::open(&kms::KmsSettings::from_vars(scope, vars)?)?))
}

#[cfg(not(feature = "aws-kms"))]
fn aws_kms(scope: Scope, _: impl Fn(&str) -> Option<String>) -> Result<Arc<dyn Signer>, KeyError> {
    let name = if scope == Scope::Main { SIGNER_ENV } else { ISSUER_SIGNER_ENV };
    Err(KeyError::NotBuilt(name.into(), "aws-kms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issuers_settings_are_named_in_full() {
        assert_eq!(Scope::Main.var("PKCS11_MODULE"), "CUSTODY_INDEXER_PKCS11_MODULE");
        assert_eq!(Scope::Issuer.var("PKCS11_PIN_FILE"), "CUSTODY_INDEXER_ISSUER_PKCS11_PIN_FILE");
        assert_eq!(Scope::Issuer.var("VAULT_TRANSIT_MOUNT"), "CUSTODY_INDEXER_ISSUER_VAULT_TRANSIT_MOUNT");
        let missing = pkcs11::TokenSettings::from_vars(Scope::Issuer, |name| {
            (name == "CUSTODY_INDEXER_ISSUER_PKCS11_MODULE").then(|| "/lib/p11.so".to_string())
        });
        assert!(
            matches!(&missing, Err(KeyError::Setting(name)) if name == "CUSTODY_INDEXER_ISSUER_PKCS11_TOKEN"),
            "{missing:?}"
        );
        let main_only = pkcs11::TokenSettings::from_vars(Scope::Issuer, |name| {
            name.starts_with("CUSTODY_INDEXER_PKCS11").then(|| "x".to_string())
        });
        assert!(main_only.is_err(), "the service's settings are not the issuer's");
    }
}
