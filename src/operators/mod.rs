//! Operators: the people who decide (compliance, treasury, admin), as
//! principals the service authenticates by their keys; what each may do
//! ([`rules`]), and the changes of operators ([`manage`]), each recorded in
//! the audit log ([`crate::audit`]).

pub mod manage;
pub mod resource;
pub mod rules;

pub use manage::{Created, NewOperator, OperatorError, authenticate};
pub use resource::{Operator, OperatorKey, Role};
pub use rules::{Action, Refused};
