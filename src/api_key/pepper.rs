//! The key pepper: operator and API keys are stored as HMAC-SHA-256, under
//! a secret the store never holds (the file `CUSTODY_INDEXER_KEY_PEPPER_FILE`
//! names), of the key's SHA-256: `hmac1:` and 64 hex digits. Whoever can
//! write the database but not read that file cannot make a row that
//! authenticates: a row holding a plain SHA-256 is no key to a process
//! that has the pepper.
//!
//! A store's keys are re-keyed once, at the first start of `run` or
//! `serve` with the pepper ([`adopt`]): every plain hash becomes its keyed
//! form (the key's SHA-256 is what the row kept), and the audit log
//! records `key_hashes.peppered` with the pepper's id. From then on no
//! plain hash is ever re-keyed (a row written with SQL later stays dead),
//! and a process with no pepper, or another one, is refused. `production`
//! requires the pepper; a sandbox without one keeps plain hashes.
//!
//! The pepper is the process's, read once from the environment.

pub use crate::store::keyring::{Derived, KEYED, PEPPER_FILE_ENV, Pepper, PepperError, process};
use crate::{
    audit::{self, Actor, Detail, Record},
    store::{Store, StoreError, audit as log_rows, key_hashes},
};

/// The audit action that records the re-keying.
pub const PEPPERED: &str = "key_hashes.peppered";

/// What became of a store's key hashes at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peppering {
    /// No pepper, none recorded: plain hashes.
    Plain,
    /// Keyed under this process's pepper already.
    Keyed,
    /// Re-keyed now: this many rows.
    Rekeyed(usize),
}

/// Readies `store` for a command that makes or checks keys: the
/// principals it held before its log recorded them adopted (see
/// [`crate::audit::adopt`]: a key made first would close that for good),
/// and this process's pepper adopted ([`adopt`]); a `production` store
/// without one is refused (its keys would be stored in the plain).
pub async fn for_keys(store: &Store) -> Result<Peppering, StoreError> {
    let pepper = process().map_err(|e| StoreError::Invalid(e.to_string()))?;
    if pepper.is_none() && store.environment().await? == Some(crate::environment::Environment::Production) {
        return Err(StoreError::Invalid(format!(
            "a production store's keys are hashed under a pepper it never holds: set {PEPPER_FILE_ENV} to its file"
        )));
    }
    crate::audit::adopt::adopt(store).await?;
    let peppering = adopt(store, pepper).await?;
    crate::audit::authenticate::adopt(store, None).await?;
    Ok(peppering)
}

/// Brings `store`'s key hashes under `pepper` (see the module's text):
/// refused when the store's keys are keyed under another pepper, or under
/// one this process lacks, or when the log's records of it disagree.
pub async fn adopt(store: &Store, pepper: Option<&Pepper>) -> Result<Peppering, StoreError> {
    let mut tx = store.begin().await?;
    match (pepper, recorded(&mut tx).await?) {
        (None, None) => Ok(Peppering::Plain),
        (None, Some(id)) => Err(StoreError::Invalid(format!(
            "the store's keys are hashed under a pepper ({id}): set {PEPPER_FILE_ENV} to its file"
        ))),
        (Some(pepper), Some(id)) if pepper.id() != id => Err(StoreError::Invalid(format!(
            "the store's keys are hashed under the pepper {id}, and {PEPPER_FILE_ENV} holds {}: no key would \
             authenticate",
            pepper.id()
        ))),
        (Some(_), Some(_)) => Ok(Peppering::Keyed),
        (Some(pepper), None) => {
            // The keys' rows first, then the log's head, as every change of
            // a key takes them.
            let plain = key_hashes::plain(&mut tx).await?;
            for row in &plain {
                // A hash that is no SHA-256 (written with SQL) is left as
                // it is: it authenticates nothing, and is never keyed.
                if let Some(keyed) = pepper.keyed(&row.hash) {
                    key_hashes::set(&mut tx, row, &keyed).await?;
                }
            }
            audit::lock(&mut tx).await?;
            if recorded(&mut tx).await?.is_some() {
                // Another process keyed them meanwhile, under its pepper:
                // judged again from its record.
                drop(tx);
                return Box::pin(adopt(store, Some(pepper))).await;
            }
            let detail = Detail { pepper_id: Some(pepper.id()), ..Detail::default() };
            let record = Record {
                actor: &Actor::System,
                action: PEPPERED,
                target_kind: "store",
                target_id: "key_hashes",
                organization_id: None,
                reason: None,
                request_id: None,
                detail: Some(detail),
            };
            audit::append(&mut tx, None, record).await?;
            tx.commit().await?;
            Ok(Peppering::Rekeyed(plain.len()))
        }
    }
}

/// The pepper the log records the keys are hashed under: every record
/// must name the same one (a record appended later with another, or with
/// none, is an alteration, refused rather than followed).
async fn recorded(tx: &mut crate::store::Tx) -> Result<Option<String>, StoreError> {
    let entries = log_rows::all_of(tx, PEPPERED).await?;
    let ids: Vec<Option<String>> = entries
        .iter()
        .map(|e| e.detail.as_deref().and_then(Detail::parse).and_then(|d| d.pepper_id))
        .collect();
    match ids.first() {
        None => Ok(None),
        Some(Some(first)) if ids.iter().all(|id| id.as_deref() == Some(first)) => Ok(Some(first.clone())),
        Some(_) => Err(StoreError::Corrupt(format!(
            "the audit log's {PEPPERED} records disagree (entries {}): the log was written outside the service",
            entries.iter().map(|e| e.seq.to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}
