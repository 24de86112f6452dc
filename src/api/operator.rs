//! The operator token: what `/metrics` and the detail of `/readyz` require,
//! sent as `Authorization: Bearer <OPERATOR_TOKEN>`. Lease owners, chain
//! heads, RPC errors and deposit counts tell an outsider which instances run
//! and how the platform's nodes fail, so they are for operators only; the
//! bare readiness answer stays open for load balancers and probes.

use std::fmt;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The fewest characters an operator token may have: `openssl rand -hex 32`
/// gives 64.
pub const MIN_LEN: usize = 32;

/// The operator token. Only its SHA-256 is kept: `Debug` shows nothing of
/// it, and a presented token is compared digest to digest in constant time,
/// so neither its content nor its length leaks through timing.
#[derive(Clone, PartialEq, Eq)]
pub struct OperatorToken([u8; 32]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "the operator token must be at least {MIN_LEN} visible ASCII characters without spaces \
     (e.g. `openssl rand -hex 32`); the value is not shown"
)]
pub struct WeakToken;

impl OperatorToken {
    /// Accepts a token of at least [`MIN_LEN`] visible ASCII characters
    /// (what an HTTP header carries unchanged); surrounding white space, as
    /// a file read into a variable leaves, is dropped.
    pub fn parse(text: &str) -> Result<Self, WeakToken> {
        let text = text.trim();
        if text.len() < MIN_LEN || !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(WeakToken);
        }
        Ok(Self(Sha256::digest(text.as_bytes()).into()))
    }

    /// Whether `presented` is the token, compared in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.0).into()
    }

    /// Whether the request's `Authorization: Bearer …` carries the token.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        super::auth::bearer(headers).is_some_and(|token| self.matches(token))
    }
}

impl fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OperatorToken(…)")
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderValue, header::AUTHORIZATION};

    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef-operator";

    #[test]
    fn matches_only_itself_and_never_shows_itself() {
        let token = OperatorToken::parse(&format!(" {TOKEN}\n")).unwrap();
        assert!(token.matches(TOKEN));
        assert!(!token.matches(&TOKEN[1..]) && !token.matches(&format!("{TOKEN}x")) && !token.matches(""));
        assert_eq!(format!("{token:?}"), "OperatorToken(…)");
        let mut headers = HeaderMap::new();
        assert!(!token.admits(&headers));
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&format!("bearer {TOKEN}")).unwrap());
        assert!(token.admits(&headers));
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Basic {TOKEN}")).unwrap());
        assert!(!token.admits(&headers));
    }

    #[test]
    fn refuses_short_or_spaced_tokens_without_naming_them() {
        for weak in [
            "",
            "short",
            &TOKEN[..MIN_LEN - 1],
            "0123456789abcdef 0123456789abcdef",
            "é0123456789abcdef0123456789abcdef",
        ] {
            let error = OperatorToken::parse(weak).unwrap_err().to_string();
            assert!(weak.is_empty() || !error.contains(weak), "{error}");
        }
        assert!(OperatorToken::parse(&TOKEN[..MIN_LEN]).is_ok());
    }
}
