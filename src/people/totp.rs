//! The optional second factor: a TOTP secret (RFC 6238: SHA-1, 6 digits,
//! 30-second steps, one step of clock skew either way), shown once at
//! enrolment for the person's authenticator app.

use totp_rs::{Builder, Secret, Totp};

/// A new secret, base32.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    Secret::from(bytes).to_base32()
}

fn totp(secret: &str) -> Option<Totp> {
    let secret = Secret::try_from_base32(secret.trim()).ok()?;
    Builder::new().with_secret(secret).build().ok()
}

/// The time step `code` is valid for at `now` (micros), if it is.
pub fn step(secret: &str, code: &str, now: i64) -> Option<u64> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    totp(secret)?.check(&code, u64::try_from(now / 1_000_000).ok()?)
}

/// The code of `secret` at `now` (micros): what an authenticator shows.
pub fn code(secret: &str, now: i64) -> Option<String> {
    Some(totp(secret)?.generate(u64::try_from(now / 1_000_000).ok()?).to_string())
}

/// The `otpauth://` link an authenticator app reads.
pub fn uri(secret: &str, email: &str) -> String {
    let mut url = url::Url::parse("otpauth://totp/").expect("a valid base");
    url.set_path(&format!("custody-indexer:{email}"));
    url.query_pairs_mut().append_pair("secret", secret).append_pair("issuer", "custody-indexer");
    url.to_string()
}

/// `uri` as a QR code an authenticator app scans: an SVG `data:` address
/// (the pages' `img-src` allows `data:`).
pub fn qr(uri: &str) -> String {
    use base64::Engine;
    let Ok(code) = qrcode::QrCode::new(uri.as_bytes()) else { return String::new() };
    let svg = code.render::<qrcode::render::svg::Color>().min_dimensions(200, 200).build();
    format!("data:image/svg+xml;base64,{}", base64::engine::general_purpose::STANDARD.encode(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_valid_for_its_step_and_the_next_and_previous_only() {
        // RFC 6238's SHA-1 test secret ("12345678901234567890").
        let secret = Secret::from(b"12345678901234567890".to_vec()).to_base32();
        let at = |seconds: i64| seconds * 1_000_000;
        // The RFC's vector at 59 s is 94287082 (8 digits): 6 digits keep 287082.
        assert_eq!(code(&secret, at(59)).as_deref(), Some("287082"));
        assert_eq!(step(&secret, "287082", at(59)), Some(1));
        assert_eq!(step(&secret, " 287 082 ", at(59)), Some(1));
        assert_eq!(step(&secret, "287082", at(89)), Some(1), "one step of skew");
        assert_eq!(step(&secret, "287082", at(120)), None, "two steps later");
        for wrong in ["287083", "28708", "2870822", "abcdef", ""] {
            assert_eq!(step(&secret, wrong, at(59)), None, "{wrong:?}");
        }
        assert_eq!(step("not base32!", "287082", at(59)), None);
        assert_eq!(new_secret().len(), 32);
        assert_ne!(new_secret(), new_secret());
        assert!(
            uri(&secret, "ann@example.com")
                .starts_with("otpauth://totp/custody-indexer:ann@example.com?secret=")
        );
    }
}
