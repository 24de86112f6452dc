//! Identities: who owns accounts, and the compliance lifecycle that decides
//! what those accounts may do.
//!
//! An identity is onboarded through compliance (KYC for individuals, KYB for
//! businesses) and then lives as `ACTIVE`, `SUSPENDED`, `REJECTED` or
//! `TERMINATED`; its accounts' status is derived from it, never set by hand.
//! The lifecycle itself is pure and lives in one place: [`State`] is every
//! state an identity can be in, and [`apply`] is the only way to move between
//! states. Storage, HTTP and event delivery call it and persist what it
//! answers.

pub mod change;
pub mod compliance;
pub mod decide;
mod lifecycle;
pub mod provider;
pub mod register;
pub mod resource;
pub mod review;
mod state;
mod status;
#[cfg(test)]
mod tests;
pub mod trail;

pub use crate::unknown::UnknownValue;
pub use lifecycle::{Event, Reason, Refusal, Transition, apply};
pub use resource::{CheckStatus, IdVerificationCheck, Identity};
pub use state::{InvalidState, State, Step, account_status};
pub use status::{Status, SubStatus, Type, sub_status_str};
