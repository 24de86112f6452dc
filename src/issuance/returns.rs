//! The dollars of failed mints sent back: a `treasury` operator records
//! the bank's return wire, with its audit entry, in one transaction.

use crate::{
    audit::{self, Actor, Record},
    store::{FiatReturn, Store, StoreError, mints},
};

/// Records that the dollars of the failed mint `id` were sent back by the
/// return wire `reference`, as `actor` for `reason`. Again with the same
/// reference: nothing more is written. Another return wire before, or a
/// reference that returned another mint, is a conflict.
pub async fn complete(
    store: &Store,
    id: &str,
    reference: &str,
    actor: &Actor,
    reason: &str,
) -> Result<FiatReturn, StoreError> {
    if reason.trim().is_empty() {
        return Err(StoreError::Invalid("reason: a reason is required".into()));
    }
    if reference.trim().is_empty() {
        return Err(StoreError::Invalid("reference: the return wire's reference is required".into()));
    }
    let mut tx = store.begin().await?;
    if let Some(organization) =
        mints::complete_return(&mut tx, id, reference, &actor.recorded(), reason).await?
    {
        let record = Record {
            actor,
            action: "mint.fiat_returned",
            target_kind: "mint",
            target_id: id,
            organization_id: Some(&organization),
            reason: Some(reason),
            request_id: None,
            detail: None,
        };
        audit::append(&mut tx, store.cipher().ok(), record).await?;
    }
    tx.commit().await?;
    match store.fiat_returns(false).await?.into_iter().find(|r| r.mint.id == id) {
        Some(r) if r.reference.as_deref() == Some(reference) => Ok(r),
        Some(r) => Err(StoreError::Duplicate(format!(
            "the fiat of mint {id} was returned already (reference {})",
            r.reference.unwrap_or_default()
        ))),
        None => Err(StoreError::NotFound(format!("a fiat return of mint {id}"))),
    }
}
