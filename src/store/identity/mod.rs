//! The identity wing's rows: identities, their changes and compliance
//! checks, their entitlement to fiat, why a transfer is refused them.

pub mod entitlement;
pub(crate) mod identities;
pub(crate) mod identity_changes;
pub(in crate::store) mod refusal;
pub(crate) mod verification;
