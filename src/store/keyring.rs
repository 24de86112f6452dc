//! The pepper and the keys it derives: the secret (the file
//! `CUSTODY_INDEXER_KEY_PEPPER_FILE` names) that the store never holds,
//! under which every row and token that authenticates is keyed, so that
//! whoever can write the database but not read that file cannot make one.
//! Each use has a key of its own, HMAC-SHA-256(pepper, label), with the
//! labels below; [`crate::api_key::pepper`] says how a store adopts it.
//! Without a pepper (a sandbox) tokens are kept as plain SHA-256 and rows
//! carry no MAC.

use std::{
    path::Path,
    sync::{Arc, OnceLock},
};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

/// The label of the key console session tokens are kept under.
pub const SESSION: &str = "custody-indexer session v1";
/// The label of the key one-time enrol links (enrolment and invitation)
/// are kept under.
pub const LINK: &str = "custody-indexer enrol link v1";
/// The label of the key console passwords are hashed under (argon2's
/// secret).
pub const PASSWORD: &str = "custody-indexer password v1";
/// The label of the key audit entries are authenticated under.
pub const AUDIT: &str = "custody-indexer audit mac v1";
/// The label of the key rows that authenticate or authorize carry their
/// `row_mac` under.
pub const ROW: &str = "custody-indexer row mac v1";

/// The variable naming the pepper's file.
pub const PEPPER_FILE_ENV: &str = "CUSTODY_INDEXER_KEY_PEPPER_FILE";
/// The prefix of a keyed hash.
pub const KEYED: &str = "hmac1:";
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

    /// The key the pepper derives for one use named by `label`
    /// (`custody-indexer session v1`, …): HMAC-SHA-256(pepper, label), so
    /// that a MAC made for one use never passes for another.
    pub fn derive(&self, label: &str) -> Derived {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(label.as_bytes());
        Derived(Zeroizing::new(mac.finalize().into_bytes().to_vec()))
    }

    /// Names the pepper without telling it: `pep_` and 16 hex digits.
    pub fn id(&self) -> String {
        format!("pep_{}", &self.mac(b"custody-indexer key pepper id")[..16])
    }

    /// The keyed form of a key's SHA-256 (64 hex digits): HMAC-SHA-256
    /// under the pepper of its 32 bytes. Anything else is no key's hash and
    /// has no keyed form: a row holding text of the writer's choice (a
    /// derived key's label) is never keyed, so the keyed form never tells
    /// a derived key (whose labels are never 32 bytes long).
    pub fn keyed(&self, sha256_hex: &str) -> Option<String> {
        let bytes: Vec<u8> = (sha256_hex.len() == 64)
            .then(|| (0..32).map(|i| u8::from_str_radix(&sha256_hex[2 * i..2 * i + 2], 16).ok()).collect())
            .flatten()?;
        Some(format!("{KEYED}{}", self.mac(&bytes)))
    }
}

/// A key derived from the pepper for one use (see [`Pepper::derive`]).
/// `Debug` shows nothing of it.
pub struct Derived(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derived(..)")
    }
}

impl Derived {
    /// HMAC-SHA-256 of `bytes` under this key, `hmac1:` and 64 hex digits.
    pub fn keyed(&self, bytes: &[u8]) -> String {
        format!("{KEYED}{}", self.hex(bytes))
    }

    /// The key's bytes, for a primitive that takes a secret (argon2).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// HMAC-SHA-256 of `bytes` under this key, 64 lowercase hex digits.
    pub fn hex(&self, bytes: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(bytes);
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `stored` is [`Derived::keyed`] of `bytes`, compared in
    /// constant time.
    pub fn verifies(&self, bytes: &[u8], stored: &str) -> bool {
        use subtle::ConstantTimeEq;
        self.keyed(bytes).as_bytes().ct_eq(stored.as_bytes()).into()
    }
}

static PEPPER: OnceLock<Result<Option<Pepper>, PepperError>> = OnceLock::new();

tokio::task_local! {
    static WITHIN: &'static Pepper;
}

/// Runs `future` with `pepper` as its pepper, whatever the process's: for
/// a process that acts on a store whose service holds another (the tests'
/// harness making enrol links for a `run` of its own).
pub async fn within<F: std::future::Future>(pepper: &'static Pepper, future: F) -> F::Output {
    WITHIN.scope(pepper, future).await
}

/// The process's pepper, read once from `CUSTODY_INDEXER_KEY_PEPPER_FILE`:
/// `None` when unset (or the one [`within`] gives).
pub fn process() -> Result<Option<&'static Pepper>, PepperError> {
    if let Ok(pepper) = WITHIN.try_with(|pepper| *pepper) {
        return Ok(Some(pepper));
    }
    let read =
        || std::env::var_os(PEPPER_FILE_ENV).map(|path| Pepper::from_file(Path::new(&path))).transpose();
    PEPPER.get_or_init(read).as_ref().map(Option::as_ref).map_err(Clone::clone)
}

/// Makes `pepper` the process's before anything reads it (a process that
/// holds its pepper otherwise than in a file: the tests that play a
/// database writer against a service with one). `false` when the process
/// has another pepper, or none, already.
pub fn install(pepper: Pepper) -> bool {
    let id = pepper.id();
    let _ = PEPPER.set(Ok(Some(pepper)));
    matches!(PEPPER.get(), Some(Ok(Some(installed))) if installed.id() == id)
}

/// The stored form of a bearer token of the use `label` ([`SESSION`],
/// [`LINK`]): keyed under the process's pepper (`hmac1:` and 64 hex
/// digits), the plain SHA-256 without one (a sandbox).
pub fn token_hash(label: &str, token: &str) -> String {
    match process().ok().flatten() {
        Some(pepper) => pepper.derive(label).keyed(token.as_bytes()),
        None => crate::audit::chain::sha256_hex(token.as_bytes()),
    }
}

/// The `row_mac` of row `id` of `table` whose granting columns hold
/// `grants`: HMAC-SHA-256 under the [`ROW`] key of the JSON array
/// `[table, id, grants…]` as `serde_json` writes it; `None` without a
/// pepper (a sandbox writes none).
pub fn row_mac(table: &str, id: &str, grants: &[serde_json::Value]) -> Option<String> {
    let pepper = process().ok().flatten()?;
    Some(pepper.derive(ROW).keyed(&row_bytes(table, id, grants)))
}

/// Whether `stored` is the `row_mac` the row's columns give: always true
/// without a pepper (a sandbox checks none), and never for a row without
/// one under a pepper (a row inserted with SQL).
pub fn row_authentic(table: &str, id: &str, grants: &[serde_json::Value], stored: Option<&str>) -> bool {
    match process().ok().flatten() {
        None => true,
        Some(pepper) => {
            stored.is_some_and(|stored| pepper.derive(ROW).verifies(&row_bytes(table, id, grants), stored))
        }
    }
}

fn row_bytes(table: &str, id: &str, grants: &[serde_json::Value]) -> Vec<u8> {
    let mut fields = vec![serde_json::json!(table), serde_json::json!(id)];
    fields.extend(grants.iter().cloned());
    serde_json::to_vec(&serde_json::Value::Array(fields)).expect("a JSON value serializes")
}

/// The MAC of an audit entry whose `hash` is given, under `pepper`:
/// HMAC-SHA-256 under the [`AUDIT`] key of the label's bytes followed by
/// the hash's 64 hex digits (the hash commits to every field and to the
/// link before it).
pub fn audit_mac(pepper: &Pepper, hash: &str) -> String {
    pepper.derive(AUDIT).keyed(&[AUDIT.as_bytes(), hash.as_bytes()].concat())
}

/// The audit action that authenticates the log from its entry on (see
/// [`crate::audit::authenticate`]).
pub const AUTHENTICATED: &str = "audit_log.authenticated";

/// The action of an entry recording, on an admin's word, that an
/// unauthenticated entry (its `seq` the target) was found.
pub const ACKNOWLEDGED: &str = "audit_log.acknowledged";

/// Which audit entries a process takes as authority for a new effect (an
/// enrolment, a decision, an approval).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// No pepper (a sandbox): the log carries no MACs and every entry the
    /// chain holds counts.
    Unkeyed,
    /// A pepper, and the log authenticated by the entry at `since` (`None`:
    /// not yet): only entries whose MAC verifies are authority for a new
    /// effect. Entries up to it are *before authentication*: checked by the
    /// chain and the checkpoints, they explain history, and those without
    /// a MAC (made before the store had the pepper) act no more.
    Keyed { since: Option<i64> },
}

impl Authority {
    /// The sequence of the log's `audit_log.authenticated` entry, once it
    /// has one: entries up to it are before authentication.
    pub fn authenticated_at(&self) -> Option<i64> {
        match self {
            Authority::Keyed { since } => *since,
            Authority::Unkeyed => None,
        }
    }

    /// Whether `entry` explains what happened before now (a report of
    /// history, `audit verify`'s principals): every entry up to the log's
    /// authentication (checked by the chain and the checkpoints), and after
    /// it those whose MAC verifies.
    pub fn explains(&self, entry: &crate::audit::chain::Entry) -> bool {
        self.explains_under(process().ok().flatten(), entry)
    }

    /// Whether `entry` counts as authority for a new effect.
    pub fn admits(&self, entry: &crate::audit::chain::Entry) -> bool {
        self.admits_under(process().ok().flatten(), entry)
    }

    /// [`Authority::explains`] for a process holding `pepper`. Pure.
    pub fn explains_under(&self, pepper: Option<&Pepper>, entry: &crate::audit::chain::Entry) -> bool {
        match (self, pepper) {
            (Authority::Unkeyed, _) | (Authority::Keyed { since: None }, _) => true,
            (Authority::Keyed { since: Some(since) }, pepper) => {
                entry.seq <= *since || pepper.is_some_and(|pepper| authentic(pepper, entry))
            }
        }
    }

    /// [`Authority::admits`] for a process holding `pepper`. Pure.
    pub fn admits_under(&self, pepper: Option<&Pepper>, entry: &crate::audit::chain::Entry) -> bool {
        match (self, pepper) {
            (Authority::Unkeyed, _) => true,
            (Authority::Keyed { .. }, None) => false,
            // Made with the pepper, whenever: an entry without its MAC (made
            // before the store had the pepper, or by a writer) never is.
            (Authority::Keyed { .. }, Some(pepper)) => authentic(pepper, entry),
        }
    }
}

/// Whether `entry`'s MAC is the one its hash gives under `pepper` (and the
/// hash the one its fields give), compared in constant time.
pub fn authentic(pepper: &Pepper, entry: &crate::audit::chain::Entry) -> bool {
    use subtle::ConstantTimeEq;
    let Some(mac) = entry.mac.as_deref() else { return false };
    entry.digest() == entry.hash && audit_mac(pepper, &entry.hash).as_bytes().ct_eq(mac.as_bytes()).into()
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
        let sha = crate::api_key::hash("cik_token");
        let keyed = key.keyed(&sha).unwrap();
        assert!(keyed.starts_with(KEYED) && keyed.len() == KEYED.len() + 64, "{keyed}");
        assert_eq!(
            Some(&keyed),
            pepper(&"a".repeat(32)).keyed(&sha).as_ref(),
            "trailing white space is no part of it"
        );
        assert_ne!(Some(keyed.clone()), other.keyed(&sha));
        // Text of a writer's choosing (a derived key's label) has no keyed
        // form: a re-keying never writes a derived key where it is read.
        for label in [SESSION, LINK, PASSWORD, AUDIT, ROW] {
            assert_eq!(key.keyed(label), None, "{label}");
            assert_ne!(label.len(), 32, "{label}: a label is never a hash's length");
        }
        assert_ne!(key.id(), other.id());
        assert!(key.id().starts_with("pep_") && !format!("{key:?}").contains("aaaa"), "{key:?}");
        // HMAC-SHA-256 over the SHA-256's bytes: RFC 4231's construction.
        let mut mac = Hmac::<Sha256>::new_from_slice("a".repeat(32).as_bytes()).unwrap();
        mac.update(&sha2::Digest::finalize(sha2::Digest::chain_update(Sha256::default(), b"cik_token")));
        let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(keyed, format!("{KEYED}{expected}"));
    }

    fn entry(seq: i64, mac_under: Option<&Pepper>) -> crate::audit::chain::Entry {
        let mut entry = crate::audit::chain::Entry {
            seq,
            at: seq,
            actor: "system".into(),
            actor_name: None,
            action: "operator.created".into(),
            target_kind: "operator".into(),
            target_id: "op".into(),
            organization_id: None,
            reason: None,
            request_id: None,
            detail: None,
            prev_hash: "0".repeat(64),
            hash: String::new(),
            mac: None,
        };
        entry.hash = entry.digest();
        entry.mac = mac_under.map(|pepper| audit_mac(pepper, &entry.hash));
        entry
    }

    #[test]
    fn only_entries_made_with_the_pepper_after_authentication_are_authority() {
        let (ours, theirs) = (pepper(&"a".repeat(32)), pepper(&"b".repeat(32)));
        let mut edited = entry(12, Some(&ours));
        edited.target_id = "op_other".into();
        let cases = [
            // (what, entry, authority, admits, explains)
            ("ours, after", entry(12, Some(&ours)), Authority::Keyed { since: Some(10) }, true, true),
            ("ours, before", entry(9, Some(&ours)), Authority::Keyed { since: Some(10) }, true, true),
            (
                "the authentication itself",
                entry(10, Some(&ours)),
                Authority::Keyed { since: Some(10) },
                true,
                true,
            ),
            ("no MAC, after", entry(12, None), Authority::Keyed { since: Some(10) }, false, false),
            ("no MAC, before", entry(9, None), Authority::Keyed { since: Some(10) }, false, true),
            (
                "another pepper's",
                entry(12, Some(&theirs)),
                Authority::Keyed { since: Some(10) },
                false,
                false,
            ),
            ("edited after its MAC", edited, Authority::Keyed { since: Some(10) }, false, false),
            (
                "ours, not yet authenticated",
                entry(3, Some(&ours)),
                Authority::Keyed { since: None },
                true,
                true,
            ),
            ("no MAC, not yet authenticated", entry(3, None), Authority::Keyed { since: None }, false, true),
            ("a sandbox's", entry(3, None), Authority::Unkeyed, true, true),
        ];
        for (what, entry, authority, admits, explains) in cases {
            assert_eq!(authority.admits_under(Some(&ours), &entry), admits, "{what}: admits");
            assert_eq!(authority.explains_under(Some(&ours), &entry), explains, "{what}: explains");
        }
        // A process without the pepper takes nothing of a keyed log as authority.
        let after = entry(12, Some(&ours));
        assert!(!Authority::Keyed { since: Some(10) }.admits_under(None, &after));
    }

    #[test]
    fn each_use_has_a_key_of_its_own() {
        let key = pepper(&"a".repeat(32));
        let labels = [SESSION, LINK, PASSWORD, AUDIT, ROW];
        let macs: std::collections::BTreeSet<String> =
            labels.iter().map(|label| key.derive(label).keyed(b"the same token")).collect();
        assert_eq!(macs.len(), labels.len(), "a MAC made for one use never passes for another");
        assert!(key.derive(SESSION).verifies(b"t", &key.derive(SESSION).keyed(b"t")));
        assert!(!key.derive(SESSION).verifies(b"t", &crate::audit::chain::sha256_hex(b"t")));
        assert_eq!(format!("{:?}", key.derive(SESSION)), "Derived(..)");
        // A row's MAC covers its table, its id and each granting column.
        let row = |table: &str, id: &str, grants: &[serde_json::Value]| {
            key.derive(ROW).keyed(&row_bytes(table, id, grants))
        };
        let base = row("operators", "op_1", &[serde_json::json!("admin"), serde_json::json!(null)]);
        assert_ne!(
            base,
            row("operator_keys", "op_1", &[serde_json::json!("admin"), serde_json::json!(null)])
        );
        assert_ne!(base, row("operators", "op_2", &[serde_json::json!("admin"), serde_json::json!(null)]));
        assert_ne!(
            base,
            row("operators", "op_1", &[serde_json::json!("admin,treasury"), serde_json::json!(null)])
        );
        assert_ne!(base, row("operators", "op_1", &[serde_json::json!("admin"), serde_json::json!("1")]));
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
