//! `audit verify` as a whole: the hash chain against the head, each
//! signed checkpoint given against the log, the guards in the database,
//! and every principal's row against the log (see [`super::principals`]).
//! Reads only.

use ed25519_dalek::VerifyingKey;

use super::{
    chain::{self, Broken},
    checkpoint::Checkpoint,
    principals::{Finding, KeyRow, Logged, OperatorRow, Rows},
};
use crate::store::{
    Store, StoreError,
    keyring::{self, AUTHENTICATED, Authority},
};

/// What `audit verify` found.
#[derive(Debug, Clone)]
pub struct Report {
    /// Entries read, and the head's hash.
    pub entries: i64,
    pub head_hash: String,
    /// Where the chain breaks, and each checkpoint the log does not hold.
    pub broken: Vec<Broken>,
    /// Checkpoints the log holds.
    pub held: Vec<Checkpoint>,
    /// Checkpoints the log lost in a restore an admin acknowledged, each
    /// with the acknowledgement's `seq`.
    pub lost: Vec<(Checkpoint, i64)>,
    /// The database's guards absent, disabled or changed.
    pub unguarded: Vec<String>,
    /// Principals' rows the log does not explain.
    pub unexplained: Vec<Finding>,
    /// How the entries' MACs were checked, and each entry after the log's
    /// authentication whose MAC does not verify (failing the log until it
    /// is acknowledged, see [`super::acknowledge`]).
    pub macs: Macs,
    pub unauthenticated: Vec<Unauthenticated>,
    /// Rows that authenticate whose MAC does not match them (`<table> <id>`).
    pub unsealed: Vec<String>,
}

/// How `audit verify` checked the entries' MACs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Macs {
    /// No pepper: `MACs not checked (no pepper)`.
    NotChecked,
    /// A pepper, and no authenticated `audit_log.authenticated` entry yet.
    NotYetAuthenticated,
    /// Every entry after `entry` (the authentication, whose detail names
    /// the head before it and the principals then in force) checked.
    Checked { entry: Box<chain::Entry> },
}

impl Report {
    /// Whether nothing was found.
    pub fn intact(&self) -> bool {
        self.broken.is_empty()
            && self.unguarded.is_empty()
            && self.unexplained.is_empty()
            && self.unauthenticated.iter().all(|entry| entry.acknowledged_by.is_some())
            && self.unsealed.is_empty()
    }
}

/// Verifies `store`'s log, and each of `checkpoints` with `public`.
pub async fn verify(
    store: &Store,
    checkpoints: &[Checkpoint],
    public: Option<&VerifyingKey>,
) -> Result<Report, StoreError> {
    let (entries, (head, head_hash)) = chain::read_log(store).await?;
    let mut broken = Vec::new();
    if let Err(at) = chain::verify(&entries, Some((head, &head_hash))) {
        broken.push(at);
    }
    let (mut held, mut lost) = (Vec::new(), Vec::new());
    for checkpoint in checkpoints {
        let checked = match public {
            Some(public) => checkpoint.check(public, &entries, head),
            None => Err(Broken { seq: checkpoint.seq, why: "no public key to verify the checkpoint with" }),
        };
        match checked {
            Ok(()) => held.push(checkpoint.clone()),
            Err(at) => match lost_by(&entries, &authority_of(&entries), checkpoint) {
                Some(by) => lost.push((checkpoint.clone(), by)),
                None => broken.push(at),
            },
        }
    }
    let (macs, authority, unauthenticated) = match keyring::process().ok().flatten() {
        None => (Macs::NotChecked, Authority::Unkeyed, Vec::new()),
        Some(pepper) => match authenticated_at(&entries, pepper) {
            None => (Macs::NotYetAuthenticated, Authority::Keyed { since: None }, Vec::new()),
            Some(entry) => (
                Macs::Checked { entry: Box::new(entry.clone()) },
                Authority::Keyed { since: Some(entry.seq) },
                open(&entries, pepper),
            ),
        },
    };
    // An entry after the authentication whose MAC fails explains nothing,
    // unless it only takes power away.
    let mut logged = match authority {
        Authority::Keyed { since: Some(since) } => Logged::four_eyes_after(since),
        _ => Logged::default(),
    };
    entries.iter().for_each(|entry| logged.replay(&authority, entry));
    let unexplained = logged.findings(&principal_rows(store).await?);
    let unguarded = store.audit_guards_missing().await?;
    let entries = entries.len() as i64;
    let unsealed = store.unsealed_rows().await?;
    Ok(Report {
        entries,
        head_hash,
        broken,
        held,
        lost,
        unguarded,
        unexplained,
        macs,
        unauthenticated,
        unsealed,
    })
}

/// The principals' rows of `store`.
pub async fn principal_rows(store: &Store) -> Result<Rows, StoreError> {
    let mut rows = Rows::default();
    for operator in store.operators().await? {
        for key in store.operator_keys(&operator.id).await? {
            let live = key.revoked_at.is_none();
            let expires_at = key.expires_at.map(|at| at.timestamp_micros());
            let row = KeyRow {
                id: key.id,
                owner: key.operator_id,
                live,
                paired: false,
                fingerprint: None,
                expires_at,
            };
            rows.operator_keys.push(row);
        }
        let mut roles: Vec<String> = operator.roles.iter().map(|r| r.as_str().to_string()).collect();
        roles.sort();
        let enabled = operator.disabled_at.is_none();
        rows.operators.push(OperatorRow { id: operator.id, roles, enabled });
    }
    let public_keys = store.api_key_public_keys().await?;
    for key in store.api_keys(None).await? {
        // Paired as sign-in reads it: a public key is kept.
        let fingerprint = public_keys.get(&key.id).map(|pem| super::chain::sha256_hex(pem.as_bytes()));
        let (live, paired) = (key.revoked_at.is_none(), fingerprint.is_some());
        let row =
            KeyRow { id: key.id, owner: key.organization_id, live, paired, fingerprint, expires_at: None };
        rows.api_keys.push(row);
    }
    Ok(rows)
}

/// Where the log was authenticated, as `entries` (the whole log, in order)
/// hold it for a process with `pepper`: the first `audit_log.authenticated`
/// entry whose MAC verifies.
pub fn authenticated_at<'a>(
    entries: &'a [chain::Entry],
    pepper: &keyring::Pepper,
) -> Option<&'a chain::Entry> {
    entries.iter().find(|e| e.action == AUTHENTICATED && keyring::authentic(pepper, e))
}

/// An unauthenticated entry and, once acknowledged, the entry that did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unauthenticated {
    pub seq: i64,
    pub acknowledged_by: Option<i64>,
}

/// The authority of `entries` (the whole log) for this process: keyed
/// when it holds a pepper, from the log's authentication.
fn authority_of(entries: &[chain::Entry]) -> Authority {
    match keyring::process().ok().flatten() {
        None => Authority::Unkeyed,
        Some(pepper) => Authority::Keyed { since: authenticated_at(entries, pepper).map(|e| e.seq) },
    }
}

/// The `seq` of the entry of `entries` (the whole log) that acknowledges
/// `checkpoint` lost in a restore, when `authority` admits it.
pub fn lost_by(entries: &[chain::Entry], authority: &Authority, checkpoint: &Checkpoint) -> Option<i64> {
    entries
        .iter()
        .filter(|e| e.seq > 0 && authority.admits(e))
        .find(|e| crate::restore::witness::covers(e, checkpoint))
        .map(|e| e.seq)
}

/// Every entry of `entries` (the whole log, in order) after the log's
/// authentication whose MAC does not verify under `pepper`, each with the
/// authenticated acknowledgement after it, if any. Pure.
pub fn open(entries: &[chain::Entry], pepper: &keyring::Pepper) -> Vec<Unauthenticated> {
    let Some(since) = authenticated_at(entries, pepper).map(|e| e.seq) else { return Vec::new() };
    // Each acknowledgement: the entry's seq and hash as acknowledged, and its own seq.
    let acknowledgements: Vec<(i64, String, i64)> = entries
        .iter()
        .filter(|e| e.seq > since && e.action == keyring::ACKNOWLEDGED && keyring::authentic(pepper, e))
        .filter_map(|e| {
            let hash = e.detail.as_deref().and_then(super::Detail::parse)?.acknowledged_hash?;
            Some((e.target_id.parse::<i64>().ok()?, hash, e.seq))
        })
        .collect();
    entries
        .iter()
        .filter(|e| e.seq > since && !keyring::authentic(pepper, e))
        .map(|e| Unauthenticated {
            seq: e.seq,
            // The entry as it was acknowledged: one rewritten since is open again.
            acknowledged_by: acknowledgements
                .iter()
                .find(|(seq, hash, by)| *seq == e.seq && *hash == e.hash && *by > e.seq)
                .map(|a| a.2),
        })
        .collect()
}

/// A checkpoint of `store`'s log at `at`, signed with `key`, once its chain
/// verifies and it still holds `previous` (the last checkpoint signed with
/// `key`, kept outside the database): a broken or rewritten log is never
/// signed; where it breaks instead.
pub async fn checkpoint(
    store: &Store,
    key: &ed25519_dalek::SigningKey,
    at: i64,
    previous: Option<&Checkpoint>,
) -> Result<Result<Checkpoint, Broken>, StoreError> {
    let (entries, (head, hash)) = chain::read_log(store).await?;
    if let Err(at) = chain::verify(&entries, Some((head, &hash))) {
        return Ok(Err(at));
    }
    if let Some(Err(at)) = previous.map(|previous| previous.check(&key.verifying_key(), &entries, head)) {
        // A restore an admin acknowledged, naming exactly this checkpoint:
        // the chain goes on from the restored head.
        let authority = authority_of(&entries);
        if lost_by(&entries, &authority, previous.expect("checked")).is_none() {
            return Ok(Err(at));
        }
    }
    if let Some(pepper) = keyring::process().ok().flatten() {
        raise_unacknowledged(&open(&entries, pepper));
    }
    // A checkpoint grants nothing: it signs the chain whatever its entries' MACs.
    Ok(Ok(Checkpoint::sign(key, head, &hash, at)))
}

/// Counts in `custody_indexer_audit_broken_total`, and logs, each entry of
/// `open` not yet acknowledged that this process has not counted: an entry
/// a database writer appended after the log's authentication.
fn raise_unacknowledged(open: &[Unauthenticated]) {
    use std::sync::atomic::{AtomicI64, Ordering};
    static COUNTED_UP_TO: AtomicI64 = AtomicI64::new(0);
    let counted = COUNTED_UP_TO.load(Ordering::Relaxed);
    for entry in open.iter().filter(|e| e.acknowledged_by.is_none() && e.seq > counted) {
        metrics::counter!("custody_indexer_audit_broken_total").increment(1);
        tracing::error!(
            seq = entry.seq,
            "audit entry {}: not authenticated (written outside the service; never authority): see `audit verify`, \
             then `audit acknowledge`",
            entry.seq
        );
        COUNTED_UP_TO.fetch_max(entry.seq, Ordering::Relaxed);
    }
}
