//! The audit log: one append-only record of every decision a person or a
//! provider takes (operators' decisions, operator and role changes,
//! break-glass actions, compliance providers' decisions, tenants' key
//! events), each entry written in the transaction of what it records and
//! chained to the one before by its hash ([`chain`]). Several instances on
//! one PostgreSQL append to one linear chain: every append locks the
//! chain's head row. `audit verify` finds an entry edited, deleted or
//! moved; docs/operations.md says how to use it.

pub mod acknowledge;
pub mod adopt;
pub mod authenticate;
pub mod chain;
pub mod checkpoint;
pub mod detail;
pub mod newest;
pub mod overdue;
pub mod principals;
pub mod schedule;
pub mod verify;
pub mod withdrawn;

pub use detail::Detail;
use std::fmt;

use crate::{
    pii::{Cipher, Place},
    store::{StoreError, Tx, audit as rows, keyring},
};

/// Who decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// An operator authenticated by the service, with the name they had.
    Operator { id: String, name: String },
    /// A tenant's console user.
    User(String),
    /// A tenant's API key.
    ApiKey(String),
    /// A compliance provider (`sandbox`, …).
    Provider(String),
    /// A production decision taken on the store directly, with
    /// `--break-glass`, by the operator whose key the command carried
    /// (`id` the operator's, `name` theirs with the process's real user:
    /// `Ada (uid 1000, user ada)`). Rows of older releases name the
    /// operating-system user as `id`, without a name.
    BreakGlass { id: String, name: Option<String> },
    /// A command on the store directly (setup, or a sandbox decision): the
    /// operating-system user, and the `--by` given, if any.
    Local { os_user: String, by: Option<String> },
    /// The service itself.
    System,
    /// An identity decision's actor as the identity's trail recorded it
    /// before the audit log existed (`operator:<--by>`, `provider:<name>`),
    /// written `trail:` and that text when the trail is adopted into the
    /// log (never mistaken for an authenticated operator).
    Trail(String),
}

impl Actor {
    /// The local actor of this process: its operating-system user.
    pub fn local(by: Option<String>) -> Self {
        Actor::Local { os_user: os_user(), by }
    }

    /// A break-glass actor of this process: the operator `id` named
    /// `name`, beside the process's real user.
    pub fn break_glass(id: &str, name: &str) -> Self {
        let (uid, user) = real_user();
        Actor::BreakGlass { id: id.to_string(), name: Some(format!("{name} (uid {uid}, user {user})")) }
    }

    /// The name written beside the actor: an operator's name, the `--by`
    /// of a local command.
    pub fn name(&self) -> Option<&str> {
        match self {
            Actor::Operator { name, .. } => Some(name),
            Actor::Local { by, .. } => by.as_deref(),
            Actor::BreakGlass { name, .. } => name.as_deref(),
            _ => None,
        }
    }

    /// How a decision's row names who took it (a mint's `recorded_by` and
    /// `approved_by`): `operator:<id>` for an authenticated operator,
    /// `break-glass:<os user>`, and for a local command its `--by`,
    /// lowercased, as `by:<name>` (`local:<os user>` without one).
    pub fn recorded(&self) -> String {
        match self {
            Actor::Local { by: Some(name), .. } => format!("by:{}", name.trim().to_lowercase()),
            other => other.to_string(),
        }
    }

    /// The actor a row's [`Actor::recorded`] names, enough to tell two
    /// deciders apart. Rows written before operators were authenticated
    /// hold `operator:<name>` from `--by`: an id is `op_` and 32 hex digits,
    /// anything else is such a name.
    pub fn from_recorded(text: &str) -> Actor {
        let local = |by: &str| Actor::Local { os_user: String::new(), by: Some(by.to_string()) };
        match text.split_once(':') {
            Some(("operator", id)) if is_operator_id(id) => {
                Actor::Operator { id: id.into(), name: String::new() }
            }
            Some(("operator" | "by", name)) => local(name),
            Some(("break-glass", id)) => Actor::BreakGlass { id: id.into(), name: None },
            Some(("local", user)) => Actor::Local { os_user: user.into(), by: None },
            _ => local(text),
        }
    }

    /// The operator's id, when an authenticated operator decided.
    pub fn operator_id(&self) -> Option<&str> {
        match self {
            Actor::Operator { id, .. } => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Operator { id, .. } => write!(f, "operator:{id}"),
            Actor::User(id) => write!(f, "user:{id}"),
            Actor::ApiKey(id) => write!(f, "api-key:{id}"),
            Actor::Provider(name) => write!(f, "provider:{name}"),
            Actor::BreakGlass { id, .. } => write!(f, "break-glass:{id}"),
            Actor::Local { os_user, .. } => write!(f, "local:{os_user}"),
            Actor::System => f.write_str("system"),
            Actor::Trail(text) => write!(f, "trail:{text}"),
        }
    }
}

/// Whether `text` is an operator's id (`op_` and 32 lowercase hex digits).
fn is_operator_id(text: &str) -> bool {
    text.strip_prefix("op_").is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Takes the chain's head row lock without appending: held until `tx`
/// ends, it orders work that must see the log as no other instance is
/// changing it.
pub async fn lock(tx: &mut Tx) -> Result<(), StoreError> {
    rows::lock_head(tx).await.map(drop)
}

/// The process's real user id and its name in the system's password file
/// (`?` when it has none): never an environment variable, which the caller
/// sets.
fn real_user() -> (u32, String) {
    let uid = rustix::process::getuid().as_raw();
    let name = std::fs::read_to_string("/etc/passwd").ok().and_then(|passwd| {
        passwd.lines().find_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let id: u32 = fields.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
    });
    (uid, name.unwrap_or_else(|| "?".into()))
}

/// The operating-system user running this process (`USER`, `USERNAME`),
/// `unknown` when neither is set.
fn os_user() -> String {
    std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into())
}

/// What one entry records.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    pub actor: &'a Actor,
    /// Dotted, past tense: `operator.created`, `wire.approved`, ….
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub organization_id: Option<&'a str>,
    /// Free text: sealed when the store seals personal data.
    pub reason: Option<&'a str>,
    pub request_id: Option<&'a str>,
    /// What machines check the rows against (see [`Detail`]).
    pub detail: Option<Detail>,
}

/// Where a reason is sealed: the entry's own place, so that a reason copied
/// to another entry does not open.
fn place(seq: i64) -> String {
    seq.to_string()
}

/// Appends `record` in `tx`, after the chain's head (locked until `tx`
/// ends); answers its `seq`. `cipher`: the store's personal-data cipher;
/// without it, a reason is refused on a store that seals personal data.
pub async fn append(tx: &mut Tx, cipher: Option<&Cipher>, record: Record<'_>) -> Result<i64, StoreError> {
    if cipher.is_none() && record.reason.is_some() && rows::seals(tx).await? {
        // A reason may hold personal data: this handle cannot seal it.
        return Err(StoreError::Pii(crate::pii::PiiError::Locked));
    }
    let head = rows::next(tx).await?;
    let pepper = keyring::process().ok().flatten();
    if pepper.is_none() && head.authenticated {
        // An entry without its MAC would never count, and `audit verify`
        // would name it: a process without the pepper writes none.
        return Err(StoreError::Invalid(format!(
            "the store's audit log is authenticated under a pepper: set {} to its file",
            keyring::PEPPER_FILE_ENV
        )));
    }

    let row = place(head.seq);
    let reason = record.reason.map(|text| match cipher {
        Some(cipher) => cipher.seal(text.as_bytes(), Place { column: "audit_log.reason", row: &[&row] }),
        None => text.to_string(),
    });
    let mut entry = chain::Entry {
        seq: head.seq,
        at: head.at,
        actor: record.actor.to_string(),
        actor_name: record.actor.name().map(str::to_string),
        action: record.action.to_string(),
        target_kind: record.target_kind.to_string(),
        target_id: record.target_id.to_string(),
        organization_id: record.organization_id.map(str::to_string),
        reason,
        request_id: record.request_id.map(str::to_string),
        detail: record.detail.as_ref().map(Detail::text),
        prev_hash: head.prev_hash,
        hash: String::new(),
        mac: None,
    };
    entry.hash = entry.digest();
    entry.mac = pepper.map(|pepper| keyring::audit_mac(pepper, &entry.hash));
    rows::insert(tx, &entry).await?;
    if matches!(record.actor, Actor::BreakGlass { .. }) {
        // A break-glass step is checkpointed at once: `run` signs the head
        // at its next look (see `schedule`), not at the period's end.
        rows::checkpoint_due_now(tx).await?;
    }
    Ok(entry.seq)
}

/// An entry's reason as a person reads it: opened when sealed.
pub fn reason(cipher: Option<&Cipher>, entry: &chain::Entry) -> Result<Option<String>, StoreError> {
    match (&entry.reason, cipher) {
        (Some(text), Some(cipher)) if Cipher::is_sealed(text) => {
            let row = place(entry.seq);
            Ok(Some(cipher.open_text(text, Place { column: "audit_log.reason", row: &[&row] })?))
        }
        (reason, _) => Ok(reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_decider_reads_back_as_the_same_person() {
        let id = "op_0123456789abcdef0123456789abcdef";
        let operator = Actor::Operator { id: id.into(), name: "Ann".into() };
        let local = |by: &str| Actor::Local { os_user: "ci".into(), by: Some(by.into()) };
        assert_eq!(operator.recorded(), format!("operator:{id}"));
        assert_eq!(Actor::from_recorded(&operator.recorded()).operator_id(), Some(id));
        assert_eq!(local(" Ann ").recorded(), "by:ann");
        assert_eq!(Actor::from_recorded("by:ann").name(), Some("ann"));
        // A row of an older release: `operator:<--by>`.
        assert_eq!(Actor::from_recorded("operator:ann").name(), Some("ann"));
        assert_eq!(Actor::from_recorded("operator:ann").operator_id(), None);
        let glass = Actor::BreakGlass { id: "root".into(), name: None };
        assert_eq!(Actor::from_recorded(&glass.recorded()), glass);
        let glass = Actor::break_glass(id, "Ann");
        assert_eq!(glass.recorded(), format!("break-glass:{id}"));
        assert_eq!(Actor::from_recorded(&glass.recorded()), Actor::BreakGlass { id: id.into(), name: None });
        let name = glass.name().unwrap();
        let uid = rustix::process::getuid().as_raw();
        assert!(name.starts_with(&format!("Ann (uid {uid}, user ")), "{name}");
    }

    #[test]
    fn actors_are_written_as_documented() {
        let operator = Actor::Operator { id: "op_1".into(), name: "Ann".into() };
        let cases = [
            (operator, "operator:op_1", Some("Ann")),
            (Actor::User("u1".into()), "user:u1", None),
            (Actor::ApiKey("k1".into()), "api-key:k1", None),
            (Actor::Provider("sandbox".into()), "provider:sandbox", None),
            (Actor::BreakGlass { id: "root".into(), name: None }, "break-glass:root", None),
            (
                Actor::BreakGlass { id: "op_1".into(), name: Some("Ann (uid 0, user root)".into()) },
                "break-glass:op_1",
                Some("Ann (uid 0, user root)"),
            ),
            (Actor::Local { os_user: "ci".into(), by: Some("ann".into()) }, "local:ci", Some("ann")),
            (Actor::System, "system", None),
        ];
        for (actor, text, name) in cases {
            assert_eq!(actor.to_string(), text);
            assert_eq!(actor.name(), name);
        }
    }
}
