//! NATS subjects of the outbox's events: `custody.events.<organization>.<event
//! type>`. A subject token is any text but `.` (the separator), `*` and `>`
//! (wildcards) and whitespace, and not empty. An organization id that is not
//! such a token, or that holds `%`, is percent-encoded: each byte outside
//! `A–Z a–z 0–9 - _` becomes `%XX` (upper-case hex), so every id has exactly
//! one token and two ids never share one. Ids of letters, digits, `-` and
//! `_` (every id the platform makes) are their own token.

/// The stream every event is published to.
pub const STREAM: &str = "CUSTODY_EVENTS";

/// The subjects of [`STREAM`].
pub const SUBJECTS: &str = "custody.events.>";

/// The shape of every subject [`subject`] makes: exactly two tokens after
/// `custody.events`. A stream takes every event when one of its subjects
/// covers this shape: [`SUBJECTS`], `custody.events.*.*`, `custody.>`, `>`.
pub const PUBLISHED: &str = "custody.events.*.*";

/// The subject of an organization's event of type `kind`.
pub fn subject(organization: &str, kind: &str) -> String {
    format!("custody.events.{}.{}", token(organization), token(kind))
}

/// `text` as one subject token: itself when only letters, digits, `-` and
/// `_`; percent-encoded otherwise.
pub fn token(text: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if !text.is_empty() && text.bytes().all(plain) {
        return text.to_string();
    }
    if text.is_empty() {
        // No byte to encode: `%` alone, which no encoded id can be.
        return "%".to_string();
    }
    text.bytes().map(|b| if plain(b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_name_the_organization_and_the_event_type() {
        let cases = [
            ("org_7f3a", "deposit_v2", "custody.events.org_7f3a.deposit_v2"),
            ("0b5e-41aa", "crypto_transfer_failed", "custody.events.0b5e-41aa.crypto_transfer_failed"),
            ("acme.eu", "deposit_v2", "custody.events.acme%2Eeu.deposit_v2"),
            ("a b", "deposit_v2", "custody.events.a%20b.deposit_v2"),
            ("wild*", "deposit_v2", "custody.events.wild%2A.deposit_v2"),
            ("tail>", "deposit_v2", "custody.events.tail%3E.deposit_v2"),
            ("50%", "deposit_v2", "custody.events.50%25.deposit_v2"),
            ("Zürich", "deposit_v2", "custody.events.Z%C3%BCrich.deposit_v2"),
            ("", "deposit_v2", "custody.events.%.deposit_v2"),
        ];
        for (organization, kind, want) in cases {
            assert_eq!(subject(organization, kind), want, "{organization:?}");
            assert!(crate::events::nats::stream::covers(PUBLISHED, want), "{want} has the published shape");
        }
    }

    #[test]
    fn every_token_is_valid_and_distinct_ids_never_share_one() {
        let ids = ["a.b", "a%2Eb", "a_b", "a-b", "a b", "a\tb", "a*", "a>", "%", "", "ab", "AB"];
        let tokens: Vec<String> = ids.iter().map(|id| token(id)).collect();
        for t in &tokens {
            assert!(!t.is_empty());
            assert!(!t.contains(['.', '*', '>', ' ', '\t', '\n', '\r']), "{t}");
        }
        let unique: std::collections::HashSet<_> = tokens.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{tokens:?}");
    }
}
