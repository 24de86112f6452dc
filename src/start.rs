//! A store made ready for a process to work on: stamped with the
//! environment it runs in, and its personal data unlocked under its key.

use crate::{
    environment::Environment,
    pii::{Cipher, Key, KeySource, PiiError},
    store::{Store, StoreError, environment, pii},
};

/// Stamps the store with `environment` unless it has one already;
/// the environment it has then. Two processes starting at once stamp
/// it once: the loser reads the winner's.
pub async fn stamp_environment(store: &Store, environment: Environment) -> Result<Environment, StoreError> {
    let mut tx = store.begin().await?;
    environment::stamp(&mut tx, environment).await?;
    tx.commit().await?;
    store.environment().await?.ok_or_else(|| StoreError::NotFound("the store's environment".into()))
}

/// `store` with its personal data readable and writable under the
/// key of `source`, in one transaction: a store that has no key yet
/// records it (a `Kept` one is generated and kept), a store with another
/// key refuses (`PiiError::WrongKey`), and every value still in
/// plaintext (written before encryption, or by migration 0010) is
/// sealed. Two processes starting at once agree on the first key.
pub async fn unlock_pii(store: &Store, source: KeySource) -> Result<Store, StoreError> {
    let mut tx = store.begin().await?;
    let recorded = match pii::recorded(&mut tx).await? {
        Some(recorded) => recorded,
        None => {
            let (key_id, kept) = match &source {
                KeySource::Given(key) => (key.id(), None),
                KeySource::Kept => {
                    let key = Key::generate();
                    (key.id(), Some(key.expose_base64()))
                }
            };
            pii::record_key(&mut tx, &key_id, kept.as_deref().map(String::as_str)).await?;
            pii::recorded(&mut tx).await?.ok_or_else(|| StoreError::NotFound("the store's pii key".into()))?
        }
    };
    let cipher = Cipher::new(&chosen_key(source, recorded)?);
    let sealed = pii::seal_plaintext(&mut tx, &cipher).await?;
    tx.commit().await?;
    tracing::info!(key_id = cipher.key_id(), sealed, "personal data is encrypted at rest");
    Ok(store.with_pii(cipher))
}

/// The key of `source` when it is the one the store recorded.
fn chosen_key(source: KeySource, recorded: pii::Recorded) -> Result<Key, StoreError> {
    Ok(match (source, recorded.kept) {
        (KeySource::Given(key), kept) if key.id() != recorded.key_id => {
            let hint =
                if kept.is_some() { " (this sandbox store keeps its own: unset the variable)" } else { "" };
            return Err(PiiError::WrongKey { stored: recorded.key_id, given: key.id(), hint }.into());
        }
        (KeySource::Given(key), _) => key,
        (KeySource::Kept, Some(kept)) => kept,
        (KeySource::Kept, None) => return Err(PiiError::NotKept(recorded.key_id).into()),
    })
}
