//! Operators: the people who decide (compliance, treasury, admin), as
//! principals the service authenticates by their keys; what each may do
//! ([`rules`]), and the changes of operators ([`manage`]; grants, which in
//! `production` wait for another admin, [`grants`] and [`changes`]; what
//! operators do to tenants, [`tenants`]; how a
//! store gets its first admins, [`genesis`]), each recorded in the audit
//! log ([`crate::audit`]).

pub mod changes;
pub mod enrolment;
pub mod genesis;
pub mod grants;
pub mod key_rules;
pub mod keys;
pub mod manage;
pub mod resource;
pub mod rules;
pub mod suspension;
pub mod taking;
pub mod tenants;

pub use grants::Outcome;
pub use keys::authenticate;
pub use manage::{Created, NewOperator, OperatorError};
pub use resource::{Change, ChangeKind, ChangeStatus, Operator, OperatorKey, Role};
pub use rules::{Action, Refused};
