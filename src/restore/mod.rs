//! Restores: the service knows when its store was restored from a backup
//! and sends nothing of its own accord until operators have recovered.
//!
//! Two witnesses say a store lost what it once held:
//! - the newest signed checkpoint of the audit log, kept outside the
//!   database ([`witness`]): a log that ends before it, or holds another
//!   entry at its `seq`, was restored;
//! - the chains ([`chains`]): an address of a platform-held key whose
//!   nonce on chain is above the store's next nonce for it sent
//!   transactions the store does not know.
//!
//! Either closes the [`gate::Gate`]: senders wait and the API refuses
//! transfers on the chains concerned, until an admin has acknowledged the
//! restore (`audit acknowledge-restore`, [`acknowledge`]) and `transfers
//! recover` has run for each chain.

pub mod acknowledge;
pub mod chains;
pub mod gate;
pub mod lost;
pub mod watch;
pub mod witness;

use crate::{
    audit::checkpoint::Checkpoint,
    store::{Store, StoreError},
};
pub use witness::{RECOVERED, RESTORE_ACKNOWLEDGED, Witness};

/// The witness of `store`'s log against `newest`, the newest checkpoint
/// whose signature verifies (none: only an acknowledged restore is
/// followed). Reads only, on the pool.
pub async fn read(store: &Store, newest: Option<&Checkpoint>) -> Result<Witness, StoreError> {
    let (head, _) = store.audit_head().await?;
    let at_checkpoint = match newest {
        Some(checkpoint) => store.audit_entry(checkpoint.seq).await?.map(|entry| entry.hash),
        None => None,
    };
    let authority = store.audit_authority().await?;
    let mut entries = store.audit_of_action(RESTORE_ACKNOWLEDGED).await?;
    entries.extend(store.audit_of_action(RECOVERED).await?);
    entries.retain(|entry| authority.admits(entry));
    entries.sort_by_key(|entry| entry.seq);
    let log = witness::Log { head, at_checkpoint: at_checkpoint.as_deref(), entries: &entries };
    Ok(witness::judge(&log, newest))
}

/// The `seq` and time of the newest admitted `transfers.recovered`
/// entry of `chain`, if any. Reads only, on the pool.
pub async fn recovered_at(
    store: &Store,
    chain: crate::chain::Chain,
) -> Result<Option<(i64, i64)>, StoreError> {
    let authority = store.audit_authority().await?;
    let entries = store.audit_of_action(RECOVERED).await?;
    Ok(entries
        .iter()
        .filter(|e| e.target_id == chain.as_str() && authority.admits(e))
        .map(|e| (e.seq, e.at))
        .max())
}
