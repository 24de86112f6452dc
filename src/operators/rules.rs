//! Who may decide what, pure: the role each action needs, the four-eyes
//! rule (a second pair of eyes is another authenticated operator, never a
//! break-glass action), and the rules operators keep about operators.

use std::time::Duration;

use super::resource::{Change, ChangeKind, ChangeStatus, Operator, Role};
use crate::{audit::Actor, environment::Environment};

/// How long a proposed change of operators waits for another admin.
pub const CHANGE_VALID: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many enrolled admins end genesis.
pub const GENESIS_ADMINS: usize = 2;

/// What an operator does, by the role it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Approve, reject, suspend, reinstate, terminate an identity; its RFIs;
    /// an imported status other than onboarding.
    IdentityDecision,
    /// Enable or disable an identity's fiat operations.
    FiatEntitlement,
    /// Record or import a wire; approve or refuse its mint; return dollars.
    Wire,
    /// Answer for a virtual account (opened, refused).
    VirtualAccount,
    /// Record a payout's answer, or confirm another operator's.
    Payout,
    /// Send an off-ramp's stablecoin back.
    Refund,
    /// Create operators, set their roles, disable them, manage their keys.
    Operators,
    /// Organizations, and API keys on a tenant's behalf.
    Tenants,
    /// Read the audit log.
    Audit,
    /// Make the platform's keys, or move keys into a token (`keys …`).
    Keys,
    /// Read what the ledger and the chain's providers say of each other:
    /// reconciliation, and the providers' disputes.
    Reconciliation,
    /// Ask for a reconciliation repair, approve or refuse another's.
    Repair,
    /// Record a chain recovered after a restore (`transfers recover`).
    Recovery,
}

impl Action {
    /// The roles that may take the action (any one of them).
    pub fn roles(self) -> &'static [Role] {
        match self {
            Action::IdentityDecision | Action::FiatEntitlement => &[Role::Compliance],
            Action::Wire | Action::VirtualAccount | Action::Payout | Action::Refund => &[Role::Treasury],
            Action::Operators | Action::Tenants | Action::Keys => &[Role::Admin],
            Action::Audit => &[Role::Admin, Role::Compliance],
            Action::Reconciliation => &[Role::Compliance, Role::Treasury, Role::Admin],
            Action::Repair | Action::Recovery => &[Role::Treasury],
        }
    }
}

/// Why an operator may not take an action: its text names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("this needs the {needs} role, which operator {operator} does not hold")]
    Role { needs: String, operator: String },
    #[error("four eyes: {0} decided the first step, so another operator must decide this one")]
    SameOperator(String),
    #[error(
        "four eyes: a break-glass action never counts as the second pair of eyes; a second operator must decide"
    )]
    BreakGlass,
    #[error("an admin cannot change their own roles: another admin must")]
    OwnRoles,
    #[error("an operator cannot disable themselves: another admin must")]
    OwnDisable,
    #[error("the store has an admin already: operators are created through the service by an admin")]
    AdminExists,
    #[error("an operator needs at least one role")]
    NoRole,
    #[error("this would leave no enabled admin with a live key: create or enable another admin first")]
    LastAdmin,
    #[error("operator {0} is disabled or no longer an admin")]
    NoLongerAdmin(String),
    #[error(
        "an admin has existed on this store: operators are added through the service, by admins \
         (the production bootstrap runs once)"
    )]
    AdminExisted,
    #[error("the production bootstrap makes one operator with the `admin` role only")]
    BootstrapAdminOnly,
    #[error(
        "genesis: until two admins have enrolled, an admin adds only admins (alone) and no other role \
         is granted; enrol a second admin first"
    )]
    Genesis,
    #[error("four eyes: an admin cannot decide their own proposal, another admin must")]
    OwnChange,
    #[error("four eyes: the operator a change is about cannot decide it, another admin must")]
    ChangeTarget,
    #[error(
        "in production an operator's keys are made by the operator only: the console's keys page, or \
         POST /operator/v1/me/keys"
    )]
    KeysByOwner,
    #[error(
        "production invitations are mailed to their owner only: set CUSTODY_INDEXER_SMTP_URL, \
         CUSTODY_INDEXER_EMAIL_FROM and CUSTODY_INDEXER_PUBLIC_URL (see docs/operations.md)"
    )]
    NoMail,
    #[error("the change's proposer {0} is no longer an enabled admin: it is not approved (refuse it)")]
    ProposerGone(String),
    #[error(
        "change {0} is not the change its proposal recorded in the audit log: it was written outside the service"
    )]
    Unrecorded(String),
    #[error("operator {0}'s roles changed since the change was proposed: propose it again")]
    Stale(String),
    #[error("expires_in_days: {0} is not a number of days from 1 to 365")]
    KeyDays(u32),
    #[error("a second factor is required: enrol with one (in production every operator has one)")]
    NoSecondFactor,
    #[error(
        "the code does not match your second factor, or was used already: enter the 6 digits your app shows now"
    )]
    WrongCode,
    #[error(
        "organization {0} has console users: its own admins invite their team from the console's team page"
    )]
    TenantsOwnTeam(String),
    #[error("a tenant's first console user is its admin: invite them with the role admin")]
    FirstUserAdmin,
    #[error(
        "organization {0} has no contact address: its first admin is invited at it (set it with \
         PUT /operator/v1/organizations/{0}/contact, a change another admin approves)"
    )]
    NoContact(String),
    #[error("in production a tenant's first admin is invited at the organization's contact address, {0}")]
    NotContact(String),
    #[error("organization {0}'s contact address changed since the change was proposed: propose it again")]
    ContactChanged(String),
    #[error(
        "organization {0}'s contact address is not the one the audit log recorded: it was written outside the \
         service; set it again (a change another admin approves)"
    )]
    ContactUnrecorded(String),
    #[error("change {id} is {status}: only a pending change is decided")]
    Decided { id: String, status: &'static str },
    #[error(
        "no suspension of operator {0} proposed with this key is pending: --break-glass completes only \
         its actor's own suspension, in time"
    )]
    NotOwnSuspension(String),
    #[error(
        "operator {0} is suspended (change {1}): it decides nothing, and is not taken away again, until \
         the change is approved, completed with --break-glass by its proposer, or lapses"
    )]
    Suspended(String, String),
    #[error(
        "operator {0}'s last suspension ended uncompleted: it is not suspended again before {1} (with a \
         third enrolled admin, taking it away applies at once)"
    )]
    Protected(String, String),
}

/// Whether `operator` may take `action`.
pub fn permits(operator: &Operator, action: Action) -> Result<(), Refused> {
    let roles = action.roles();
    if roles.iter().any(|role| operator.has(*role)) {
        return Ok(());
    }
    let needs: Vec<String> = roles.iter().map(|role| format!("`{}`", role.as_str())).collect();
    Err(Refused::Role { needs: needs.join(" or "), operator: operator.id.clone() })
}

/// Whether `second` may decide the step after `first`'s: another
/// authenticated operator (or, on the store directly, another `--by`), and
/// never a break-glass action.
pub fn second_pair(first: &Actor, second: &Actor) -> Result<(), Refused> {
    match (first, second) {
        (_, Actor::BreakGlass { .. }) => Err(Refused::BreakGlass),
        (Actor::BreakGlass { id: a, .. }, Actor::Operator { id: b, name }) if a == b => {
            Err(Refused::SameOperator(format!("operator {b} ({name}), with --break-glass")))
        }
        (Actor::Operator { id: a, .. }, Actor::Operator { id: b, name }) if a == b => {
            Err(Refused::SameOperator(format!("operator {b} ({name})")))
        }
        (Actor::Local { by: Some(a), .. }, Actor::Local { by: Some(b), .. }) if same_name(a, b) => {
            Err(Refused::SameOperator(format!("--by {b}")))
        }
        // Without a --by on one side, the operating-system user is all
        // that tells the two apart; a step recorded with its --by alone
        // (`by:ann`) kept no user, so it is no proof of another person.
        (Actor::Local { os_user: a, by: x }, Actor::Local { os_user: b, by: y })
            if (x.is_none() || y.is_none()) && (a.is_empty() || b.is_empty() || a == b) =>
        {
            Err(Refused::SameOperator(format!("local:{b}")))
        }
        _ => Ok(()),
    }
}

/// Whether two `--by` names are one person's: trimmed, in any case.
fn same_name(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// Whether `admin` may set `target`'s roles to `roles`.
pub fn may_set_roles(admin: &Operator, target: &str, roles: &[Role]) -> Result<(), Refused> {
    permits(admin, Action::Operators)?;
    if admin.id == target {
        return Err(Refused::OwnRoles);
    }
    if roles.is_empty() {
        return Err(Refused::NoRole);
    }
    Ok(())
}

/// Whether `admin` may disable `target`.
pub fn may_disable(admin: &Operator, target: &str) -> Result<(), Refused> {
    permits(admin, Action::Operators)?;
    if admin.id == target { Err(Refused::OwnDisable) } else { Ok(()) }
}

/// Whether an operator may be created from the store alone: only while no
/// enabled admin with a live key exists (the bootstrap).
pub fn may_bootstrap(enabled_admins: i64) -> Result<(), Refused> {
    if enabled_admins > 0 { Err(Refused::AdminExists) } else { Ok(()) }
}

/// Whether a change may stand that leaves `enabled_admins` enabled admins
/// with a live key: never none (nobody could manage operators again but a
/// bootstrap).
pub fn keeps_an_admin(enabled_admins: i64) -> Result<(), Refused> {
    if enabled_admins > 0 { Ok(()) } else { Err(Refused::LastAdmin) }
}

/// How a grant (a new operator, roles added, an operator enabled) goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// At once, by the admin alone: `sandbox` (and `dev`).
    Apply,
    /// At once, by the admin alone, logged as genesis: an admin added
    /// before two admins have enrolled, in `production`.
    Genesis,
    /// A change that waits for another admin: `production` after genesis.
    Propose,
}

/// How a grant of `kind` giving `roles` goes in `environment`, while
/// genesis is open or not.
pub fn grant(
    environment: Environment,
    genesis_open: bool,
    kind: ChangeKind,
    roles: &[Role],
) -> Result<Grant, Refused> {
    match environment {
        Environment::Sandbox => Ok(Grant::Apply),
        Environment::Production if !genesis_open => Ok(Grant::Propose),
        Environment::Production if kind == ChangeKind::Create && roles == [Role::Admin] => Ok(Grant::Genesis),
        Environment::Production => Err(Refused::Genesis),
    }
}

/// Whether a roles set `to` adds a role to `from` (a grant) or only
/// removes (applied at once: taking power away never waits).
pub fn adds_role(from: &[Role], to: &[Role]) -> bool {
    to.iter().any(|role| !from.contains(role))
}

/// Whether `decider` may approve or refuse `change`: another enabled
/// admin than its proposer and its target, while it is pending.
pub fn may_decide(decider: &Operator, change: &Change) -> Result<(), Refused> {
    permits(decider, Action::Operators)?;
    if decider.id == change.proposed_by {
        return Err(Refused::OwnChange);
    }
    if decider.id == change.target {
        return Err(Refused::ChangeTarget);
    }
    if change.status != ChangeStatus::Pending {
        return Err(Refused::Decided { id: change.id.clone(), status: change.status.as_str() });
    }
    Ok(())
}

/// Whether a change proposed at `created_at` is past its time at `now`
/// (both in microseconds).
pub fn expired(created_at: i64, now: i64) -> bool {
    now.saturating_sub(created_at) >= CHANGE_VALID.as_micros() as i64
}

/// Whether the store-access bootstrap may make an operator with `roles`:
/// in `production` once ever (no admin has existed), with `admin` only; in
/// `sandbox` while no enabled admin with a live key exists.
pub fn may_bootstrap_in(
    environment: Environment,
    roles: &[Role],
    admin_existed: bool,
    enabled_admins: i64,
) -> Result<(), Refused> {
    match environment {
        Environment::Production if roles != [Role::Admin] => Err(Refused::BootstrapAdminOnly),
        Environment::Production if admin_existed => Err(Refused::AdminExisted),
        Environment::Production => Ok(()),
        Environment::Sandbox => may_bootstrap(enabled_admins),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator(id: &str, roles: &[Role]) -> Operator {
        Operator {
            id: id.into(),
            name: format!("{id} name"),
            email: format!("{id}@example.com"),
            roles: roles.to_vec(),
            disabled_at: None,
            created_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    fn actor(id: &str) -> Actor {
        Actor::Operator { id: id.into(), name: format!("{id} name") }
    }

    #[test]
    fn each_action_needs_its_role() {
        use Role::*;
        let cases = [
            (Action::IdentityDecision, &[Compliance][..], true),
            (Action::IdentityDecision, &[Treasury][..], false),
            (Action::FiatEntitlement, &[Compliance][..], true),
            (Action::Wire, &[Treasury][..], true),
            (Action::Wire, &[Compliance][..], false),
            (Action::Wire, &[Admin][..], false),
            (Action::VirtualAccount, &[Treasury][..], true),
            (Action::Payout, &[Treasury, Compliance][..], true),
            (Action::Refund, &[Compliance][..], false),
            (Action::Operators, &[Admin][..], true),
            (Action::Operators, &[Treasury, Compliance][..], false),
            (Action::Tenants, &[Admin][..], true),
            (Action::Audit, &[Compliance][..], true),
            (Action::Audit, &[Admin][..], true),
            (Action::Audit, &[Treasury][..], false),
            (Action::Reconciliation, &[Compliance][..], true),
            (Action::Reconciliation, &[Treasury][..], true),
            (Action::Reconciliation, &[Admin][..], true),
            (Action::Reconciliation, &[][..], false),
            (Action::Repair, &[Treasury][..], true),
            (Action::Repair, &[Admin][..], false),
            (Action::Repair, &[Compliance][..], false),
        ];
        for (action, roles, allowed) in cases {
            let outcome = permits(&operator("op1", roles), action);
            assert_eq!(outcome.is_ok(), allowed, "{action:?} with {roles:?}");
            if let Err(refusal) = outcome {
                assert!(refusal.to_string().contains(action.roles()[0].as_str()), "{refusal}");
            }
        }
    }

    fn glass(id: &str) -> Actor {
        Actor::BreakGlass { id: id.into(), name: Some(format!("{id} name (uid 0, user root)")) }
    }

    #[test]
    fn a_second_pair_of_eyes_is_another_person() {
        let local = |by: Option<&str>| Actor::Local { os_user: "ci".into(), by: by.map(str::to_string) };
        let cases = [
            (actor("op1"), actor("op2"), true),
            (actor("op1"), actor("op1"), false),
            (actor("op1"), glass("root"), false),
            (local(Some("ann")), glass("root"), false),
            // A break-glass step is completed by another operator only.
            (glass("op1"), actor("op1"), false),
            (glass("op1"), actor("op2"), true),
            (glass("op1"), glass("op2"), false),
            (local(Some("ann")), actor("op1"), true),
            (local(Some("ann")), local(Some("ANN")), false),
            (local(Some("ann")), local(Some("bob")), true),
            (local(None), local(None), false),
            (local(Some(" Ärne ")), local(Some("ärne")), false),
            (local(None), local(Some("bob")), false),
            (local(Some("ann")), local(None), false),
            (local(None), Actor::Local { os_user: "eve".into(), by: None }, true),
            // As a first step reads back from its row: the --by, no user.
            (Actor::from_recorded("by:ann"), local(None), false),
            (Actor::from_recorded("by:ann"), local(Some("bob")), true),
            (Actor::Provider("sandbox".into()), actor("op1"), true),
        ];
        for (first, second, allowed) in cases {
            assert_eq!(second_pair(&first, &second).is_ok(), allowed, "{first} then {second}");
        }
    }

    #[test]
    fn admins_manage_others_not_themselves() {
        let admin = operator("adm", &[Role::Admin]);
        assert_eq!(may_set_roles(&admin, "op2", &[Role::Treasury]), Ok(()));
        assert_eq!(may_set_roles(&admin, "adm", &[Role::Admin, Role::Treasury]), Err(Refused::OwnRoles));
        assert_eq!(may_set_roles(&admin, "op2", &[]), Err(Refused::NoRole));
        assert_eq!(may_disable(&admin, "adm"), Err(Refused::OwnDisable));
        assert_eq!(may_disable(&admin, "op2"), Ok(()));
        let treasurer = operator("t", &[Role::Treasury]);
        assert!(matches!(may_disable(&treasurer, "op2"), Err(Refused::Role { .. })));
        assert_eq!(may_bootstrap(0), Ok(()));
        assert_eq!(may_bootstrap(1), Err(Refused::AdminExists));
    }

    #[test]
    fn grants_wait_for_a_second_admin_in_production_after_genesis() {
        use {ChangeKind::*, Environment::*, Role::*};
        type Case = (Environment, bool, ChangeKind, &'static [Role], Result<Grant, Refused>);
        let cases: [Case; 9] = [
            (Sandbox, true, Create, &[Treasury], Ok(Grant::Apply)),
            (Sandbox, false, Roles, &[Admin, Treasury], Ok(Grant::Apply)),
            (Production, true, Create, &[Admin], Ok(Grant::Genesis)),
            (Production, true, Create, &[Admin, Treasury], Err(Refused::Genesis)),
            (Production, true, Create, &[Treasury], Err(Refused::Genesis)),
            (Production, true, Roles, &[Admin], Err(Refused::Genesis)),
            (Production, true, Enable, &[Admin], Err(Refused::Genesis)),
            (Production, false, Create, &[Admin], Ok(Grant::Propose)),
            (Production, false, Enable, &[], Ok(Grant::Propose)),
        ];
        for (environment, open, kind, roles, expected) in cases {
            assert_eq!(
                grant(environment, open, kind, roles),
                expected,
                "{environment} {open} {kind:?} {roles:?}"
            );
        }
        assert!(adds_role(&[Treasury], &[Treasury, Compliance]));
        assert!(adds_role(&[Treasury], &[Compliance]));
        assert!(!adds_role(&[Treasury, Compliance], &[Treasury]));
        assert!(!adds_role(&[Admin, Treasury], &[Treasury, Admin]));
    }

    #[test]
    fn a_change_is_decided_by_another_admin_than_its_proposer_and_target() {
        let change = |status| Change {
            id: "chg_1".into(),
            kind: ChangeKind::Roles,
            status,
            proposed_by: "adm1".into(),
            target: "adm3".into(),
            created_at: chrono::DateTime::UNIX_EPOCH,
            decided_by: None,
            decided_at: None,
            proposal: Default::default(),
            reason: None,
            decision_reason: None,
        };
        let admin = |id| operator(id, &[Role::Admin]);
        assert_eq!(may_decide(&admin("adm2"), &change(ChangeStatus::Pending)), Ok(()));
        assert_eq!(may_decide(&admin("adm1"), &change(ChangeStatus::Pending)), Err(Refused::OwnChange));
        assert_eq!(may_decide(&admin("adm3"), &change(ChangeStatus::Pending)), Err(Refused::ChangeTarget));
        let treasurer = operator("t", &[Role::Treasury]);
        assert!(matches!(may_decide(&treasurer, &change(ChangeStatus::Pending)), Err(Refused::Role { .. })));
        for status in [ChangeStatus::Applied, ChangeStatus::Refused, ChangeStatus::Expired] {
            let refused = may_decide(&admin("adm2"), &change(status)).unwrap_err();
            assert_eq!(refused, Refused::Decided { id: "chg_1".into(), status: status.as_str() });
        }
        let week = CHANGE_VALID.as_micros() as i64;
        assert!(!expired(0, week - 1));
        assert!(expired(0, week));
    }

    #[test]
    fn the_production_bootstrap_makes_one_admin_once() {
        use {Environment::*, Role::*};
        type Case = (Environment, &'static [Role], bool, i64, Result<(), Refused>);
        let cases: [Case; 7] = [
            (Production, &[Admin], false, 0, Ok(())),
            (Production, &[Admin], true, 0, Err(Refused::AdminExisted)),
            (Production, &[Admin, Treasury], false, 0, Err(Refused::BootstrapAdminOnly)),
            (Production, &[Compliance], false, 0, Err(Refused::BootstrapAdminOnly)),
            // A disabled or keyless admin still ends it: a latch, not a count.
            (Production, &[Admin], true, 1, Err(Refused::AdminExisted)),
            (Sandbox, &[Compliance, Treasury], true, 0, Ok(())),
            (Sandbox, &[Admin], true, 1, Err(Refused::AdminExists)),
        ];
        for (environment, roles, existed, enabled, expected) in cases {
            assert_eq!(
                may_bootstrap_in(environment, roles, existed, enabled),
                expected,
                "{environment} {roles:?}"
            );
        }
    }
}
