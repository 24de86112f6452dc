//! Compliance decisions on an identity, as an operator takes them through
//! the operator API or a command on the store: a lifecycle event
//! ([`super::change`]) or the fiat entitlement, each written with its trail
//! entry and its audit-log entry in one transaction.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Event, State, Status, SubStatus, Transition, change::Change, sub_status_str};
use crate::{
    audit::{self, Actor, Record},
    chain::Chain,
    config::Chains,
    store::{NewIdentity, Settlement, Store, StoreError, entitlement, identities},
    transfers::{TransferStatus, failure},
};

/// What compliance decides about an identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = IdentityDecision)]
pub enum Decision {
    /// Approval of an identity in onboarding: `ACTIVE`.
    Approve,
    /// KYC/KYB denial of an identity in onboarding: `REJECTED`.
    Reject,
    /// Suspension of an `ACTIVE` identity.
    Suspend,
    /// A `SUSPENDED` identity back to `ACTIVE`.
    Reinstate,
    /// A `SUSPENDED` identity back to `ACTIVE` with an open RFI.
    ReinstateWithRfi,
    /// Permanent closure of the identity and its accounts.
    Terminate,
    /// A request for information: `RFI_REQUIRED`.
    RfiRaise,
    /// The open RFI fulfilled.
    RfiFulfil,
    /// The fiat entitlement granted.
    FiatEnable,
    /// The fiat entitlement withdrawn.
    FiatDisable,
}

impl Decision {
    /// The lifecycle event, or `None` for the fiat entitlement.
    fn event(self) -> Option<Event> {
        Some(match self {
            Decision::Approve => Event::Approved,
            Decision::Reject => Event::Denied,
            Decision::Suspend => Event::Suspended,
            Decision::Reinstate => Event::Reinstated,
            Decision::ReinstateWithRfi => Event::ReinstatedWithRfi,
            Decision::Terminate => Event::Terminated,
            Decision::RfiRaise => Event::RfiRaised,
            Decision::RfiFulfil => Event::RfiFulfilled,
            Decision::FiatEnable | Decision::FiatDisable => return None,
        })
    }

    /// As the path names it: `approve`, `rfi_raise`, `fiat_enable`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::Suspend => "suspend",
            Decision::Reinstate => "reinstate",
            Decision::ReinstateWithRfi => "reinstate_with_rfi",
            Decision::Terminate => "terminate",
            Decision::RfiRaise => "rfi_raise",
            Decision::RfiFulfil => "rfi_fulfil",
            Decision::FiatEnable => "fiat_enable",
            Decision::FiatDisable => "fiat_disable",
        }
    }
}

impl FromStr for Decision {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        serde_json::from_value(serde_json::Value::String(text.into())).map_err(|_| {
            format!(
                "{text:?} is not a decision: approve, reject, suspend, reinstate, reinstate_with_rfi, terminate, \
                 rfi_raise, rfi_fulfil, fiat_enable or fiat_disable"
            )
        })
    }
}

/// What a decision changed.
#[derive(Debug)]
pub enum Decided {
    /// A lifecycle event applied.
    Changed(Transition),
    /// The fiat entitlement as it now is; `changed` false when it already was.
    Fiat { enabled: bool, changed: bool },
}

/// A decision's answer, through the operator API and on the command line.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = IdentityDecisionOutcome)]
pub struct Outcome {
    pub identity_id: String,
    pub decision: Decision,
    /// `false` when the fiat entitlement already was so: nothing was written.
    pub changed: bool,
    /// Before and after a lifecycle decision (absent for the fiat entitlement).
    pub previous_status: Option<Status>,
    pub previous_sub_status: Option<SubStatus>,
    pub status: Option<Status>,
    pub sub_status: Option<SubStatus>,
    /// The entitlement after a fiat decision.
    pub fiat_operations_enabled: Option<bool>,
}

impl Outcome {
    pub fn new(identity_id: &str, decision: Decision, decided: &Decided) -> Self {
        let mut outcome = Outcome {
            identity_id: identity_id.to_string(),
            decision,
            changed: true,
            previous_status: None,
            previous_sub_status: None,
            status: None,
            sub_status: None,
            fiat_operations_enabled: None,
        };
        match decided {
            Decided::Changed(t) => {
                outcome.previous_status = Some(t.previous_status());
                outcome.previous_sub_status = t.previous_sub_status();
                outcome.status = Some(t.status());
                outcome.sub_status = t.sub_status();
            }
            Decided::Fiat { enabled, changed } => {
                outcome.changed = *changed;
                outcome.fiat_operations_enabled = Some(*enabled);
            }
        }
        outcome
    }

    /// The line a command prints.
    pub fn line(&self) -> String {
        let id = &self.identity_id;
        if let Some(enabled) = self.fiat_operations_enabled {
            let what = if enabled { "enabled" } else { "disabled" };
            return match self.changed {
                true => format!("identity {id}: fiat operations {what}"),
                false => format!("identity {id}: fiat operations were already {what}; nothing recorded"),
            };
        }
        let side = |status: Option<Status>, sub: Option<SubStatus>| {
            format!("{}/{}", status.map(|s| s.to_string()).unwrap_or_default(), sub_status_str(sub))
        };
        format!(
            "identity {id}: {} -> {}",
            side(self.previous_status, self.previous_sub_status),
            side(self.status, self.sub_status)
        )
    }
}

/// How the identity trail names a decider: the audit log's actor, with the
/// operator's name or the `--by` beside it.
pub fn trail_actor(actor: &Actor) -> String {
    match actor.name() {
        Some(name) => format!("{actor} ({name})"),
        None => actor.to_string(),
    }
}

/// Takes `decision` on the identity as `actor`, with `reason` (required:
/// it is the event's `status_reason`). Transfers not yet handed to a chain
/// fail when the identity can no longer transact, as `chains` settle them.
pub async fn decide(
    store: &Store,
    chains: &Chains,
    identity: (&str, &str),
    decision: Decision,
    actor: &Actor,
    reason: &str,
) -> Result<Decided, StoreError> {
    if reason.trim().is_empty() {
        return Err(StoreError::Invalid("reason: a reason is required".into()));
    }
    let (organization, identity_id) = identity;
    let trail = trail_actor(actor);
    let Some(event) = decision.event() else {
        return fiat(store, identity, decision == Decision::FiatEnable, actor, &trail, reason).await;
    };
    let change = Change {
        organization,
        identity_id,
        event,
        actor: &trail,
        reason: Some(reason),
        decider: Some(actor),
    };
    let unsent = |chain: Chain| not_active(chains, chain);
    Ok(Decided::Changed(super::change::change(store, &change, &unsent).await?))
}

async fn fiat(
    store: &Store,
    (organization, identity_id): (&str, &str),
    enabled: bool,
    actor: &Actor,
    trail: &str,
    reason: &str,
) -> Result<Decided, StoreError> {
    let mut tx = store.begin().await?;
    let written = entitlement::set_fiat(&mut tx, organization, identity_id, enabled, trail, reason).await?;
    let changed = written.is_some();
    if let Some(trail_id) = written {
        let record = Record {
            actor,
            action: if enabled { "identity.fiat_enabled" } else { "identity.fiat_disabled" },
            target_kind: "identity",
            target_id: identity_id,
            organization_id: Some(organization),
            reason: Some(reason),
            request_id: None,
            detail: None,
        };
        let seq = audit::append(&mut tx, store.cipher().ok(), record).await?;
        identities::link(&mut tx, &trail_id, seq).await?;
    }
    tx.commit().await?;
    Ok(Decided::Fiat { enabled, changed })
}

/// The state an identity imported in `status` starts in.
pub fn imported_state(status: Status) -> Result<State, String> {
    match status {
        Status::Active => Ok(State::Active { rfi: false }),
        Status::Suspended => Ok(State::Suspended { rfi: false }),
        Status::PendingOnboarding => Ok(State::CREATED),
        other => Err(format!("an identity is imported ACTIVE, SUSPENDED or PENDING_ONBOARDING, not {other}")),
    }
}

/// Registers an identity onboarded elsewhere, in the status it has there
/// (`new.state`), as `actor` with `reason`: a compliance decision when it
/// can transact or is suspended, audited as `identity.imported` with the
/// registration in one transaction.
pub async fn import(store: &Store, new: &NewIdentity, actor: &Actor, reason: &str) -> Result<(), StoreError> {
    if reason.trim().is_empty() {
        return Err(StoreError::Invalid("reason: a reason is required".into()));
    }
    let mut tx = store.begin().await?;
    let trail = store.import_identity_in(&mut tx, new).await?;
    let record = Record {
        actor,
        action: "identity.imported",
        target_kind: "identity",
        target_id: &new.id,
        organization_id: Some(&new.organization),
        reason: Some(reason),
        request_id: None,
        detail: None,
    };
    let seq = audit::append(&mut tx, store.cipher().ok(), record).await?;
    identities::link(&mut tx, &trail, seq).await?;
    tx.commit().await?;
    Ok(())
}

/// The failure of a transfer whose account can no longer send.
fn not_active(chains: &Chains, chain: Chain) -> Settlement {
    let config = chains.get(chain).ok();
    Settlement {
        status: TransferStatus::Failed,
        transaction_hash: None,
        failure: Some(failure(
            "ACCOUNT_NOT_ACTIVE",
            "the account's identity can no longer transact; the transfer was not submitted",
        )),
        fees: Vec::new(),
        native_symbol: config.map(|c| c.native.symbol.clone()).unwrap_or_default(),
        native_decimals: config.map_or(0, |c| c.native.decimals),
        usd_micros_per_coin: config.and_then(|c| c.transfers.native_usd_micros()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_named_as_the_path_names_them() {
        for (text, decision, event) in [
            ("approve", Decision::Approve, Some(Event::Approved)),
            ("reject", Decision::Reject, Some(Event::Denied)),
            ("reinstate_with_rfi", Decision::ReinstateWithRfi, Some(Event::ReinstatedWithRfi)),
            ("rfi_fulfil", Decision::RfiFulfil, Some(Event::RfiFulfilled)),
            ("fiat_disable", Decision::FiatDisable, None),
        ] {
            assert_eq!(text.parse::<Decision>().unwrap(), decision);
            assert_eq!(decision.as_str(), text);
            assert_eq!(decision.event(), event);
        }
        assert!("approved".parse::<Decision>().unwrap_err().contains("approve, reject"));
    }

    #[test]
    fn the_trail_names_the_decider_beside_the_actor() {
        let operator = Actor::Operator { id: "op_1".into(), name: "Ann".into() };
        assert_eq!(trail_actor(&operator), "operator:op_1 (Ann)");
        let local = Actor::Local { os_user: "ci".into(), by: Some("bo".into()) };
        assert_eq!(trail_actor(&local), "local:ci (bo)");
        assert_eq!(trail_actor(&Actor::BreakGlass { id: "root".into(), name: None }), "break-glass:root");
    }
}
