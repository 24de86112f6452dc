//! An identity registered by its client: idempotent by its `request_id`,
//! within the organization's limit of identities, in one transaction.

use crate::store::{NewIdentity, Registered, Store, StoreError, identities::Registering};

/// Registers an identity. Idempotent by `(organization, request_id)`: the
/// same request again answers the identity it created; the same
/// `request_id` with another type or label is a conflict. Refused when the
/// organization holds its limit of identities (a replay still answers).
pub async fn create_identity(store: &Store, new: &NewIdentity) -> Result<Registered, StoreError> {
    let mut tx = store.begin().await?;
    match store.register_identity_in(&mut tx, new).await? {
        Registering::Inserted => {
            tx.commit().await?;
            Ok(Registered::New(store.identity(&new.organization, &new.id).await?))
        }
        Registering::Replay(found) => {
            drop(tx);
            let found = store.identity(&new.organization, &found).await?;
            if found.kind != new.kind || found.label != new.label {
                return Err(StoreError::Duplicate(format!(
                    "request_id {} was already used by identity {} with a different request",
                    new.request_id.as_deref().unwrap_or_default(),
                    found.id
                )));
            }
            Ok(Registered::Existing(found))
        }
        Registering::Raced => {
            drop(tx);
            // A concurrent request with this request_id, or the id, was first.
            match &new.request_id {
                Some(_) => Box::pin(create_identity(store, new)).await,
                None => Err(StoreError::taken(
                    format!("identity:{}", new.id),
                    format!("identity {} already exists", new.id),
                )),
            }
        }
    }
}
