//! An entry after the log's authentication whose MAC fails (appended by a
//! database writer) is never authority, and `audit verify` fails on it
//! until an admin records it as found: `audit acknowledge SEQ --reason`,
//! one MAC'd `audit_log.acknowledged` entry naming it. After that `audit
//! verify` lists it as acknowledged, and it is still no authority. The
//! rule of which entries are open is pure ([`open`], `audit verify`'s);
//! [`acknowledge`] writes the record in one transaction holding the head.

use super::{Actor, Record};
use crate::store::{
    Store, StoreError, audit as rows,
    keyring::{self, Authority},
};

pub use super::verify::{Unauthenticated, open};
pub use crate::store::keyring::ACKNOWLEDGED;

/// Why an acknowledgement was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AcknowledgeError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Records, on `actor`'s word and for `reason`, that entry `seq` (after
/// the log's authentication, its MAC failing) was found, bound to its
/// hash as it is now.
pub async fn acknowledge(
    store: &Store,
    actor: &Actor,
    seq: i64,
    reason: &str,
) -> Result<Acknowledged, AcknowledgeError> {
    let refused = |why: String| AcknowledgeError::Refused(why);
    if reason.trim().is_empty() {
        return Err(refused("an acknowledgement needs a reason".into()));
    }
    let Some(pepper) = keyring::process().map_err(|e| refused(e.to_string()))? else {
        return Err(refused("acknowledging needs the pepper (CUSTODY_INDEXER_KEY_PEPPER_FILE)".into()));
    };
    let mut tx = store.begin().await?;
    super::lock(&mut tx).await?;
    let Authority::Keyed { since: Some(since) } = rows::authority(&mut tx).await? else {
        return Err(refused("the log is not authenticated: every entry is checked by the chain".into()));
    };
    let entry = rows::at(&mut tx, seq).await?.ok_or_else(|| refused(format!("no audit entry {seq}")))?;
    if seq <= since {
        return Err(refused(format!("audit entry {seq} is before the log's authentication (entry {since})")));
    }
    if keyring::authentic(pepper, &entry) {
        return Err(refused(format!("audit entry {seq} is authenticated: nothing to acknowledge")));
    }
    let earlier = rows::entries_about(&mut tx, ACKNOWLEDGED, &seq.to_string()).await?;
    if let Some(by) = earlier.iter().find(|e| keyring::authentic(pepper, e)) {
        return Err(refused(format!("audit entry {seq} was acknowledged by entry {}", by.seq)));
    }
    let target = seq.to_string();
    // Bound to the entry as it is now: one rewritten later is open again.
    let detail = super::Detail { acknowledged_hash: Some(entry.hash.clone()), ..Default::default() };
    let record = Record {
        actor,
        action: ACKNOWLEDGED,
        target_kind: "audit_entry",
        target_id: &target,
        organization_id: None,
        reason: Some(reason),
        request_id: None,
        detail: Some(detail),
    };
    let by = super::append(&mut tx, store.cipher().ok(), record).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Acknowledged { by, action: entry.action, actor: entry.actor })
}

/// What an acknowledgement recorded: its own `seq`, and the action and
/// actor the acknowledged entry claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub by: i64,
    pub action: String,
    pub actor: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        audit::{Detail, chain::Entry},
        store::keyring::{Pepper, audit_mac},
    };

    fn entry(seq: i64, action: &str, target: &str, pepper: Option<&Pepper>) -> Entry {
        entry_of(seq, action, target, None, pepper)
    }

    /// An acknowledgement of `acknowledged` (as its hash is).
    fn ack(seq: i64, acknowledged: &Entry, pepper: Option<&Pepper>) -> Entry {
        let detail = Detail { acknowledged_hash: Some(acknowledged.hash.clone()), ..Detail::default() };
        entry_of(seq, ACKNOWLEDGED, &acknowledged.seq.to_string(), Some(detail), pepper)
    }

    fn entry_of(
        seq: i64,
        action: &str,
        target: &str,
        detail: Option<Detail>,
        pepper: Option<&Pepper>,
    ) -> Entry {
        let mut entry = Entry {
            seq,
            at: 0,
            actor: "system".into(),
            actor_name: None,
            action: action.into(),
            target_kind: "x".into(),
            target_id: target.into(),
            organization_id: None,
            reason: None,
            request_id: None,
            detail: detail.map(|d| d.text()),
            prev_hash: String::new(),
            hash: String::new(),
            mac: None,
        };
        entry.hash = entry.digest();
        entry.mac = pepper.map(|pepper| audit_mac(pepper, &entry.hash));
        entry
    }

    #[test]
    fn an_entry_is_open_until_an_authenticated_acknowledgement_after_it_names_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p"), "p".repeat(40)).unwrap();
        let pepper = Pepper::from_file(&dir.path().join("p")).unwrap();
        let p = Some(&pepper);
        let log = |tail: Vec<Entry>| {
            let mut log =
                vec![entry(1, "x.made", "a", None), entry(2, "audit_log.authenticated", "audit_log", p)];
            log.extend(tail);
            open(&log, &pepper)
        };
        let of = |seq, by| Unauthenticated { seq, acknowledged_by: by };
        // Before the authentication nothing is open; after it, a forgery is.
        assert_eq!(log(vec![entry(3, "x.forged", "a", None)]), vec![of(3, None)]);
        assert_eq!(log(vec![entry(3, "x.made", "a", p)]), vec![]);
        let forged = entry(3, "x.forged", "a", None);
        // Acknowledged by an authenticated entry after it.
        let acknowledged = log(vec![forged.clone(), ack(4, &forged, p)]);
        assert_eq!(acknowledged, vec![of(3, Some(4))]);
        // Rewritten after its acknowledgement: open again.
        let rewritten = entry(3, "x.rewritten", "a", None);
        assert_eq!(log(vec![rewritten, ack(4, &forged, p)]), vec![of(3, None)]);
        // A forged acknowledgement is one more open entry, and acknowledges nothing.
        let unkeyed = log(vec![forged.clone(), ack(4, &forged, None)]);
        assert_eq!(unkeyed, vec![of(3, None), of(4, None)]);
        // An acknowledgement before the entry it names acknowledges nothing.
        let later = entry(4, "x.forged", "a", None);
        let early = log(vec![ack(3, &later, p), later.clone()]);
        assert_eq!(early, vec![of(4, None)]);
        // A log never authenticated has nothing open.
        assert_eq!(open(&[entry(1, "x.forged", "a", None)], &pepper), vec![]);
    }
}
