//! The platform keys held to the addresses first seen. The first time a
//! service sees the sponsor's, the omnibus wallet's, the settlement
//! wallet's or the issuer's key on a chain family, its address is recorded
//! in the store; from then on a signer answering another address for it,
//! or holding no such key any more (a token or a KMS alias replaced, keys
//! made anew in an empty token), stops `run` and `serve` before anything
//! is sent to or from it. Only `keys init --accept-new-keys`, an admin's
//! audited decision in production, records a new address.

use super::{KeyRef, Signer, init::PLATFORM};
use crate::{
    audit::{self, Actor, Record},
    chain::Family,
    family::keys::key_address,
    store::{Store, StoreError},
};

/// What the recorded address and the signer's say of one platform key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// Neither knows the key: nothing to hold.
    Unknown,
    /// Seen for the first time: to be recorded.
    First,
    Same,
    /// The signer answers `now` where `recorded` was.
    Changed {
        recorded: String,
        now: String,
    },
    /// The signer holds no key where `recorded` was.
    Gone {
        recorded: String,
    },
}

/// The pure rule: `recorded`, the store's address; `held`, the signer's
/// (`None` when it holds no such key).
pub fn judge(recorded: Option<&str>, held: Option<&str>) -> Pin {
    match (recorded, held) {
        (None, None) => Pin::Unknown,
        (None, Some(_)) => Pin::First,
        (Some(recorded), Some(now)) if recorded == now => Pin::Same,
        (Some(recorded), Some(now)) => Pin::Changed { recorded: recorded.into(), now: now.into() },
        (Some(recorded), None) => Pin::Gone { recorded: recorded.into() },
    }
}

/// Holds `signer`'s platform keys on `families` to the recorded addresses,
/// recording those seen for the first time. With `accept` (an actor's
/// audited decision), a changed key's new address is recorded instead of
/// refused. Never makes a key: one the signer lacks is only compared.
pub async fn check(
    store: &Store,
    signer: &dyn Signer,
    families: &[Family],
    accept: Option<&Actor>,
) -> anyhow::Result<()> {
    for family in [Family::Evm, Family::Solana].into_iter().filter(|f| families.contains(f)) {
        let name = crate::family::rules::name(family);
        for (role, key) in PLATFORM {
            let held = match signer.holds(key, family) {
                Ok(true) => Some(key_address(signer, family, key)?),
                Ok(false) => None,
                // A signer that does not answer now is held to the record
                // at the next start; the senders wait for it meanwhile.
                Err(error) if error.is_unreachable() => {
                    tracing::warn!(%error, role, family = name, "signer: the platform key could not be checked");
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            let recorded = store.platform_key(role, name).await?;
            match (judge(recorded.as_deref(), held.as_deref()), accept) {
                (Pin::Unknown | Pin::Same, _) => {}
                (Pin::First, _) => {
                    let held = held.unwrap_or_default();
                    // Another instance may have recorded one first.
                    let recorded = record_platform_key(store, role, name, &held).await?;
                    anyhow::ensure!(
                        recorded == held,
                        "the {role} key on {name} chains was just recorded as {recorded} by another process, \
                         and this signer answers {held}: two signers are configured for one store"
                    );
                }
                (Pin::Changed { now, .. }, Some(actor)) => {
                    replace(store, actor, (role, key, family), &now).await?
                }
                (Pin::Changed { recorded, now }, None) => anyhow::bail!(
                    "the {role} key on {name} chains was {recorded}, and the signer now answers {now}: a token or \
                     KMS alias was replaced, or the keys were made anew. Nothing is sent until this is decided: \
                     keys init --accept-new-keys records the new key (its funds stay at the old address)"
                ),
                (Pin::Gone { recorded }, _) => anyhow::bail!(
                    "the {role} key on {name} chains was {recorded}, and the signer holds no such key: the token or \
                     KMS account is not the one it was. Nothing is sent until it is back"
                ),
            }
        }
    }
    Ok(())
}

/// Records `now` for the key, with `actor`'s audit entry, in one
/// transaction.
async fn replace(
    store: &Store,
    actor: &Actor,
    (role, key, family): (&str, KeyRef, Family),
    now: &str,
) -> anyhow::Result<()> {
    let label = super::describe(key, family);
    let mut tx = store.begin().await?;
    Store::replace_platform_key(&mut tx, role, crate::family::rules::name(family), now).await?;
    audit::append(&mut tx, None, entry(actor, "key.accepted", &label)).await?;
    tx.commit().await?;
    Ok(())
}

/// Records `address` for the platform key `role` on `family` unless one is
/// recorded already; answers the recorded address.
async fn record_platform_key(
    store: &Store,
    role: &str,
    family: &str,
    address: &str,
) -> Result<String, StoreError> {
    let mut tx = store.begin().await?;
    Store::insert_platform_key(&mut tx, role, family, address).await?;
    tx.commit().await?;
    store.platform_key(role, family).await?.ok_or_else(|| StoreError::NotFound(format!("{role} {family}")))
}

/// The audit entry of `actor`'s `action` on the key labelled `label`
/// (`key.made`, `key.imported`, `key.accepted`).
pub fn entry<'a>(actor: &'a Actor, action: &'a str, label: &'a str) -> Record<'a> {
    Record {
        actor,
        action,
        target_kind: "key",
        target_id: label,
        organization_id: None,
        reason: None,
        request_id: None,
        detail: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platform_key_is_held_to_the_address_first_seen() {
        for (recorded, held, pin) in [
            (None, None, Pin::Unknown),
            (None, Some("0xA"), Pin::First),
            (Some("0xA"), Some("0xA"), Pin::Same),
            (Some("0xA"), Some("0xB"), Pin::Changed { recorded: "0xA".into(), now: "0xB".into() }),
            (Some("0xA"), None, Pin::Gone { recorded: "0xA".into() }),
        ] {
            assert_eq!(judge(recorded, held), pin, "{recorded:?} {held:?}");
        }
    }
}
