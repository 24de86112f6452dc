//! Who may decide what, pure: the role each action needs, the four-eyes
//! rule (a second pair of eyes is another authenticated operator, never a
//! break-glass action), and the rules operators keep about operators.

use super::resource::{Operator, Role};
use crate::audit::Actor;

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
}

impl Action {
    /// The roles that may take the action (any one of them).
    pub fn roles(self) -> &'static [Role] {
        match self {
            Action::IdentityDecision | Action::FiatEntitlement => &[Role::Compliance],
            Action::Wire | Action::VirtualAccount | Action::Payout | Action::Refund => &[Role::Treasury],
            Action::Operators | Action::Tenants => &[Role::Admin],
            Action::Audit => &[Role::Admin, Role::Compliance],
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
}
