//! Power the log took away, held at every authentication. A row's MAC
//! (see [`crate::store::sealed`]) does not stop the row being rolled back
//! to an older state it had, its older MAC with it: a revoked key made
//! live again, a disabled operator enabled, a removed role back. So an
//! authentication also replays the entries about its principal that the
//! log explains (see [`crate::store::keyring::Authority::explains`]) and
//! refuses a row that grants more than they left it. A principal the log
//! does not know is `audit verify`'s to name, not refused here. Without a
//! pepper nothing is sealed, and nothing is checked.

use super::principals::{Finding, Logged, Rows};
use crate::store::{Store, StoreError, keyring};

/// What the entries about `targets` took away that `rows` (the rows an
/// authentication read) still grant: the first such finding.
pub async fn withdrawn(store: &Store, targets: &[&str], rows: &Rows) -> Result<Option<Finding>, StoreError> {
    if keyring::process().ok().flatten().is_none() {
        return Ok(None);
    }
    let authority = store.audit_authority().await?;
    let mut logged = Logged::default();
    for entry in store.audit_about(targets).await?.iter().filter(|entry| authority.explains(entry)) {
        logged.read(entry);
    }
    let found = logged.findings(rows).into_iter().find(|finding| finding.grants_more);
    if let Some(finding) = &found {
        tracing::warn!(%finding, "a row grants what the audit log took away: refused");
    }
    Ok(found)
}
