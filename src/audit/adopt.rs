//! The principals a store held before its log recorded their details
//! (roles, keys), adopted into the log once: at the first start of this
//! release, each operator, operator key and API key is appended as found
//! (`operator.adopted`, `operator_key.adopted`, `api_key.adopted`, by
//! `system`, its state in the entry's detail), so that `audit verify` can
//! hold every row against the log from then on. A log that holds any
//! entry with a detail adopts nothing ever again: a row written outside
//! the log later is never adopted, it is found.

use super::{Actor, Detail, Record, verify::principal_rows};
use crate::store::{Store, StoreError, audit as rows};

/// Adopts the principals of a store whose log has no detail yet; answers
/// how many entries were appended. Holds the log's head lock, so that
/// instances starting together adopt once; the rows are read on the pool
/// before, and adopted only if the head has not moved since (nothing is
/// read on the pool while the head is held, where every appender waits).
pub async fn adopt(store: &Store) -> Result<usize, StoreError> {
    for _ in 0..READS {
        let mut tx = store.begin().await?;
        super::lock(&mut tx).await?;
        if rows::has_details(&mut tx).await? {
            return Ok(0);
        }
        drop(tx);
        let head = store.audit_head().await?;
        let found = principal_rows(store).await?;
        let mut tx = store.begin().await?;
        if rows::lock_head(&mut tx).await? == head && !rows::has_details(&mut tx).await? {
            let appended = append_all(&mut tx, &found).await?;
            tx.commit().await?;
            return Ok(appended);
        }
    }
    Err(StoreError::Waiting(
        "the audit log kept moving while its principals were adopted: start again".into(),
    ))
}

/// How many times [`adopt`] reads the rows before it gives up.
const READS: usize = 5;

/// Appends an adoption entry for each of `found`'s rows in `tx`: how many.
async fn append_all(tx: &mut crate::store::Tx, found: &super::principals::Rows) -> Result<usize, StoreError> {
    let mut appended = 0;
    let system = Actor::System;
    let record = |action, target_kind, target_id, organization_id, detail| Record {
        actor: &system,
        action,
        target_kind,
        target_id,
        organization_id,
        reason: None,
        request_id: None,
        detail: Some(detail),
    };
    for operator in &found.operators {
        let names: Vec<&str> = operator.roles.iter().map(String::as_str).collect();
        let detail = Detail { live: Some(operator.enabled), ..Detail::roles_of(&names) };
        super::append(tx, None, record("operator.adopted", "operator", &operator.id, None, detail)).await?;
        appended += 1;
    }
    for key in &found.operator_keys {
        let detail = Detail { live: Some(key.live), ..Detail::key(&key.id) };
        let entry = record("operator_key.adopted", "operator", &key.owner, None, detail);
        super::append(tx, None, entry).await?;
        appended += 1;
    }
    for key in &found.api_keys {
        let detail = Detail {
            live: Some(key.live),
            paired: Some(key.paired),
            public_key_sha256: key.fingerprint.clone(),
            ..Detail::default()
        };
        let entry = record("api_key.adopted", "api_key", &key.id, Some(&key.owner), detail);
        super::append(tx, None, entry).await?;
        appended += 1;
    }
    Ok(appended)
}
