//! Personal data at rest: identities' labels and their KYC/KYB submissions
//! (names, dates of birth, addresses, tax ids, emails, phones) are stored
//! sealed with AES-256-GCM under a 32-byte key from `CUSTODY_INDEXER_PII_KEY`.
//!
//! A sealed value is `pii1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`:
//! a random 96-bit nonce per value, the id of the key that sealed it (so
//! that a later key can be rotated in beside it), and the value's table,
//! column and row as associated data, so a value copied to another row or
//! column does not open. The key id is an HMAC of the key: it names the key
//! without revealing it, and a store keeps it to refuse a wrong key.
//!
//! Nothing here formats a key or a plaintext: `Debug` shows key ids only,
//! and [`Masked`] hides personal data held in memory from `Debug`.

use std::{fmt, ops::Deref};

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use base64::{
    Engine,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::environment::Environment;

/// The variable holding the key: 32 bytes in base64 (`openssl rand -base64 32`).
pub const PII_KEY_ENV: &str = "CUSTODY_INDEXER_PII_KEY";

/// What every sealed value starts with; the version of the format.
const PREFIX: &str = "pii1.";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PiiError {
    #[error(
        "{PII_KEY_ENV} is not set: production stores personal data encrypted with it; set it to 32 random \
         bytes in base64 (e.g. `openssl rand -base64 32`) and keep it as safe as the database's backups"
    )]
    Missing,
    /// Never carries the value.
    #[error(
        "{PII_KEY_ENV} must be 32 bytes in base64 (e.g. `openssl rand -base64 32`); the value is not shown"
    )]
    Invalid,
    #[error(
        "the store's personal data is encrypted with key {stored}, and {PII_KEY_ENV} holds key {given}: start \
         with the store's key{hint}"
    )]
    WrongKey { stored: String, given: String, hint: &'static str },
    #[error(
        "the store's personal data is encrypted with key {0}, which the store does not keep: set {PII_KEY_ENV}"
    )]
    NotKept(String),
    #[error("the store holds personal data encrypted at rest: set {PII_KEY_ENV} to read or write it")]
    Locked,
    #[error("{column} of {row} is sealed with key {sealed}, not with key {ours}")]
    OtherKey { column: &'static str, row: String, sealed: String, ours: String },
    #[error("{column} of {row} does not open: altered, or moved from another row")]
    Unopenable { column: &'static str, row: String },
}

/// A 32-byte key, zeroed on drop; never formatted.
#[derive(Clone)]
pub struct Key {
    bytes: Zeroizing<[u8; 32]>,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({})", self.id())
    }
}

impl Key {
    /// A key from its base64 text (surrounding white space ignored).
    pub fn parse(text: &str) -> Result<Self, PiiError> {
        let decoded = Zeroizing::new(STANDARD.decode(text.trim()).map_err(|_| PiiError::Invalid)?);
        let bytes: [u8; 32] = decoded.as_slice().try_into().map_err(|_| PiiError::Invalid)?;
        Ok(Self { bytes: Zeroizing::new(bytes) })
    }

    /// The key in `CUSTODY_INDEXER_PII_KEY`; `None` when unset or empty.
    pub fn from_env() -> Result<Option<Self>, PiiError> {
        let Some(value) = std::env::var_os(PII_KEY_ENV).map(|v| Zeroizing::new(v.into_encoded_bytes()))
        else {
            return Ok(None);
        };
        let text = std::str::from_utf8(&value).map_err(|_| PiiError::Invalid)?;
        if text.trim().is_empty() { Ok(None) } else { Self::parse(text).map(Some) }
    }

    pub fn generate() -> Self {
        let mut bytes = Zeroizing::new([0u8; 32]);
        getrandom::fill(bytes.as_mut_slice()).expect("the operating system's random source is available");
        Self { bytes }
    }

    /// The key in base64, for a sandbox store that keeps its own key.
    pub fn expose_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(STANDARD.encode(self.bytes.as_slice()))
    }

    /// `k` and 16 hex digits of HMAC-SHA256(key, a fixed label): names the
    /// key in sealed values and in the store without revealing it.
    pub fn id(&self) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.bytes.as_slice()).expect("HMAC takes any key");
        mac.update(b"custody-indexer pii key id");
        let digest = mac.finalize().into_bytes();
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("k{hex}")
    }
}

/// Where `run` or `serve` takes the key from.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// `CUSTODY_INDEXER_PII_KEY`.
    Given(Key),
    /// The key the store keeps, generated on first use: sandbox only, whose
    /// data is not real.
    Kept,
}

/// The key source of a process in `environment` given the variable's key:
/// production requires the variable; any other environment uses it when
/// set, else the store's own key.
pub fn key_source(environment: Environment, given: Option<Key>) -> Result<KeySource, PiiError> {
    match (environment, given) {
        (_, Some(key)) => Ok(KeySource::Given(key)),
        (Environment::Production, None) => Err(PiiError::Missing),
        (Environment::Sandbox, None) => Ok(KeySource::Kept),
    }
}

/// Where a sealed value lives: its table and column, and its row's key.
/// Bound to the ciphertext as associated data.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub column: &'static str,
    pub row: &'a [&'a str],
}

impl Place<'_> {
    fn aad(&self) -> Vec<u8> {
        // Each part behind its length: no two rows' parts concatenate alike.
        let mut aad = Vec::new();
        for part in std::iter::once(self.column).chain(self.row.iter().copied()) {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }

    fn row(&self) -> String {
        self.row.join("/")
    }
}

/// Seals and opens values under one key.
pub struct Cipher {
    aead: RandomizedNonceKey,
    id: String,
}

impl fmt::Debug for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cipher({})", self.id)
    }
}

impl Cipher {
    pub fn new(key: &Key) -> Self {
        let aead =
            RandomizedNonceKey::new(&AES_256_GCM, key.bytes.as_slice()).expect("a 32-byte AES-256 key");
        Self { aead, id: key.id() }
    }

    pub fn key_id(&self) -> &str {
        &self.id
    }

    /// Whether `value` is a sealed value (of any key).
    pub fn is_sealed(value: &str) -> bool {
        value.starts_with(PREFIX)
    }

    pub fn seal(&self, plaintext: &[u8], place: Place<'_>) -> String {
        let mut in_out = Zeroizing::new(plaintext.to_vec());
        let nonce = self
            .aead
            .seal_in_place_append_tag(Aad::from(place.aad()), &mut *in_out)
            .expect("AES-GCM seals any value");
        let mut sealed = nonce.as_ref().to_vec();
        sealed.extend_from_slice(&in_out);
        format!("{PREFIX}{}.{}", self.id, URL_SAFE_NO_PAD.encode(sealed))
    }

    pub fn open(&self, value: &str, place: Place<'_>) -> Result<Zeroizing<Vec<u8>>, PiiError> {
        let unopenable = || PiiError::Unopenable { column: place.column, row: place.row() };
        let (key_id, body) =
            value.strip_prefix(PREFIX).and_then(|v| v.split_once('.')).ok_or_else(unopenable)?;
        if key_id != self.id {
            return Err(PiiError::OtherKey {
                column: place.column,
                row: place.row(),
                sealed: key_id.into(),
                ours: self.id.clone(),
            });
        }
        let mut bytes = Zeroizing::new(URL_SAFE_NO_PAD.decode(body).map_err(|_| unopenable())?);
        if bytes.len() < NONCE_LEN {
            return Err(unopenable());
        }
        let nonce = Nonce::try_assume_unique_for_key(&bytes[..NONCE_LEN]).map_err(|_| unopenable())?;
        let plaintext = self
            .aead
            .open_in_place(nonce, Aad::from(place.aad()), &mut bytes[NONCE_LEN..])
            .map_err(|_| unopenable())?;
        Ok(Zeroizing::new(plaintext.to_vec()))
    }

    pub fn open_text(&self, value: &str, place: Place<'_>) -> Result<String, PiiError> {
        let bytes = self.open(value, place)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| PiiError::Unopenable { column: place.column, row: place.row() })
    }
}

/// Personal data in memory: `Debug` never shows it, so a struct holding it
/// may derive `Debug` and be logged. Serialized as the value itself, since
/// the API answers it to its owner.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Masked<T>(T);

impl<T> Masked<T> {
    pub fn new(value: T) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Masked<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

impl From<&str> for Masked<String> {
    fn from(value: &str) -> Self {
        Self(value.to_string())
    }
}

impl<T> Deref for Masked<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Masked<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Masked(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL: Place<'static> = Place { column: "identities.label", row: &["default", "id-1"] };

    #[test]
    fn a_sealed_value_opens_only_with_its_key_in_its_place() {
        let key = Key::generate();
        let cipher = Cipher::new(&key);
        let sealed = cipher.seal(b"Ada Lovelace", LABEL);
        assert!(sealed.starts_with(&format!("pii1.{}.", key.id())), "{sealed}");
        assert!(!sealed.contains("Ada"));
        assert_ne!(sealed, cipher.seal(b"Ada Lovelace", LABEL), "a fresh nonce per value");
        assert_eq!(cipher.open_text(&sealed, LABEL).unwrap(), "Ada Lovelace");

        let elsewhere = Place { column: "identities.label", row: &["default", "id-2"] };
        assert!(matches!(cipher.open(&sealed, elsewhere), Err(PiiError::Unopenable { .. })));
        let other = Cipher::new(&Key::generate());
        assert!(matches!(other.open(&sealed, LABEL), Err(PiiError::OtherKey { .. })));
        let mut altered = sealed.clone();
        altered.pop();
        altered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(matches!(cipher.open(&altered, LABEL), Err(PiiError::Unopenable { .. })));
    }

    #[test]
    fn keys_parse_from_base64_of_32_bytes_and_are_never_shown() {
        let text = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let key = Key::parse(&format!(" {text}\n")).unwrap();
        assert_eq!(key.expose_base64().as_str(), text);
        assert_eq!(key.id().len(), 17);
        assert_eq!(key.id(), Key::parse(text).unwrap().id(), "the id is the key's");
        let shown = format!("{key:?} {:?}", Cipher::new(&key));
        assert!(!shown.contains(text) && !shown.contains("AAEC"), "{shown}");
        for bad in ["", "short", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==", "not base64!"] {
            let error = Key::parse(bad).unwrap_err();
            assert_eq!(error, PiiError::Invalid);
            assert!(error.to_string().contains(PII_KEY_ENV));
        }
    }

    #[test]
    fn production_requires_the_variable_and_sandbox_keeps_its_own_key() {
        let key = Key::generate();
        assert!(matches!(key_source(Environment::Production, Some(key.clone())), Ok(KeySource::Given(_))));
        let missing = key_source(Environment::Production, None).unwrap_err();
        assert!(missing.to_string().contains(PII_KEY_ENV), "{missing}");
        assert!(matches!(key_source(Environment::Sandbox, Some(key)), Ok(KeySource::Given(_))));
        assert!(matches!(key_source(Environment::Sandbox, None), Ok(KeySource::Kept)));
    }

    #[test]
    fn masked_data_is_not_debugged_but_serialized() {
        let name = Masked::new("Lovelace".to_string());
        assert_eq!(format!("{name:?}"), "Masked(…)");
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"Lovelace\"");
        assert_eq!(name.len(), 8);
    }
}
