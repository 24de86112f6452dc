//! Power the log took away, held at every authentication. A row's MAC
//! (see [`crate::store::sealed`]) does not stop the row being rolled back
//! to an older state it had, its older MAC with it: a revoked key made
//! live again, a disabled operator enabled, a removed role back. So an
//! authentication also replays the entries about its principal that the
//! log explains (see [`crate::store::keyring::Authority::explains`]) and
//! refuses a row that grants more than they left it. A principal the log
//! does not know is `audit verify`'s to name, not refused here. Without a
//! pepper nothing is sealed, and nothing is checked.

use super::principals::{Finding, KeyRow, Logged, OperatorRow, Rows};
use crate::{
    operators::Operator,
    store::{Store, StoreError, keyring},
};

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

/// The row of `operator` as an authentication read it (enabled, its roles).
fn operator_row(operator: &Operator) -> OperatorRow {
    let mut roles: Vec<String> = operator.roles.iter().map(|r| r.as_str().to_string()).collect();
    roles.sort();
    OperatorRow { id: operator.id.clone(), roles, enabled: true }
}

/// Whether the log took away what `operator`'s row grants: a signed-in
/// operator's console requests.
pub async fn operator(store: &Store, operator: &Operator) -> Result<bool, StoreError> {
    let rows = Rows { operators: vec![operator_row(operator)], ..Rows::default() };
    Ok(withdrawn(store, &[&operator.id], &rows).await?.is_some())
}

/// Whether the log took away what `operator`'s key `key_id` (expiring at
/// `expires_at`) and its row grant: an operator key's requests.
pub async fn operator_key(
    store: &Store,
    operator: &Operator,
    key_id: &str,
    expires_at: Option<i64>,
) -> Result<bool, StoreError> {
    let key = KeyRow {
        id: key_id.to_string(),
        owner: operator.id.clone(),
        live: true,
        paired: false,
        fingerprint: None,
        expires_at,
    };
    let rows =
        Rows { operators: vec![operator_row(operator)], operator_keys: vec![key], api_keys: Vec::new() };
    Ok(withdrawn(store, &[&operator.id], &rows).await?.is_some())
}

/// Whether the log took away what console user `user_id`'s row grants
/// (`totp`: the row holds a second factor): a removal, or a second factor
/// added that the row no longer holds (a row rolled back to before it, so
/// that the password alone would open it).
pub async fn console_user(store: &Store, user_id: &str, totp: bool) -> Result<bool, StoreError> {
    if keyring::process().ok().flatten().is_none() {
        return Ok(false);
    }
    let authority = store.audit_authority().await?;
    let entries = store.audit_about(&[user_id]).await?;
    let taken = entries.iter().filter(|entry| authority.explains(entry)).any(|entry| {
        entry.action == "console_user.removed"
            || (entry.action == "console_user.second_factor_added" && !totp)
    });
    if taken {
        tracing::warn!(user = %user_id, "a console user's row grants what the audit log took away: refused");
    }
    Ok(taken)
}
