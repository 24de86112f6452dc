//! API key secrets. A key is `cik_<id>_<secret>`: the id finds the stored
//! row, the whole token is checked against its stored hash in constant
//! time: its SHA-256, keyed under the process's pepper when it has one
//! ([`pepper`]). The secret has 256 random bits, so a fast hash is enough:
//! there is nothing to brute-force, unlike a password. Verifying a request's key is
//! one SHA-256 of about 80 bytes (measured: 11 µs in an unoptimised build),
//! so it runs inline on the async runtime; a slow password hash would have
//! to move to `spawn_blocking`.

pub mod manage;
pub mod pepper;
pub mod requests;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use subtle::ConstantTimeEq;

const PREFIX: &str = "cik_";
/// An operator key's prefix: a tenant's key never passes for an operator's,
/// nor the other way round.
pub const OPERATOR_PREFIX: &str = "cio_";

/// A freshly generated key: the token is shown once, only the hash is kept.
/// `Debug` shows the id only.
pub struct NewSecret {
    pub id: String,
    pub token: String,
    pub hash: String,
}

impl std::fmt::Debug for NewSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSecret").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Generates a key id and its secret token from the operating system's CSPRNG.
pub fn generate() -> NewSecret {
    generate_with(PREFIX)
}

/// Generates a key shaped as [`generate`]'s under another `prefix`.
pub fn generate_with(prefix: &str) -> NewSecret {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the operating system's random source is available");
    let token = format!("{prefix}{id}_{}", URL_SAFE_NO_PAD.encode(secret));
    let hash = hash(&token);
    NewSecret { id, token, hash }
}

/// The key id a token names, or `None` when it is not shaped like a key.
pub fn key_id(token: &str) -> Option<&str> {
    key_id_with(PREFIX, token)
}

/// The key id a token of `prefix` names (see [`key_id`]).
pub fn key_id_with<'a>(prefix: &str, token: &'a str) -> Option<&'a str> {
    let rest = token.strip_prefix(prefix)?;
    let (id, secret) = rest.split_once('_')?;
    let well_formed = id.len() == 32
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && secret.len() == 43
        && URL_SAFE_NO_PAD.decode(secret).is_ok_and(|bytes| bytes.len() == 32);
    well_formed.then_some(id)
}

/// The stored form of a token: lowercase hex SHA-256.
pub fn hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::audit::chain::sha256_hex(bytes)
}

/// What a store keeps of a key whose SHA-256 is `sha256_hex`: keyed under
/// the process's pepper when it has one (see [`pepper`]).
pub fn stored(sha256_hex: &str) -> String {
    stored_under(sha256_hex, pepper::process().ok().flatten())
}

fn stored_under(sha256_hex: &str, pepper: Option<&pepper::Pepper>) -> String {
    match pepper {
        // A token's SHA-256 is always 64 hex digits.
        Some(pepper) => pepper.keyed(sha256_hex).unwrap_or_default(),
        None => sha256_hex.to_string(),
    }
}

/// Whether `token` is the key `stored` keeps, compared in constant time:
/// under the process's pepper when it has one, so that a plain SHA-256
/// written into the store authenticates nothing then.
pub fn matches(token: &str, stored: &str) -> bool {
    matches_under(token, stored, pepper::process().ok().flatten())
}

fn matches_under(token: &str, stored: &str, pepper: Option<&pepper::Pepper>) -> bool {
    stored_under(&hash(token), pepper).as_bytes().ct_eq(stored.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_names_its_id_and_matches_its_hash() {
        let key = generate();
        assert_eq!(key_id(&key.token), Some(key.id.as_str()));
        assert!(matches(&key.token, &key.hash));
        assert!(!key.token.contains(&key.hash));
        let debug = format!("{key:?}");
        assert!(
            debug.contains(&key.id) && !debug.contains(&key.token) && !debug.contains(&key.hash),
            "{debug}"
        );

        let other = generate();
        assert_ne!(key.token, other.token);
        assert!(!matches(&other.token, &key.hash));
    }

    #[test]
    fn under_a_pepper_only_the_keyed_hash_matches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pepper");
        std::fs::write(&path, "p".repeat(32)).unwrap();
        let pepper = pepper::Pepper::from_file(&path).unwrap();
        let key = generate();
        let keyed = stored_under(&key.hash, Some(&pepper));
        assert!(matches_under(&key.token, &keyed, Some(&pepper)));
        assert!(
            !matches_under(&key.token, &key.hash, Some(&pepper)),
            "a plain hash is no key under a pepper"
        );
        assert!(!matches_under(&key.token, &keyed, None), "nor a keyed one without it");
        assert!(matches_under(&key.token, &key.hash, None));
    }

    #[test]
    fn malformed_tokens_name_no_key() {
        let key = generate();
        let mut tampered = key.token.clone();
        tampered.pop();
        for token in ["", "cik_", "cik_abc_def", &tampered, &key.token.replacen("cik_", "sk_", 1), "Bearer x"]
        {
            assert_eq!(key_id(token), None, "{token:?}");
        }
        let operator = generate_with(OPERATOR_PREFIX);
        assert_eq!(key_id(&operator.token), None);
        assert_eq!(key_id_with(OPERATOR_PREFIX, &operator.token), Some(operator.id.as_str()));
        assert_eq!(key_id_with(OPERATOR_PREFIX, &key.token), None);
    }
}
