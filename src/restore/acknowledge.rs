//! `audit acknowledge-restore`: an admin records that the store was
//! restored past the newest signed checkpoint, naming it, so that
//! checkpoints resume from the restored head and `audit verify` accepts the
//! later chain through this acknowledgement. The entry
//! (`audit_log.restore_acknowledged`, target the lost checkpoint's `seq`)
//! names the checkpoint, the entries lost and the chains that wait for
//! `transfers recover`; it makes a checkpoint due at once.

use super::witness::{self, RESTORE_ACKNOWLEDGED};
use crate::{
    audit::{self, Actor, Record, checkpoint::Checkpoint},
    store::{Store, StoreError, audit as rows, now_micros},
};

/// Why an acknowledgement was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A refusal the caller can read and fix (`409`).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What was recorded: the entry, and the entries lost.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Acknowledged {
    pub acknowledged_by: i64,
    pub lost_from: i64,
    pub lost_to: i64,
    pub chains: Vec<String>,
}

/// Records, on `actor`'s word and for `reason`, that the log lost what
/// `checkpoint` (verified with `public`) saw; `chains` then wait for
/// `transfers recover`.
pub async fn acknowledge_restore(
    store: &Store,
    actor: &Actor,
    (checkpoint, public): (&Checkpoint, &ed25519_dalek::VerifyingKey),
    chains: Vec<String>,
    reason: &str,
) -> Result<Acknowledged, RestoreError> {
    let refused = |why: String| RestoreError::Refused(why);
    if reason.trim().is_empty() {
        return Err(refused("reason: say what was restored, from which backup".into()));
    }
    if !checkpoint.signed_by(public) {
        return Err(refused("the checkpoint's signature does not verify with the audit public key".into()));
    }
    let mut tx = store.begin().await?;
    audit::lock(&mut tx).await?;
    let (head, _) = rows::lock_head(&mut tx).await?;
    let held = rows::at(&mut tx, checkpoint.seq).await?.is_some_and(|entry| entry.hash == checkpoint.hash);
    if checkpoint.seq == 0 || held {
        return Err(refused(format!(
            "the audit log holds checkpoint {} (its head is {head}): nothing was lost",
            checkpoint.seq
        )));
    }
    let authority = rows::authority(&mut tx).await?;
    let earlier = rows::entries_about(&mut tx, RESTORE_ACKNOWLEDGED, &checkpoint.seq.to_string()).await?;
    if let Some(by) = earlier.iter().find(|e| authority.admits(e) && witness::acknowledges(e, checkpoint)) {
        return Err(refused(format!(
            "checkpoint {} was acknowledged lost by audit entry {}",
            checkpoint.seq, by.seq
        )));
    }
    let detail = witness::acknowledgement(checkpoint, head, chains.clone());
    let (lost_from, lost_to) = (detail.lost_from.unwrap_or(head), checkpoint.seq);
    let target = checkpoint.seq.to_string();
    let record = Record {
        actor,
        action: RESTORE_ACKNOWLEDGED,
        target_kind: "audit_log",
        target_id: &target,
        organization_id: None,
        reason: Some(reason),
        request_id: None,
        detail: Some(detail),
    };
    let by = audit::append(&mut tx, store.cipher().ok(), record).await?;
    rows::checkpoint_due_now(&mut tx).await?;
    crate::store::console::end_all_sessions_and_links(&mut tx, now_micros()).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Acknowledged { acknowledged_by: by, lost_from, lost_to, chains })
}
