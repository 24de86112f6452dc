//! An identity's type, status and sub-status, as the API and the store name
//! them.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::unknown::UnknownValue;

/// Whether an identity is a person (KYC) or a company (KYB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = IdentityType)]
pub enum Type {
    Individual,
    Business,
}

/// The identity's status, as the `status` field of the Identity resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = IdentityStatus)]
pub enum Status {
    /// The onboarding workflow is running; `sub_status` says where.
    PendingOnboarding,
    /// Able to transact.
    Active,
    /// Temporarily suspended by compliance; accounts are `FROZEN`.
    Suspended,
    /// Denied at onboarding: cannot transact or open accounts.
    Rejected,
    /// Permanent: the identity and all its accounts are closed.
    Terminated,
}

/// The identity's sub-status. "None" is not a variant: an identity without a
/// sub-status has `Option<SubStatus>::None`, shown as an empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = IdentitySubStatus)]
pub enum SubStatus {
    Created,
    ComplianceChecksInProgress,
    /// The IDV values apply only to individuals.
    IdvRequired,
    IdvRequested,
    IdvInProgress,
    IdvExpired,
    /// A request for information raised by compliance is open.
    RfiRequired,
}

/// `as_str`, `FromStr` (case-insensitive, as for the account enums) and
/// `Display` from one list of names, so that the three cannot disagree.
macro_rules! names {
    ($ty:ident, $what:literal, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &[$ty] = &[$($ty::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let upper = s.to_ascii_uppercase();
                $ty::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == upper)
                    .ok_or_else(|| UnknownValue::new($what, s, concat!("one of", $(" ", $name),+)))
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names!(Type, "identity type", { Individual => "INDIVIDUAL", Business => "BUSINESS" });

names!(Status, "identity status", {
    PendingOnboarding => "PENDING_ONBOARDING",
    Active => "ACTIVE",
    Suspended => "SUSPENDED",
    Rejected => "REJECTED",
    Terminated => "TERMINATED",
});

names!(SubStatus, "identity sub-status", {
    Created => "CREATED",
    ComplianceChecksInProgress => "COMPLIANCE_CHECKS_IN_PROGRESS",
    IdvRequired => "IDV_REQUIRED",
    IdvRequested => "IDV_REQUESTED",
    IdvInProgress => "IDV_IN_PROGRESS",
    IdvExpired => "IDV_EXPIRED",
    RfiRequired => "RFI_REQUIRED",
});

impl SubStatus {
    /// Whether the value is one of the identity-verification steps, which
    /// exist only for individuals.
    pub fn is_idv(self) -> bool {
        matches!(self, Self::IdvRequired | Self::IdvRequested | Self::IdvInProgress | Self::IdvExpired)
    }

    /// Parses the wire form, where an empty string means "no sub-status".
    pub fn parse_optional(s: &str) -> Result<Option<Self>, UnknownValue> {
        if s.is_empty() { Ok(None) } else { s.parse().map(Some) }
    }
}

/// The wire form of an optional sub-status: the empty string when there is
/// none, as `identity_status_update` carries it.
pub fn sub_status_str(sub_status: Option<SubStatus>) -> &'static str {
    sub_status.map_or("", SubStatus::as_str)
}
