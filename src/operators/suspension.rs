//! Taking an admin away while two admins hold the platform, pure. With
//! three or more enabled, enrolled admins, disabling an admin or removing
//! its `admin` role applies at once. With two, one admin alone (or whoever
//! holds that admin's key) would be left holding the platform, so the
//! target is *suspended* at once instead (its keys and sessions stop, it
//! decides nothing) by a change of kind `operator.disable` or
//! `operator.demote`: another admin approves it as any change, or its
//! proposer completes it with `--break-glass` (the store, the pepper and
//! their own key: the one break-glass step that completes its actor's own
//! proposal). Undecided for [`LAPSES_AFTER`] it lapses, and the target acts
//! again; it alarms throughout (the condition [`CONDITION`]).
//!
//! The rules here are pure but for [`of`], which reads a suspension's row.
//! Taking a money role's last holder away is never blocked: it is
//! answered with a warning ([`last_holder`]) and logged.

use std::time::Duration;

use super::{
    resource::{Change, ChangeStatus, Role},
    rules::{self, Refused},
};
use crate::{
    environment::Environment,
    store::{Store, StoreError, now_micros},
};

/// How long a suspension waits to be completed before it lapses: a
/// change's time.
pub const LAPSES_AFTER: Duration = rules::CHANGE_VALID;

/// The condition in force while an operator is suspended (its subject the
/// operator's id).
pub const CONDITION: &str = "operator_suspended";

/// How taking an admin's power away goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taking {
    /// Applied in the request's transaction.
    AtOnce,
    /// The target suspended, the change waiting for its completion.
    Suspend,
}

/// How disabling an operator, or removing roles from it, goes in
/// `environment`: `takes_admin` when the target is an enabled, enrolled
/// admin that the change leaves without the `admin` role, `admins` the
/// enabled, enrolled admins not suspended (the target and the actor
/// among them).
pub fn taking(environment: Environment, takes_admin: bool, admins: usize) -> Taking {
    match environment {
        Environment::Production if takes_admin && admins <= 2 => Taking::Suspend,
        _ => Taking::AtOnce,
    }
}

/// When a suspension made at `at` lapses (microseconds).
pub fn lapses_at(at: i64) -> i64 {
    at.saturating_add(LAPSES_AFTER.as_micros() as i64)
}

/// The suspension of operator `id` in force now, by its change's row (the
/// log holds it too, see [`crate::audit::withdrawn`]).
pub async fn of(store: &Store, id: &str) -> Result<Option<Change>, StoreError> {
    let since = now_micros().saturating_sub(LAPSES_AFTER.as_micros() as i64);
    store.suspension_of(id, since).await
}

/// Whether operator `actor` may complete `change` by breaking glass, at
/// `now`: a suspension it proposed, pending and in time.
pub fn may_complete(actor: &str, change: &Change, now: i64) -> Result<(), Refused> {
    if !change.kind.suspends() || change.proposed_by != actor {
        return Err(Refused::NotOwnSuspension(change.target.clone()));
    }
    if change.status != ChangeStatus::Pending {
        return Err(Refused::Decided { id: change.id.clone(), status: change.status.as_str() });
    }
    if rules::expired(change.created_at.timestamp_micros(), now) {
        return Err(Refused::Decided { id: change.id.clone(), status: ChangeStatus::Expired.as_str() });
    }
    Ok(())
}

/// The warning when `target`, taken away from `role`, was its last enabled
/// holder (`left` the holders after the change): for the roles that move
/// money, which nobody could then exercise until another is granted it.
pub fn last_holder(target: &str, role: Role, left: i64) -> Option<String> {
    let does = match role {
        Role::Treasury => "record wires, approve mints or answer payouts",
        Role::Compliance => "decide identities",
        Role::Admin => return None,
    };
    (left == 0).then(|| {
        format!(
            "operator {target} was the last enabled holder of the `{}` role: nobody can {does} until \
             another operator is granted it (a change another admin approves)",
            role.as_str()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::resource::{ChangeKind, Proposal};

    #[test]
    fn an_admin_taken_from_two_is_suspended_and_from_three_at_once() {
        use Environment::*;
        // (environment, the target an enrolled admin losing `admin`, admins) → taking
        let table = [
            (Production, true, 2, Taking::Suspend),
            (Production, true, 1, Taking::Suspend),
            (Production, true, 3, Taking::AtOnce),
            (Production, true, 4, Taking::AtOnce),
            // A non-admin, an admin not enrolled, a role removal that
            // leaves `admin`: at once.
            (Production, false, 2, Taking::AtOnce),
            // A sandbox's admin applies everything alone.
            (Sandbox, true, 2, Taking::AtOnce),
        ];
        for (environment, takes_admin, admins, expected) in table {
            assert_eq!(
                taking(environment, takes_admin, admins),
                expected,
                "{environment:?} {takes_admin} {admins}"
            );
        }
    }

    fn change(kind: ChangeKind, status: ChangeStatus, by: &str, at: i64) -> Change {
        Change {
            id: "chg_1".into(),
            kind,
            status,
            proposed_by: by.into(),
            target: "op_bea".into(),
            created_at: chrono::DateTime::from_timestamp_micros(at).unwrap(),
            decided_by: None,
            decided_at: None,
            proposal: Proposal::default(),
            reason: None,
            decision_reason: None,
        }
    }

    #[test]
    fn only_its_proposer_completes_a_suspension_in_time() {
        use ChangeKind::*;
        use ChangeStatus::*;
        let at = 1_700_000_000_000_000;
        let lapse = lapses_at(at);
        let ok = |c: &Change, now| may_complete("op_ada", c, now).is_ok();
        assert!(ok(&change(Disable, Pending, "op_ada", at), at + 1));
        assert!(ok(&change(Demote, Pending, "op_ada", at), lapse - 1));
        assert!(!ok(&change(Disable, Pending, "op_ada", at), lapse), "lapsed");
        assert!(!ok(&change(Disable, Pending, "op_cid", at), at + 1), "another's proposal");
        assert!(!ok(&change(Roles, Pending, "op_ada", at), at + 1), "a grant is approved, never completed");
        assert!(!ok(&change(Enable, Pending, "op_ada", at), at + 1));
        for status in [Applied, Refused, Expired] {
            assert!(!ok(&change(Disable, status, "op_ada", at), at + 1), "{status:?}");
        }
        let refusal = may_complete("op_cid", &change(Disable, Pending, "op_ada", at), at).unwrap_err();
        assert!(refusal.to_string().contains("op_bea"), "{refusal}");
    }

    #[test]
    fn the_last_holder_of_a_money_role_is_warned_of() {
        let warned = |role, left| last_holder("op_tom", role, left);
        assert!(warned(Role::Treasury, 0).unwrap().contains("`treasury` role"));
        assert!(warned(Role::Compliance, 0).unwrap().contains("decide identities"));
        assert_eq!(warned(Role::Treasury, 1), None);
        assert_eq!(warned(Role::Compliance, 2), None);
        // The last admin is refused elsewhere (`keeps_an_admin`), never warned of.
        assert_eq!(warned(Role::Admin, 0), None);
    }
}
