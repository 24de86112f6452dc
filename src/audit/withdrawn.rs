//! Power the log took away, held at every authentication. A row's MAC
//! (see [`crate::store::sealed`]) does not stop the row being rolled back
//! to an older state it had, its older MAC with it: a revoked key made
//! live again, a disabled operator enabled, a removed role back. So an
//! authentication also replays the entries about its principal that the
//! log explains (see [`crate::store::keyring::Authority::explains`]), and
//! those that only take power away whatever their MAC, and
//! refuses a row that grants more than they left it, an operator
//! granted after genesis without another admin's approval, or one the log
//! suspended (see [`crate::operators::suspension`]) whatever its change's
//! row says now. A principal the log
//! does not know is `audit verify`'s to name, not refused here. Without a
//! pepper nothing is sealed, and nothing is checked.

use super::{
    Detail,
    chain::Entry,
    principals::{Finding, KeyRow, Logged, OperatorRow, Rows},
};
use crate::{
    operators::Operator,
    people::resource::User,
    store::{Store, StoreError, keyring},
};

/// What the entries about `targets` took away that `rows` (the rows an
/// authentication read) still grant: the first such finding.
pub async fn withdrawn(store: &Store, targets: &[&str], rows: &Rows) -> Result<Option<Finding>, StoreError> {
    if keyring::process().ok().flatten().is_none() {
        return Ok(None);
    }
    let authority = store.audit_authority().await?;
    let mut logged = match authority {
        keyring::Authority::Keyed { since: Some(since) } => Logged::four_eyes_after(since),
        _ => Logged::default(),
    };
    for entry in &about(store, targets).await? {
        logged.replay(&authority, entry);
    }
    let now = crate::store::now_micros();
    let found = logged.findings(rows).into_iter().find(|finding| finding.grants_more).or_else(|| {
        rows.operators.iter().find_map(|row| {
            let suspension = logged.suspended(&row.id, now)?;
            let until = chrono::DateTime::from_timestamp_micros(suspension.until).unwrap_or_default();
            let why = format!("is suspended by audit entry {} until {}", suspension.seq, until.to_rfc3339());
            Some(Finding { kind: "operator", id: row.id.clone(), why, grants_more: true })
        })
    });
    if let Some(finding) = &found {
        tracing::warn!(%finding, "a row grants what the audit log took away: refused");
    }
    Ok(found)
}

/// What the log says operator `id` is: (enabled, holding `admin`); both
/// false for an operator the log does not know, or without a pepper (a
/// sandbox, where rows are all there is).
pub async fn logged(store: &Store, id: &str) -> Result<(bool, bool), StoreError> {
    if keyring::process().ok().flatten().is_none() {
        return Ok((false, false));
    }
    let authority = store.audit_authority().await?;
    let mut logged = Logged::default();
    for entry in &about(store, &[id]).await? {
        logged.replay(&authority, entry);
    }
    Ok(logged.operator_state(id))
}

/// The entries about `targets`, with those a grant among them is held to:
/// the end of genesis and the changes the grants name, in `seq` order.
async fn about(store: &Store, targets: &[&str]) -> Result<Vec<Entry>, StoreError> {
    let mut first = targets.to_vec();
    first.push(crate::operators::genesis::TARGET);
    let mut entries = store.audit_about(&first).await?;
    let changes: Vec<String> =
        entries.iter().filter_map(|e| e.detail.as_deref().and_then(Detail::parse)?.change_id).collect();
    if !changes.is_empty() {
        let changes: Vec<&str> = changes.iter().map(String::as_str).collect();
        entries.extend(store.audit_about(&changes).await?);
        entries.sort_by_key(|entry| entry.seq);
        entries.dedup_by_key(|entry| entry.seq);
    }
    Ok(entries)
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

/// Whether the log took away what console `user`'s row grants: a
/// removal, a second factor added that the row no longer holds (a row
/// rolled back to before it, so that the password alone would open it), or
/// a tenant role other than the one the log last gave (the reason of its
/// `console_user.invited` or `console_user.role_set`, opened with the
/// store's personal-data key) or than any an unauthenticated entry after
/// it gave.
pub async fn console_user(store: &Store, user: &User) -> Result<bool, StoreError> {
    if keyring::process().ok().flatten().is_none() {
        return Ok(false);
    }
    let authority = store.audit_authority().await?;
    let entries = store.audit_about(&[&user.id]).await?;
    // Taking away counts whatever the entry's MAC (see `Logged::replay`).
    let mut taken = entries.iter().any(|entry| {
        entry.action == "console_user.removed"
            || (entry.action == "console_user.second_factor_added" && !user.totp)
    });
    // The role the log last gave, and every role an entry after it gave
    // without a MAC (a demotion whose MAC was stripped, or a writer's):
    // the row holds each, or nothing.
    let roles = ["console_user.invited", "console_user.role_set"];
    let given: Vec<&Entry> = entries.iter().filter(|entry| roles.contains(&entry.action.as_str())).collect();
    let last = given.iter().rposition(|entry| authority.explains(entry));
    let held = given.iter().enumerate().filter(|(at, entry)| {
        Some(*at) == last || (last.is_none_or(|last| *at > last) && !authority.explains(entry))
    });
    if let (Some(role), Ok(cipher)) = (user.role(), store.cipher()) {
        for (_, entry) in held {
            taken |= super::reason(Some(cipher), entry)?.is_some_and(|given| given != role.as_str());
        }
    }
    if taken {
        tracing::warn!(user = %user.id, "a console user's row grants what the audit log took away: refused");
    }
    Ok(taken)
}
