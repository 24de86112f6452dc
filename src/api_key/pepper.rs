//! The key pepper: operator and API keys are stored as HMAC-SHA-256, under
//! a secret the store never holds (the file `CUSTODY_INDEXER_KEY_PEPPER_FILE`
//! names), of the key's SHA-256: `hmac1:` and 64 hex digits. Whoever can
//! write the database but not read that file cannot make a row that
//! authenticates: a row holding a plain SHA-256 is no key to a process
//! that has the pepper.
//!
//! A store's keys are re-keyed once, at the first start of `run` or
//! `serve` with the pepper ([`adopt`]): every plain hash becomes its keyed
//! form (the key's SHA-256 is what the row kept), and the audit log
//! records `key_hashes.peppered` with the pepper's id. From then on no
//! plain hash is ever re-keyed (a row written with SQL later stays dead),
//! and a process with no pepper, or another one, is refused. `production`
//! requires the pepper; a sandbox without one keeps plain hashes.
//!
//! The pepper is the process's, read once from the environment.

use std::{
    path::Path,
    sync::{Arc, OnceLock},
};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::{
    audit::{self, Actor, Detail, Record},
    store::{Store, StoreError, audit as log_rows, key_hashes},
};

/// The variable naming the pepper's file.
pub const PEPPER_FILE_ENV: &str = "CUSTODY_INDEXER_KEY_PEPPER_FILE";
/// The prefix of a keyed hash.
pub const KEYED: &str = "hmac1:";
/// The audit action that records the re-keying.
pub const PEPPERED: &str = "key_hashes.peppered";
/// The fewest bytes a pepper has.
const MIN_BYTES: usize = 32;

/// A pepper. `Debug` shows its id only.
#[derive(Clone)]
pub struct Pepper(Arc<Zeroizing<Vec<u8>>>);

impl std::fmt::Debug for Pepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pepper({})", self.id())
    }
}

/// Why the pepper cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PepperError {
    #[error("{PEPPER_FILE_ENV} {path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("{PEPPER_FILE_ENV} {0}: a pepper has at least 32 bytes (`openssl rand -base64 48 > FILE`)")]
    Short(String),
}

impl Pepper {
    /// The pepper in the file at `path`: its bytes, trailing white space
    /// left out.
    pub fn from_file(path: &Path) -> Result<Self, PepperError> {
        let shown = path.display().to_string();
        let bytes = Zeroizing::new(
            std::fs::read(path)
                .map_err(|e| PepperError::Unreadable { path: shown.clone(), message: e.to_string() })?,
        );
        let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
        if end < MIN_BYTES {
            return Err(PepperError::Short(shown));
        }
        Ok(Pepper(Arc::new(Zeroizing::new(bytes[..end].to_vec()))))
    }

    fn mac(&self, data: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(data);
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Names the pepper without telling it: `pep_` and 16 hex digits.
    pub fn id(&self) -> String {
        format!("pep_{}", &self.mac(b"custody-indexer key pepper id")[..16])
    }

    /// The keyed form of a key's SHA-256 (lowercase hex).
    pub fn keyed(&self, sha256_hex: &str) -> String {
        let bytes: Option<Vec<u8>> = (sha256_hex.len() == 64)
            .then(|| (0..32).map(|i| u8::from_str_radix(&sha256_hex[2 * i..2 * i + 2], 16).ok()).collect())
            .flatten();
        format!("{KEYED}{}", self.mac(bytes.as_deref().unwrap_or(sha256_hex.as_bytes())))
    }
}

/// The process's pepper, read once from `CUSTODY_INDEXER_KEY_PEPPER_FILE`:
/// `None` when unset.
pub fn process() -> Result<Option<&'static Pepper>, PepperError> {
    static PEPPER: OnceLock<Result<Option<Pepper>, PepperError>> = OnceLock::new();
    let read =
        || std::env::var_os(PEPPER_FILE_ENV).map(|path| Pepper::from_file(Path::new(&path))).transpose();
    PEPPER.get_or_init(read).as_ref().map(Option::as_ref).map_err(Clone::clone)
}

/// What became of a store's key hashes at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peppering {
    /// No pepper, none recorded: plain hashes.
    Plain,
    /// Keyed under this process's pepper already.
    Keyed,
    /// Re-keyed now: this many rows.
    Rekeyed(usize),
}

/// Readies `store` for a command that makes or checks keys: the
/// principals it held before its log recorded them adopted (see
/// [`crate::audit::adopt`]: a key made first would close that for good),
/// and this process's pepper adopted ([`adopt`]); a `production` store
/// without one is refused (its keys would be stored in the plain).
pub async fn for_keys(store: &Store) -> Result<Peppering, StoreError> {
    let pepper = process().map_err(|e| StoreError::Invalid(e.to_string()))?;
    if pepper.is_none() && store.environment().await? == Some(crate::environment::Environment::Production) {
        return Err(StoreError::Invalid(format!(
            "a production store's keys are hashed under a pepper it never holds: set {PEPPER_FILE_ENV} to its file"
        )));
    }
    crate::audit::adopt::adopt(store).await?;
    adopt(store, pepper).await
}

/// Brings `store`'s key hashes under `pepper` (see the module's text):
/// refused when the store's keys are keyed under another pepper, or under
/// one this process lacks, or when the log's records of it disagree.
pub async fn adopt(store: &Store, pepper: Option<&Pepper>) -> Result<Peppering, StoreError> {
    let mut tx = store.begin().await?;
    match (pepper, recorded(&mut tx).await?) {
        (None, None) => Ok(Peppering::Plain),
        (None, Some(id)) => Err(StoreError::Invalid(format!(
            "the store's keys are hashed under a pepper ({id}): set {PEPPER_FILE_ENV} to its file"
        ))),
        (Some(pepper), Some(id)) if pepper.id() != id => Err(StoreError::Invalid(format!(
            "the store's keys are hashed under the pepper {id}, and {PEPPER_FILE_ENV} holds {}: no key would \
             authenticate",
            pepper.id()
        ))),
        (Some(_), Some(_)) => Ok(Peppering::Keyed),
        (Some(pepper), None) => {
            // The keys' rows first, then the log's head, as every change of
            // a key takes them.
            let plain = key_hashes::plain(&mut tx).await?;
            for row in &plain {
                key_hashes::set(&mut tx, row, &pepper.keyed(&row.hash)).await?;
            }
            audit::lock(&mut tx).await?;
            if recorded(&mut tx).await?.is_some() {
                // Another process keyed them meanwhile, under its pepper:
                // judged again from its record.
                drop(tx);
                return Box::pin(adopt(store, Some(pepper))).await;
            }
            let detail = Detail { pepper_id: Some(pepper.id()), ..Detail::default() };
            let record = Record {
                actor: &Actor::System,
                action: PEPPERED,
                target_kind: "store",
                target_id: "key_hashes",
                organization_id: None,
                reason: None,
                request_id: None,
                detail: Some(detail),
            };
            audit::append(&mut tx, None, record).await?;
            tx.commit().await?;
            Ok(Peppering::Rekeyed(plain.len()))
        }
    }
}

/// The pepper the log records the keys are hashed under: every record
/// must name the same one (a record appended later with another, or with
/// none, is an alteration, refused rather than followed).
async fn recorded(tx: &mut crate::store::Tx) -> Result<Option<String>, StoreError> {
    let entries = log_rows::all_of(tx, PEPPERED).await?;
    let ids: Vec<Option<String>> = entries
        .iter()
        .map(|e| e.detail.as_deref().and_then(Detail::parse).and_then(|d| d.pepper_id))
        .collect();
    match ids.first() {
        None => Ok(None),
        Some(Some(first)) if ids.iter().all(|id| id.as_deref() == Some(first)) => Ok(Some(first.clone())),
        Some(_) => Err(StoreError::Corrupt(format!(
            "the audit log's {PEPPERED} records disagree (entries {}): the log was written outside the service",
            entries.iter().map(|e| e.seq.to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pepper(text: &str) -> Pepper {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pepper");
        std::fs::write(&path, text).unwrap();
        Pepper::from_file(&path).unwrap()
    }

    #[test]
    fn a_keyed_hash_needs_the_pepper_and_names_it_without_telling_it() {
        let key = pepper(&format!("{}\n", "a".repeat(32)));
        let other = pepper(&"b".repeat(40));
        let sha = super::super::hash("cik_token");
        let keyed = key.keyed(&sha);
        assert!(keyed.starts_with(KEYED) && keyed.len() == KEYED.len() + 64, "{keyed}");
        assert_eq!(keyed, pepper(&"a".repeat(32)).keyed(&sha), "trailing white space is no part of it");
        assert_ne!(keyed, other.keyed(&sha));
        assert_ne!(key.id(), other.id());
        assert!(key.id().starts_with("pep_") && !format!("{key:?}").contains("aaaa"), "{key:?}");
        // HMAC-SHA-256 over the SHA-256's bytes: RFC 4231's construction.
        let mut mac = Hmac::<Sha256>::new_from_slice("a".repeat(32).as_bytes()).unwrap();
        mac.update(&sha2::Digest::finalize(sha2::Digest::chain_update(Sha256::default(), b"cik_token")));
        let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(keyed, format!("{KEYED}{expected}"));
    }

    #[test]
    fn a_short_or_missing_pepper_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, format!("{}\n\n", "a".repeat(31))).unwrap();
        assert!(matches!(Pepper::from_file(&short), Err(PepperError::Short(_))));
        let missing = Pepper::from_file(&dir.path().join("none")).unwrap_err();
        assert!(missing.to_string().contains(PEPPER_FILE_ENV), "{missing}");
    }
}
