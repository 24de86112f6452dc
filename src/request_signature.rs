//! Signed requests. An API key paired with a public key must send, with every
//! request, `X-Request-Signature: <compact JWT>` whose claims bind the token
//! to that one request (method, path and query, body) and to a window of at
//! most two minutes; its `jti` is then recorded so that it is accepted once.
//! A stolen bearer secret alone is then worth nothing.
//!
//! The signature is checked by `jsonwebtoken`; this module decides what is
//! accepted and says which check a refused token failed, never echoing it.

use std::{fmt, str::FromStr};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{DecodingKey, Validation, errors::ErrorKind};
// The SubjectPublicKeyInfo traits both curves' key types implement.
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _, LineEnding};
use serde::Deserialize;

use crate::api_key::sha256_hex;

/// The request header that carries the token.
pub const HEADER: &str = "x-request-signature";

/// The longest a token may live: `exp - iat`, seconds.
pub const MAX_LIFETIME: i64 = 120;

/// Clock skew tolerated between client and server, seconds: `iat` may be
/// this far in the future, `exp` this far in the past.
pub const LEEWAY: i64 = 30;

/// The longest `jti` accepted.
const MAX_JTI_LEN: usize = 128;

/// The asymmetric algorithms a token may be signed with; nothing else (no
/// `none`, no HMAC, whose secret the server would have to hold) is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Algorithm {
    /// ECDSA on P-256 with SHA-256.
    #[serde(rename = "ES256")]
    Es256,
    /// Ed25519.
    #[serde(rename = "EdDSA")]
    EdDsa,
}

impl Algorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Es256 => "ES256",
            Self::EdDsa => "EdDSA",
        }
    }
}

impl FromStr for Algorithm {
    type Err = ();

    /// Exactly as JOSE spells them: `ES256`, `EdDSA`.
    fn from_str(alg: &str) -> Result<Self, ()> {
        match alg {
            "ES256" => Ok(Self::Es256),
            "EdDSA" => Ok(Self::EdDsa),
            _ => Err(()),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A public key paired with an API key: P-256 (for `ES256`) or Ed25519 (for
/// `EdDSA`), kept as the SubjectPublicKeyInfo PEM re-encoded from the parsed
/// key, so what is stored is always well-formed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    algorithm: Algorithm,
    pem: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("this is a private key: pair the public key only (`openssl pkey -in KEY.pem -pubout` prints it)")]
    Private,
    #[error("not a P-256 or Ed25519 public key in SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`)")]
    Unsupported,
    #[error("the Ed25519 key is of small order: signatures under it prove nothing")]
    Weak,
}

impl PublicKey {
    /// Parses a SubjectPublicKeyInfo PEM, checking the point is on its curve.
    pub fn from_pem(text: &str) -> Result<Self, KeyError> {
        if text.contains("PRIVATE KEY-----") {
            return Err(KeyError::Private);
        }
        let text = text.trim();
        if let Ok(key) = p256::PublicKey::from_public_key_pem(text) {
            let pem = key.to_public_key_pem(LineEnding::LF).map_err(|_| KeyError::Unsupported)?;
            return Ok(Self { algorithm: Algorithm::Es256, pem });
        }
        let key =
            ed25519_dalek::VerifyingKey::from_public_key_pem(text).map_err(|_| KeyError::Unsupported)?;
        if key.is_weak() {
            return Err(KeyError::Weak);
        }
        let pem = key.to_public_key_pem(LineEnding::LF).map_err(|_| KeyError::Unsupported)?;
        Ok(Self { algorithm: Algorithm::EdDsa, pem })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn pem(&self) -> &str {
        &self.pem
    }

    fn decoding_key(&self) -> Result<DecodingKey, SignatureError> {
        let key = match self.algorithm {
            Algorithm::Es256 => DecodingKey::from_ec_pem(self.pem.as_bytes()),
            Algorithm::EdDsa => DecodingKey::from_ed_pem(self.pem.as_bytes()),
        };
        // The PEM was re-encoded from a parsed key, so this cannot fail.
        key.map_err(|_| SignatureError::BadSignature)
    }
}

/// The request a token must describe.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The API key's id (the token's `sub`).
    pub key_id: &'a str,
    pub method: &'a str,
    /// The path and, when present, `?` and the query, exactly as sent.
    pub uri: &'a str,
    pub body: &'a [u8],
}

/// A token that passed every check but the replay check, which needs the
/// store: its `jti` must be recorded until `keep_until` (seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub jti: String,
    pub keep_until: i64,
}

/// Why a signature was refused: each message names the check that failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error(
        "missing X-Request-Signature header: this API key is paired with a public key, so every request must be signed"
    )]
    Missing,
    #[error("malformed X-Request-Signature: expected a compact JWT (header.claims.signature, base64url)")]
    Malformed,
    #[error("the token's alg is not accepted: only ES256 and EdDSA are")]
    AlgorithmRefused,
    #[error("the token's alg does not match the key paired with this API key, which takes {0}")]
    AlgorithmMismatch(Algorithm),
    #[error("the signature does not verify against the public key paired with this API key")]
    BadSignature,
    #[error(
        "malformed claims: sub, method, uri, body_hash and jti (strings), iat and exp (integer seconds) are required"
    )]
    Claims,
    #[error("exp must be after iat by at most {MAX_LIFETIME} s")]
    Lifetime,
    #[error("the token is not yet valid: iat is more than {LEEWAY} s in the future")]
    NotYetValid,
    #[error("the token has expired: exp is more than {LEEWAY} s in the past")]
    Expired,
    #[error("sub does not name this API key")]
    Subject,
    #[error("method does not match the request's method")]
    Method,
    #[error("uri does not match the request's path and query")]
    Uri,
    #[error("body_hash does not match the SHA-256 of the request body")]
    BodyHash,
    #[error("jti must be 1 to {MAX_JTI_LEN} characters")]
    Jti,
    #[error("jti was used before: each token is accepted once")]
    Replayed,
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
    method: String,
    uri: String,
    body_hash: String,
    iat: i64,
    exp: i64,
    jti: String,
}

/// Checks `token` against `key` and `request` at `now` (seconds): algorithm,
/// signature, time window, then that the claims describe this request.
pub fn verify(token: &str, key: &PublicKey, request: &Request, now: i64) -> Result<Accepted, SignatureError> {
    let algorithm = header_algorithm(token)?;
    if algorithm != key.algorithm {
        return Err(SignatureError::AlgorithmMismatch(key.algorithm));
    }
    let claims = verified_claims(token, key)?;
    claims.check(request, now)?;
    Ok(Accepted { keep_until: claims.exp.saturating_add(LEEWAY), jti: claims.jti })
}

/// The header's `alg`, read here rather than by `jsonwebtoken`, which cannot
/// parse `none` at all: its refusal must say so, not "malformed".
fn header_algorithm(token: &str) -> Result<Algorithm, SignatureError> {
    #[derive(Deserialize)]
    struct Header {
        alg: String,
    }
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SignatureError::Malformed);
    };
    let header = URL_SAFE_NO_PAD.decode(header).map_err(|_| SignatureError::Malformed)?;
    let header: Header = serde_json::from_slice(&header).map_err(|_| SignatureError::Malformed)?;
    header.alg.parse().map_err(|()| SignatureError::AlgorithmRefused)
}

fn verified_claims(token: &str, key: &PublicKey) -> Result<Claims, SignatureError> {
    jsonwebtoken::decode_header(token).map_err(|_| SignatureError::Malformed)?;
    let mut validation = Validation::new(match key.algorithm {
        Algorithm::Es256 => jsonwebtoken::Algorithm::ES256,
        Algorithm::EdDsa => jsonwebtoken::Algorithm::EdDSA,
    });
    // Time and audience are checked below, with this service's own rules.
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_aud = false;
    // Claims are parsed only once the signature verified.
    jsonwebtoken::decode::<Claims>(token, &key.decoding_key()?, &validation).map(|data| data.claims).map_err(
        |e| match e.kind() {
            ErrorKind::InvalidSignature | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidEddsaKey => {
                SignatureError::BadSignature
            }
            ErrorKind::Json(_) => SignatureError::Claims,
            _ => SignatureError::Malformed,
        },
    )
}

impl Claims {
    fn check(&self, request: &Request, now: i64) -> Result<(), SignatureError> {
        let lifetime = self.exp.saturating_sub(self.iat);
        if lifetime <= 0 || lifetime > MAX_LIFETIME {
            return Err(SignatureError::Lifetime);
        }
        if self.iat > now.saturating_add(LEEWAY) {
            return Err(SignatureError::NotYetValid);
        }
        if self.exp < now.saturating_sub(LEEWAY) {
            return Err(SignatureError::Expired);
        }
        if self.sub != request.key_id {
            return Err(SignatureError::Subject);
        }
        if self.method != request.method {
            return Err(SignatureError::Method);
        }
        if self.uri != request.uri {
            return Err(SignatureError::Uri);
        }
        if self.body_hash != sha256_hex(request.body) {
            return Err(SignatureError::BodyHash);
        }
        if self.jti.is_empty() || self.jti.len() > MAX_JTI_LEN {
            return Err(SignatureError::Jti);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn claims(iat: i64, exp: i64) -> Claims {
        Claims {
            sub: "k1".into(),
            method: "POST".into(),
            uri: "/v2/x?a=1".into(),
            body_hash: sha256_hex(b"{}"),
            iat,
            exp,
            jti: "j1".into(),
        }
    }

    const REQUEST: Request = Request { key_id: "k1", method: "POST", uri: "/v2/x?a=1", body: b"{}" };

    #[test]
    fn the_time_window_tolerates_thirty_seconds_of_skew_and_two_minutes_of_life() {
        use SignatureError::*;
        for (iat, exp, expected) in [
            (NOW, NOW + 60, Ok(())),
            (NOW, NOW + MAX_LIFETIME, Ok(())),
            (NOW, NOW + MAX_LIFETIME + 1, Err(Lifetime)),
            (NOW, NOW, Err(Lifetime)),
            (NOW + 10, NOW, Err(Lifetime)),
            (i64::MIN, i64::MAX, Err(Lifetime)),
            (NOW + LEEWAY, NOW + LEEWAY + 60, Ok(())),
            (NOW + LEEWAY + 1, NOW + LEEWAY + 60, Err(NotYetValid)),
            (NOW - 100, NOW - LEEWAY, Ok(())),
            (NOW - 100, NOW - LEEWAY - 1, Err(Expired)),
        ] {
            assert_eq!(claims(iat, exp).check(&REQUEST, NOW), expected, "iat {iat}, exp {exp}");
        }
    }

    #[test]
    fn each_claim_must_describe_the_request() {
        let request = |key_id, method, uri, body| Request { key_id, method, uri, body };
        for (request, expected) in [
            (request("k2", "POST", "/v2/x?a=1", b"{}" as &[u8]), SignatureError::Subject),
            (request("k1", "GET", "/v2/x?a=1", b"{}"), SignatureError::Method),
            (request("k1", "POST", "/v2/x?a=2", b"{}"), SignatureError::Uri),
            (request("k1", "POST", "/v2/x", b"{}"), SignatureError::Uri),
            (request("k1", "POST", "/v2/x?a=1", b"{} "), SignatureError::BodyHash),
        ] {
            assert_eq!(claims(NOW, NOW + 60).check(&request, NOW), Err(expected));
        }
        let mut long = claims(NOW, NOW + 60);
        long.jti = "j".repeat(MAX_JTI_LEN + 1);
        assert_eq!(long.check(&REQUEST, NOW), Err(SignatureError::Jti));
    }

    #[test]
    fn only_asymmetric_algorithms_are_read_from_the_header() {
        let token = |header: &str| format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode(header));
        assert_eq!(header_algorithm(&token(r#"{"alg":"ES256"}"#)), Ok(Algorithm::Es256));
        assert_eq!(header_algorithm(&token(r#"{"alg":"EdDSA","typ":"JWT"}"#)), Ok(Algorithm::EdDsa));
        for alg in ["none", "HS256", "HS512", "RS256", "ES384", "es256", "PS256"] {
            let header = format!(r#"{{"alg":"{alg}"}}"#);
            assert_eq!(header_algorithm(&token(&header)), Err(SignatureError::AlgorithmRefused), "{alg}");
        }
        for malformed in ["", "a.b", "a.b.c.d", "!!.e30.c2ln", &token("{}"), &token("[1]")] {
            assert_eq!(header_algorithm(malformed), Err(SignatureError::Malformed), "{malformed}");
        }
    }

    #[test]
    fn private_keys_and_other_curves_are_not_paired() {
        let private = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
        assert_eq!(PublicKey::from_pem(private), Err(KeyError::Private));
        // EC keys on other curves: secp256k1 and P-384.
        let k256 = "-----BEGIN PUBLIC KEY-----
MFYwEAYHKoZIzj0CAQYFK4EEAAoDQgAE2MiyOCDE0Y4jV+5AQc9xXkOnogsa7D5Z
uWBqUEIy//U8CQv4rTrWoPfVYg/qCwbDV983ePJsGHoRIYBvhW2EBQ==
-----END PUBLIC KEY-----";
        let p384 = "-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEgQuCeUrS0IapI3rj5aaImMdB/GSFAEsE
reksc0QVP6vlPMrxG1eSeL5capd89CBy0kS007CgRtAlaRmof5Hco68WAxA6GsVU
JEaQI/+hUG4p9NGVfELg9kKtWDqWLyrY
-----END PUBLIC KEY-----";
        for other in [k256, p384] {
            assert_eq!(PublicKey::from_pem(other), Err(KeyError::Unsupported));
        }
        assert_eq!(PublicKey::from_pem("hello"), Err(KeyError::Unsupported));
    }
}
