//! An identity's change written: every lifecycle event goes through
//! [`super::apply`] inside one transaction that also writes the derived
//! status of the identity's accounts, its `identity_status_update` (when
//! the status or sub-status changed), the audit trail entry and, when the
//! identity can no longer transact, the failure of its accounts' transfers
//! not yet handed to a chain (by the transfers wing).

use serde_json::Value;

use super::{Event, SubStatus, Transition, apply, compliance, resource::status_update};
use crate::{
    audit::{self, Actor, Record},
    chain::Chain,
    pii::{Cipher, PiiError},
    store::{
        Settlement, Store, StoreError, Tx,
        identities::{audit, link, lock},
        identity_changes::{self as rows, Submission},
        now_micros,
        verification::current_check,
    },
};

/// A UTC day, in microseconds.
const DAY_MICROS: i64 = 86_400_000_000;

/// One lifecycle event to apply, with who and why.
pub struct Change<'a> {
    pub organization: &'a str,
    pub identity_id: &'a str,
    pub event: Event,
    /// `operator:NAME`, `provider:NAME` or `client`.
    pub actor: &'a str,
    /// Recorded in the audit trail and sent as the event's `status_reason`.
    pub reason: Option<&'a str>,
    /// Who decided, for the audit log: an operator, a provider, the
    /// service; `None` for a client's own submission.
    pub decider: Option<&'a Actor>,
}

impl Change<'_> {
    fn identity(&self) -> (&str, &str) {
        (self.organization, self.identity_id)
    }
}

/// How a transfer not yet handed to a chain is failed when its identity can
/// no longer transact: the settlement for its chain.
pub type UnsentFailure<'a> = &'a (dyn Fn(Chain) -> Settlement + Sync);

/// Applies one lifecycle event (see the module doc). A refused event is
/// [`StoreError::Refused`] naming the state and the reason; nothing is
/// written. `unsent` fails the accounts' transfers not yet handed to a
/// chain when the identity can no longer transact.
pub async fn change(
    store: &Store,
    change: &Change<'_>,
    unsent: UnsentFailure<'_>,
) -> Result<Transition, StoreError> {
    let mut tx = store.begin().await?;
    let transition = apply_in(&mut tx, store.cipher().ok(), change, Some(unsent)).await?;
    tx.commit().await?;
    Ok(transition)
}

/// Records KYC/KYB data and starts the compliance checks, in one
/// transaction: the data is kept only if the lifecycle accepts it, and
/// only while the identity's submissions of the day (UTC) are fewer than
/// [`compliance::MAX_SUBMISSIONS_PER_DAY`].
pub async fn submit(
    store: &Store,
    organization: &str,
    identity_id: &str,
    data: &Value,
) -> Result<Transition, StoreError> {
    let cipher = store.cipher()?;
    let mut tx = store.begin().await?;
    let change = Change {
        organization,
        identity_id,
        event: Event::ComplianceSubmitted,
        actor: "client",
        reason: None,
        decider: None,
    };
    // Counted under the identity's row lock, before anything changes:
    // submissions racing for the day's last one are judged one at a time.
    lock(&mut tx, organization, identity_id).await?;
    let now = now_micros();
    let day = now - now.rem_euclid(DAY_MICROS);
    if !compliance::may_submit(rows::submissions_since(&mut tx, change.identity(), day).await?) {
        return Err(StoreError::TooMany {
            message: format!(
                "identity {identity_id} had {} compliance submissions accepted today (UTC), the most a day \
                 takes; submit again after midnight UTC",
                compliance::MAX_SUBMISSIONS_PER_DAY
            ),
            retry_after: ((day + DAY_MICROS - now + 999_999) / 1_000_000).max(1) as u64,
        });
    }
    let transition = apply_in(&mut tx, Some(cipher), &change, None).await?;
    let kind = if data.get("kyc").is_some() { "KYC" } else { "KYB" };
    let text = zeroize::Zeroizing::new(data.to_string());
    let submission = Submission { organization, identity_id, kind, data: &text };
    rows::insert_submission(&mut tx, cipher, &submission, now).await?;
    tx.commit().await?;
    Ok(transition)
}

/// [`change`] inside `tx`. `cipher` opens the label an
/// `identity_status_update` carries; without it such a change is refused.
pub async fn apply_in(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    change: &Change<'_>,
    unsent: Option<UnsentFailure<'_>>,
) -> Result<Transition, StoreError> {
    let locked = lock(tx, change.organization, change.identity_id).await?;
    let state = locked.state;
    let transition = apply(locked.kind, state, change.event)
        .map_err(|refusal| StoreError::Refused(format!("identity {}: {refusal}", change.identity_id)))?;
    let now = now_micros();
    let next = transition.next;
    rows::set_state(tx, change.identity(), next, now).await?;
    if transition.account_status() != transition.previous_account_status() {
        rows::set_accounts_status(tx, change.identity(), transition.account_status()).await?;
    }
    let accounts = rows::account_ids(tx, change.identity()).await?;
    if transition.emits_event() {
        let mut identity = locked.identity(cipher.ok_or(PiiError::Locked)?)?;
        identity.status = transition.status();
        identity.sub_status = transition.sub_status();
        let check = match transition.sub_status() {
            Some(SubStatus::IdvRequested | SubStatus::IdvInProgress | SubStatus::IdvExpired) => {
                current_check(tx, change.organization, change.identity_id).await?
            }
            _ => None,
        };
        let data = status_update(&identity, &transition, &accounts, change.reason, check.as_deref());
        rows::announce(tx, change.identity(), &data, now).await?;
    }
    let event = format!("{:?}", change.event);
    let (organization, identity_id) = change.identity();
    let trail =
        audit(tx, organization, identity_id, &event, change.actor, change.reason, Some(state), next, now)
            .await?;
    if let Some(decider) = change.decider {
        let action = format!("identity.{}", snake(&event));
        let record = Record {
            actor: decider,
            action: &action,
            target_kind: "identity",
            target_id: identity_id,
            organization_id: Some(organization),
            reason: change.reason,
            request_id: None,
            detail: None,
        };
        let seq = audit::append(tx, cipher, record).await?;
        link(tx, &trail, seq).await?;
    }
    if !next.can_transact()
        && let Some(unsent) = unsent
    {
        fail_unsent(tx, change, unsent).await?;
    }
    Ok(transition)
}

/// `RfiRaised` as `rfi_raised` (a trail's event as the audit log's action
/// names it; `FIAT_ENABLED` as `fiat_enabled`).
pub fn snake(name: &str) -> String {
    if name.contains('_') || name.bytes().all(|b| !b.is_ascii_lowercase()) {
        return name.to_lowercase();
    }
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Fails, with their holds released and their events, the identity's
/// accounts' transfers still `ACCEPTED` with no transaction recorded: none
/// has reached a chain, and none may now. Each is judged by the transfers
/// wing under its row lock, as a sender recording a transaction judges it,
/// so a transfer a sender recorded first is left to finish.
async fn fail_unsent(tx: &mut Tx, change: &Change<'_>, unsent: UnsentFailure<'_>) -> Result<(), StoreError> {
    for (id, chain) in rows::accepted_transfers(tx, change.identity()).await? {
        if crate::transfers::fail_if_unsent(tx, &id, &unsent(chain)).await? {
            tracing::warn!(transfer = %id, identity = %change.identity_id, "transfer failed: its account is no longer active");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn events_are_named_in_snake_case() {
        for (event, name) in [
            ("Approved", "approved"),
            ("RfiRaised", "rfi_raised"),
            ("IdvExpired", "idv_expired"),
            ("FIAT_ENABLED", "fiat_enabled"),
        ] {
            assert_eq!(super::snake(event), name);
        }
    }
}
