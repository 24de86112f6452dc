//! Signed checkpoints of the audit log, kept outside the database: a
//! checkpoint names the log's head (`seq` and its `hash`) at a time `at`
//! (microseconds since the epoch), signed with an Ed25519 key the database
//! never holds. The signature is over the JSON array `[1, seq, hash, at]`
//! as `serde_json` writes it (`1` the encoding's version). Whoever can
//! write the database can rewrite the log and its head consistently; it
//! cannot make the log hold a checkpoint's entry again once that entry is
//! rewritten or truncated away, nor sign a new checkpoint.
//!
//! The key file is the private key as PKCS#8 PEM (`audit keygen` writes it,
//! readable by its owner only); the public key is written as the base64 of
//! its 32 bytes.

use std::{io::Write, path::Path};

use base64::{Engine, engine::general_purpose::STANDARD};
use ed25519_dalek::{
    Signature, Signer, SigningKey, Verifier, VerifyingKey,
    pkcs8::{DecodePrivateKey, EncodePrivateKey, spki::der::pem::LineEnding},
};
use serde::{Deserialize, Serialize};

use super::chain::{Broken, Entry, GENESIS};

/// The variable naming the checkpoint key's file.
pub const KEY_FILE_ENV: &str = "CUSTODY_INDEXER_AUDIT_KEY_FILE";
/// The variable holding the public key checkpoints are verified with.
pub const PUBLIC_KEY_ENV: &str = "CUSTODY_INDEXER_AUDIT_PUBLIC_KEY";

/// One signed checkpoint, as printed and stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub seq: i64,
    pub hash: String,
    pub at: i64,
    /// Base64 of the 64-byte Ed25519 signature.
    pub signature: String,
}

/// Why a key or a checkpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: not an Ed25519 private key in PKCS#8 PEM (made by `audit keygen`)")]
    NotAKey(String),
    #[error("the public key is not the base64 of an Ed25519 public key's 32 bytes")]
    NotAPublicKey,
    #[error("{0}: not a checkpoint (a JSON object with seq, hash, at and signature)")]
    NotACheckpoint(String),
}

/// The bytes a checkpoint's signature covers.
pub fn message(seq: i64, hash: &str, at: i64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!([1, seq, hash, at])).expect("a JSON value serializes")
}

impl Checkpoint {
    /// The head `seq` and `hash` at `at`, signed with `key`.
    pub fn sign(key: &SigningKey, seq: i64, hash: &str, at: i64) -> Self {
        let signature = key.sign(&message(seq, hash, at));
        Checkpoint { seq, hash: hash.to_string(), at, signature: STANDARD.encode(signature.to_bytes()) }
    }

    /// Whether `public` signed this checkpoint as it reads.
    pub fn signed_by(&self, public: &VerifyingKey) -> bool {
        let Ok(bytes) = STANDARD.decode(&self.signature) else { return false };
        let Ok(signature) = Signature::from_slice(&bytes) else { return false };
        public.verify(&message(self.seq, &self.hash, self.at), &signature).is_ok()
    }

    /// Checks this checkpoint against a log: signed by `public`, its entry
    /// still there with its hash, the head at or after it. `entries`: the
    /// log in `seq` order (its chain checked apart); `head`: the head's seq.
    pub fn check(&self, public: &VerifyingKey, entries: &[Entry], head: i64) -> Result<(), Broken> {
        let broken = |why| Err(Broken { seq: self.seq, why });
        if !self.signed_by(public) {
            return broken("the checkpoint's signature does not verify with the public key given");
        }
        if head < self.seq {
            return broken("the log's head lies before this checkpoint: its tail was truncated");
        }
        if self.seq == 0 {
            return if self.hash == GENESIS {
                Ok(())
            } else {
                broken("a checkpoint of the empty log names a hash")
            };
        }
        match entries.binary_search_by_key(&self.seq, |e| e.seq) {
            Err(_) => broken("the log no longer holds the checkpoint's entry"),
            Ok(at) if entries[at].hash != self.hash => {
                broken("the log's entry is not the one checkpointed: the log was rewritten")
            }
            Ok(_) => Ok(()),
        }
    }

    /// A checkpoint read from its JSON text (`source` names it in errors).
    pub fn parse(text: &str, source: &str) -> Result<Self, KeyError> {
        serde_json::from_str(text.trim()).map_err(|_| KeyError::NotACheckpoint(source.to_string()))
    }

    /// The JSON line printed and stored.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a checkpoint serializes")
    }
}

/// A new signing key from the system's random source.
pub fn generate() -> SigningKey {
    let mut seed = zeroize::Zeroizing::new([0u8; 32]);
    getrandom::fill(seed.as_mut()).expect("the system's random source answers");
    SigningKey::from_bytes(&seed)
}

/// Writes `key` to a new file at `path`, readable by its owner only; an
/// existing file is never replaced.
pub fn write_key(path: &Path, key: &SigningKey) -> Result<(), KeyError> {
    let io = |source| KeyError::Io { path: path.display().to_string(), source };
    let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|_| KeyError::NotAKey(path.display().to_string()))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io)?;
    file.write_all(pem.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

/// The signing key in the file at `path`.
pub fn read_key(path: &Path) -> Result<SigningKey, KeyError> {
    let io = |source| KeyError::Io { path: path.display().to_string(), source };
    let text = zeroize::Zeroizing::new(std::fs::read_to_string(path).map_err(io)?);
    SigningKey::from_pkcs8_pem(text.trim()).map_err(|_| KeyError::NotAKey(path.display().to_string()))
}

/// A public key as written: base64 of its 32 bytes.
pub fn public_key_text(key: &VerifyingKey) -> String {
    STANDARD.encode(key.as_bytes())
}

/// A public key read from its text.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    let bytes = STANDARD.decode(text.trim()).map_err(|_| KeyError::NotAPublicKey)?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| KeyError::NotAPublicKey)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::NotAPublicKey)
}

/// The public key checkpoints are verified with in this process:
/// `CUSTODY_INDEXER_AUDIT_PUBLIC_KEY`, else the public half of the key in
/// `CUSTODY_INDEXER_AUDIT_KEY_FILE`; none without either.
pub fn public_key_from_env() -> Result<Option<VerifyingKey>, String> {
    if let Ok(text) = std::env::var(PUBLIC_KEY_ENV) {
        return parse_public_key(&text).map(Some).map_err(|e| format!("{PUBLIC_KEY_ENV}: {e}"));
    }
    match std::env::var_os(KEY_FILE_ENV) {
        Some(path) => {
            read_key(Path::new(&path)).map(|key| Some(key.verifying_key())).map_err(|e| e.to_string())
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: i64) -> Vec<Entry> {
        (1..=n)
            .map(|seq| Entry {
                seq,
                at: seq,
                actor: "system".into(),
                actor_name: None,
                action: "wire.approved".into(),
                target_kind: "mint".into(),
                target_id: format!("mint-{seq}"),
                organization_id: None,
                reason: None,
                request_id: None,
                detail: None,
                prev_hash: String::new(),
                hash: format!("{seq:064x}"),
                mac: None,
            })
            .collect()
    }

    #[test]
    fn the_signed_message_is_fixed() {
        assert_eq!(message(7, "ab", 1_790_000_000_000_000), br#"[1,7,"ab",1790000000000000]"#.to_vec());
    }

    #[test]
    fn a_checkpoint_is_held_until_the_log_loses_it() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let public = key.verifying_key();
        let log = entries(5);
        let checkpoint = Checkpoint::sign(&key, 3, &log[2].hash, 1_790_000_000_000_000);
        assert_eq!(checkpoint.check(&public, &log, 5), Ok(()));
        assert_eq!(Checkpoint::sign(&key, 0, GENESIS, 1).check(&public, &[], 0), Ok(()));

        let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
        let forged = Checkpoint { at: checkpoint.at + 1, ..checkpoint.clone() };
        let mut rewritten = log.clone();
        rewritten[2].hash = "f".repeat(64);
        type Case<'a> = (&'a str, Checkpoint, &'a VerifyingKey, &'a [Entry], i64, &'a str);
        let cases: [Case; 5] = [
            ("another key", checkpoint.clone(), &other, &log, 5, "does not verify"),
            ("a changed field", forged, &public, &log, 5, "does not verify"),
            ("a truncated tail", checkpoint.clone(), &public, &log[..2], 2, "its tail was truncated"),
            ("a rewritten entry", checkpoint.clone(), &public, &rewritten, 5, "the log was rewritten"),
            (
                "a deleted entry",
                checkpoint.clone(),
                &public,
                &[&log[..2], &log[3..]].concat(),
                5,
                "no longer holds",
            ),
        ];
        for (name, checkpoint, public, log, head, why) in cases {
            let broken = checkpoint.check(public, log, head).unwrap_err();
            assert_eq!(broken.seq, 3, "{name}");
            assert!(broken.why.contains(why), "{name}: {}", broken.why);
        }
    }

    #[test]
    fn keys_round_trip_through_their_files_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.key");
        let key = generate();
        write_key(&path, &key).unwrap();
        assert!(write_key(&path, &generate()).is_err(), "an existing key file is never replaced");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert_eq!(read_key(&path).unwrap().to_bytes(), key.to_bytes());
        let text = public_key_text(&key.verifying_key());
        assert_eq!(parse_public_key(&text).unwrap(), key.verifying_key());
        assert!(parse_public_key("bm90IGEga2V5").is_err());
        let checkpoint = Checkpoint::sign(&key, 1, "ab", 2);
        assert_eq!(Checkpoint::parse(&checkpoint.json(), "x").unwrap(), checkpoint);
    }
}
