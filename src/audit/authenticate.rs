//! The log authenticated: from the first start of a process with the
//! pepper on, every entry carries a MAC under the pepper's audit key
//! (see [`crate::store::keyring::audit_mac`]), and only an entry whose MAC
//! verifies is ever taken as authority for a new effect (an enrolment, a
//! decision, an approval). A database writer can still append an entry the
//! chain accepts; it cannot make one that acts.
//!
//! At that first start ([`adopt`]) the service checks the chain (and the
//! newest signed checkpoint it was given, which the log must still hold),
//! then, in one transaction holding the head, ends every console session,
//! voids every unused enrol link, seals every row that authenticates as
//! found (see [`crate::store::sealed`]), and appends one MAC'd
//! `audit_log.authenticated` entry naming the head it found, that
//! checkpoint, and the principals in force (a line each, and their
//! SHA-256), which `audit verify` prints for two admins to confirm.
//! Entries up to that head are *before authentication*: the chain and the
//! checkpoints vouch for them, they explain history (reports, principals),
//! and one without a MAC (made before the store had the pepper) is no
//! authority for a new effect: a change or repair asked so is ended at
//! every start (see `operators::changes::expire_unauthenticated`), and a
//! wire recorded so cannot be approved. No existing entry is ever updated.

use ed25519_dalek::VerifyingKey;

use super::{Actor, Detail, Record, chain, checkpoint::Checkpoint, verify::principal_rows};
use crate::{
    people::resource::email_key,
    store::{
        Store, StoreError, audit as rows, console,
        keyring::{self, AUTHENTICATED, Authority},
        now_micros, sealed,
    },
};

/// What [`adopt`] did: the entry it appended, and what it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub seq: i64,
    pub head_seq: i64,
    pub sessions_ended: u64,
    pub links_voided: u64,
    pub principals: usize,
}

/// Authenticates `store`'s log, once, when this process has a pepper and
/// the log has no authenticated `audit_log.authenticated` entry yet:
/// `None` otherwise. Refused (nothing written) when the chain is broken or
/// no longer holds `checkpoint`, signed by its key.
pub async fn adopt(
    store: &Store,
    checkpoint: Option<(&Checkpoint, &VerifyingKey)>,
) -> Result<Option<Authenticated>, StoreError> {
    if keyring::process().ok().flatten().is_none() {
        return Ok(None);
    }
    // The log and the principals are read on the pool, and then the head
    // is held only if it has not moved since: nothing is read on the pool
    // while the head is held, where every change of the log waits.
    for _ in 0..READS {
        if store.audit_authority().await? != (Authority::Keyed { since: None }) {
            return Ok(None);
        }
        let (entries, head) = chain::read_log(store).await?;
        let refused = |why: String| StoreError::Corrupt(format!("the audit log is not authenticated: {why}"));
        chain::verify(&entries, Some((head.0, &head.1))).map_err(|broken| refused(broken.to_string()))?;
        if let Some((checkpoint, public)) = checkpoint {
            checkpoint.check(public, &entries, head.0).map_err(|broken| {
                refused(format!("{broken} (the newest signed checkpoint); see docs/operations.md"))
            })?;
        }
        let principals = principals(store).await?;
        let mut tx = store.begin().await?;
        if rows::lock_head(&mut tx).await? == head {
            return authenticate(tx, head, checkpoint.map(|(c, _)| c.seq), principals).await;
        }
    }
    Err(StoreError::Waiting("the audit log kept moving while it was authenticated: start again".into()))
}

/// How many times [`adopt`] reads the log before it gives up on a log that
/// keeps moving.
const READS: usize = 5;

/// [`adopt`]'s writes in `tx`, which holds the head at `head` as the log
/// and the `principals` were read.
async fn authenticate(
    mut tx: crate::store::Tx,
    (head_seq, head_hash): (i64, String),
    checkpoint_seq: Option<i64>,
    principals: Vec<String>,
) -> Result<Option<Authenticated>, StoreError> {
    if rows::authority(&mut tx).await? != (Authority::Keyed { since: None }) {
        return Ok(None);
    }
    let (sessions_ended, links_voided) = console::end_all_sessions_and_links(&mut tx, now_micros()).await?;
    // The rows that authenticate, sealed as found: the principals' lines
    // list them for review.
    for table in sealed::ALL {
        table.seal_all(&mut tx).await?;
    }
    let detail = Detail {
        head_seq: Some(head_seq),
        head_hash: Some(head_hash),
        checkpoint_seq,
        principals_sha256: Some(digest(&principals)),
        principals: Some(principals.clone()),
        ..Detail::default()
    };
    let record = Record {
        actor: &Actor::System,
        action: AUTHENTICATED,
        target_kind: "store",
        target_id: "audit_log",
        organization_id: None,
        reason: None,
        request_id: None,
        detail: Some(detail),
    };
    let seq = super::append(&mut tx, None, record).await?;
    tx.commit().await?;
    Ok(Some(Authenticated { seq, head_seq, sessions_ended, links_voided, principals: principals.len() }))
}

/// The SHA-256 of the principals' lines, each followed by a newline.
pub fn digest(lines: &[String]) -> String {
    chain::sha256_hex(lines.iter().map(|line| format!("{line}\n")).collect::<String>().as_bytes())
}

/// The principals in force, a line each, sorted: every operator with its
/// roles and state, every operator and API key with its owner and state,
/// every console user present with what it belongs to and whether it
/// enrolled, every organization's contact address as its digest (the SHA-256 of the
/// JSON array of its id and the address lowercased, as the organization's
/// entries record it). No personal data.
pub async fn principals(store: &Store) -> Result<Vec<String>, StoreError> {
    let found = principal_rows(store).await?;
    let state = |live: bool, yes: &str, no: &str| if live { yes.to_string() } else { no.to_string() };
    let mut lines: Vec<String> = Vec::new();
    for operator in &found.operators {
        let enabled = state(operator.enabled, "enabled", "disabled");
        lines.push(format!("operator {} roles={} {enabled}", operator.id, operator.roles.join(",")));
    }
    for key in &found.operator_keys {
        let expires = key.expires_at.map_or("never".to_string(), |at| at.to_string());
        let live = state(key.live, "live", "revoked");
        lines.push(format!("operator_key {} operator={} {live} expires={expires}", key.id, key.owner));
    }
    for key in &found.api_keys {
        let paired = key.fingerprint.clone().unwrap_or_else(|| "no".into());
        let live = state(key.live, "live", "revoked");
        lines.push(format!("api_key {} organization={} {live} paired={paired}", key.id, key.owner));
    }
    for user in store.console_users_present().await? {
        let member = match (user.organization(), user.role(), user.operator()) {
            (Some(organization), Some(role), _) => {
                format!("organization={organization} role={}", role.as_str())
            }
            (_, _, Some(operator)) => format!("operator={operator}"),
            _ => "unattached".to_string(),
        };
        let state = match (user.enrolled, user.totp) {
            (true, true) => "enrolled second_factor",
            (true, false) => "enrolled",
            (false, _) => "invited",
        };
        lines.push(format!("console_user {} {member} {state}", user.id));
    }
    for organization in store.organizations().await? {
        if let Some(contact) = &organization.contact_email {
            let fields = serde_json::json!([organization.id, email_key(contact)]);
            let digest = chain::sha256_hex(fields.to_string().as_bytes());
            lines.push(format!("contact {} sha256={digest}", organization.id));
        }
    }
    lines.sort();
    Ok(lines)
}
