//! Webhook signatures in the Standard Webhooks scheme: `webhook-id`,
//! `webhook-timestamp` and `webhook-signature`, the latter a space-separated
//! list of `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one per valid key.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";

/// How far a signed timestamp may be from the receiver's clock.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

/// A signing secret, `whsec_<base64 of 32 random bytes>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    text: String,
    key: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(whsec_…)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    #[error("the signing secret is not a whsec_ secret")]
    BadSecret,
    #[error("the webhook-timestamp header is not a Unix time in seconds")]
    BadTimestamp,
    #[error("the webhook-timestamp is {0} s away from now (tolerance {TOLERANCE_SECONDS} s)")]
    Stale(i64),
    #[error("no signature matches")]
    NoMatch,
}

impl Secret {
    pub fn generate() -> Self {
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source is available");
        Self { text: format!("{PREFIX}{}", STANDARD.encode(&key)), key }
    }

    pub fn parse(text: &str) -> Result<Self, VerifyError> {
        let encoded = text.strip_prefix(PREFIX).ok_or(VerifyError::BadSecret)?;
        let key = STANDARD.decode(encoded).map_err(|_| VerifyError::BadSecret)?;
        if key.is_empty() {
            return Err(VerifyError::BadSecret);
        }
        Ok(Self { text: text.to_string(), key })
    }

    /// The secret as given to the receiver.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// `v1,<base64 signature>` of a message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!("v1,{}", STANDARD.encode(self.mac(id, timestamp, body).finalize().into_bytes()))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        mac
    }
}

/// The `webhook-signature` header value for the given keys, newest first.
pub fn signature_header(secrets: &[&Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets.iter().map(|s| s.sign(id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

/// What a receiver runs: accepts the message when its timestamp is within
/// the tolerance of `now` (Unix seconds) and one of the `v1` signatures of the
/// header matches `secret` (compared in constant time).
pub fn verify(
    secret: &Secret,
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    let timestamp: i64 = timestamp.trim().parse().map_err(|_| VerifyError::BadTimestamp)?;
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err(VerifyError::Stale(now - timestamp));
    }
    let matches = signatures
        .split_whitespace()
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|s| STANDARD.decode(s).ok())
        .any(|signature| secret.mac(id, timestamp, body).verify_slice(&signature).is_ok());
    if matches { Ok(()) } else { Err(VerifyError::NoMatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // From the Standard Webhooks specification's test suite.
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let ok = verify(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", &signature, body, 1614265400);
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn refuses_tampering_stale_timestamps_and_other_keys() {
        let (old, new) = (Secret::generate(), Secret::generate());
        let body = b"{\"id\":\"e1\"}";
        let header = signature_header(&[&new, &old], "e1", 1_000, body);
        assert_eq!(header.split(' ').count(), 2);
        assert_eq!(verify(&old, "e1", "1000", &header, body, 1_000), Ok(()));
        assert_eq!(verify(&new, "e1", "1000", &header, body, 1_100), Ok(()));
        assert_eq!(verify(&new, "e1", "1000", &header, b"{\"id\":\"e2\"}", 1_000), Err(VerifyError::NoMatch));
        assert_eq!(verify(&new, "e2", "1000", &header, body, 1_000), Err(VerifyError::NoMatch));
        assert_eq!(verify(&new, "e1", "1000", &header, body, 1_301), Err(VerifyError::Stale(301)));
        assert_eq!(
            verify(&Secret::generate(), "e1", "1000", &header, body, 1_000),
            Err(VerifyError::NoMatch)
        );
        assert_eq!(verify(&new, "e1", "x", &header, body, 1_000), Err(VerifyError::BadTimestamp));
        assert!(Secret::parse("sk_abc").is_err());
        assert!(format!("{new:?}").contains("…") && !format!("{new:?}").contains(new.expose()));
    }
}
