//! Request signing as a client does it: a P-256 or Ed25519 key generated
//! for the test, and `X-Request-Signature` tokens made with `jsonwebtoken`.

use ed25519_dalek::pkcs8::EncodePrivateKey as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use p256::pkcs8::{EncodePublicKey as _, LineEnding};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub struct ClientKey {
    pub algorithm: Algorithm,
    encoding: EncodingKey,
    /// SubjectPublicKeyInfo PEM, as an operator pairs it.
    pub public_pem: String,
}

fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).unwrap();
    bytes
}

impl ClientKey {
    /// A fresh P-256 key, for `ES256`.
    pub fn p256() -> Self {
        let secret = p256::SecretKey::from_slice(&random_bytes()).unwrap();
        let private = secret.to_pkcs8_pem(LineEnding::LF).unwrap();
        Self {
            algorithm: Algorithm::ES256,
            encoding: EncodingKey::from_ec_pem(private.as_bytes()).unwrap(),
            public_pem: secret.public_key().to_public_key_pem(LineEnding::LF).unwrap(),
        }
    }

    /// A fresh Ed25519 key, for `EdDSA`.
    pub fn ed25519() -> Self {
        let secret = ed25519_dalek::SigningKey::from_bytes(&random_bytes());
        let private = secret.to_pkcs8_pem(LineEnding::LF).unwrap();
        Self {
            algorithm: Algorithm::EdDSA,
            encoding: EncodingKey::from_ed_pem(private.as_bytes()).unwrap(),
            public_pem: secret.verifying_key().to_public_key_pem(LineEnding::LF).unwrap(),
        }
    }

    /// A compact JWT of `claims` signed with this key's algorithm.
    pub fn sign(&self, claims: &Value) -> String {
        jsonwebtoken::encode(&Header::new(self.algorithm), claims, &self.encoding).unwrap()
    }
}

/// The claims a client signs for a request made now: valid for a minute,
/// with a fresh `jti`.
pub fn claims(key_id: &str, method: &str, uri: &str, body: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "sub": key_id,
        "method": method,
        "uri": uri,
        "body_hash": format!("{:x}", Sha256::digest(body.as_bytes())),
        "iat": now,
        "exp": now + 60,
        "jti": uuid::Uuid::new_v4().to_string(),
    })
}
