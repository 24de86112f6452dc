//! Operators as the service knows them: who they are, their roles, whether
//! they may act, and their keys (never a secret: only a key's hash is kept).

use std::{fmt, str::FromStr};

use serde::Serialize;
use utoipa::ToSchema;

/// What an operator may decide.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Operators, organizations, API keys on a tenant's behalf.
    Admin,
    /// Identity decisions, RFIs, the fiat entitlement.
    Compliance,
    /// Wires, mints, returns of dollars, virtual-account answers, payouts,
    /// refunds.
    Treasury,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Admin, Role::Compliance, Role::Treasury];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Compliance => "compliance",
            Role::Treasury => "treasury",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}: expected admin, compliance or treasury")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Role::ALL.into_iter().find(|r| r.as_str() == text.trim()).ok_or_else(|| UnknownRole(text.to_string()))
    }
}

/// A set of roles as stored: sorted, comma-separated, without repeats.
pub fn roles_text(roles: &[Role]) -> String {
    let mut roles = roles.to_vec();
    roles.sort();
    roles.dedup();
    roles.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(",")
}

/// The roles of stored text.
pub fn parse_roles(text: &str) -> Result<Vec<Role>, UnknownRole> {
    text.split(',').filter(|r| !r.trim().is_empty()).map(str::parse).collect()
}

/// An operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Operator {
    pub id: String,
    pub name: String,
    pub email: String,
    pub roles: Vec<Role>,
    /// When the operator was disabled: its keys stopped working then.
    #[serde(serialize_with = "crate::deposits::resource::rfc3339_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub disabled_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl Operator {
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    pub fn is_enabled(&self) -> bool {
        self.disabled_at.is_none()
    }
}

/// An operator key, without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct OperatorKey {
    pub id: String,
    pub operator_id: String,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub revoked_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it stops working (`production`); `null`: never (`sandbox`).
    #[serde(serialize_with = "crate::deposits::resource::rfc3339_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// What a proposed change of operators does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub enum ChangeKind {
    /// A new operator.
    #[serde(rename = "operator.create")]
    Create,
    /// An operator's roles set to a set that adds a role.
    #[serde(rename = "operator.roles")]
    Roles,
    /// A disabled operator enabled.
    #[serde(rename = "operator.enable")]
    Enable,
    /// An organization's contact address set (`target`: the organization).
    #[serde(rename = "organization.contact")]
    Contact,
    /// A tenant's first console admin invited at its contact address
    /// (`target`: the organization).
    #[serde(rename = "organization.first_admin")]
    FirstAdmin,
    /// An admin disabled while two admins hold the platform: its target is
    /// suspended until another admin approves it, its proposer completes it
    /// by breaking glass, or it lapses (see [`crate::operators::suspension`]).
    #[serde(rename = "operator.disable")]
    Disable,
    /// An admin's `admin` role removed while two admins hold the platform
    /// (`proposal.roles` the roles left): suspended as a disabling is.
    #[serde(rename = "operator.demote")]
    Demote,
}

impl ChangeKind {
    /// Whether the change suspends its target while it waits.
    pub fn suspends(self) -> bool {
        matches!(self, ChangeKind::Disable | ChangeKind::Demote)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Create => "operator.create",
            ChangeKind::Roles => "operator.roles",
            ChangeKind::Enable => "operator.enable",
            ChangeKind::Contact => "organization.contact",
            ChangeKind::FirstAdmin => "organization.first_admin",
            ChangeKind::Disable => "operator.disable",
            ChangeKind::Demote => "operator.demote",
        }
    }
}

/// Where a proposed change stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChangeStatus {
    /// Waits for another admin.
    Pending,
    /// Approved by another admin, and applied with the approval.
    Applied,
    /// Refused by another admin.
    Refused,
    /// Undecided for [`crate::operators::rules::CHANGE_VALID`].
    Expired,
}

impl ChangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeStatus::Pending => "PENDING",
            ChangeStatus::Applied => "APPLIED",
            ChangeStatus::Refused => "REFUSED",
            ChangeStatus::Expired => "EXPIRED",
        }
    }
}

impl FromStr for ChangeKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        [
            ChangeKind::Create,
            ChangeKind::Roles,
            ChangeKind::Enable,
            ChangeKind::Contact,
            ChangeKind::FirstAdmin,
            ChangeKind::Disable,
            ChangeKind::Demote,
        ]
        .into_iter()
        .find(|k| k.as_str() == text)
        .ok_or_else(|| format!("unknown change kind {text:?}"))
    }
}

impl FromStr for ChangeStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        [ChangeStatus::Pending, ChangeStatus::Applied, ChangeStatus::Refused, ChangeStatus::Expired]
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| format!("unknown change status {text:?}"))
    }
}

/// What a change proposes: a new operator's name, email and roles; the
/// roles an operator is to hold; nothing more for an enabling; an
/// organization's contact address, or the address its first admin is
/// invited at (`email`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct Proposal {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<Role>>,
    /// A roles change: the roles the operator held when it was proposed
    /// (it is not applied once they differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_roles: Option<Vec<Role>>,
}

/// A change of operators that waits for, or had, another admin's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Change {
    pub id: String,
    pub kind: ChangeKind,
    pub status: ChangeStatus,
    /// The admin who proposed it.
    pub proposed_by: String,
    /// The operator it changes (for a new operator, the id it gets), or
    /// for `organization.*` the organization.
    pub target: String,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// The admin who approved or refused it; `null` while pending or
    /// once expired.
    pub decided_by: Option<String>,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub decided_at: Option<chrono::DateTime<chrono::Utc>>,
    /// What it proposes.
    pub proposal: Proposal,
    /// The proposer's reason.
    pub reason: Option<String>,
    /// The refusing admin's reason.
    pub decision_reason: Option<String>,
}

impl Change {
    /// What the entry that proposed it records, and the decision holds the
    /// row against: the SHA-256 of its id, kind, target, proposer,
    /// proposal and time, as a JSON array.
    pub fn digest(&self) -> String {
        let proposal = serde_json::to_string(&self.proposal).expect("a proposal serializes");
        let fields = serde_json::json!([
            self.id,
            self.kind.as_str(),
            self.target,
            self.proposed_by,
            proposal,
            self.created_at.timestamp_micros()
        ]);
        crate::api_key::sha256_hex(fields.to_string().as_bytes())
    }
}
