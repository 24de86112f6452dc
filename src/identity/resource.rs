//! The Identity and Identity verification check resources as the API serves
//! them, and the `identity_status_update` event's data.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::{Status, SubStatus, Transition, Type, sub_status_str};
use crate::deposits::resource::rfc3339;

/// The event type of every change of an identity's status or sub-status.
pub const IDENTITY_STATUS_UPDATE: &str = "identity_status_update";

/// An identity: who owns accounts, onboarded through compliance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Identity {
    pub id: String,
    #[serde(skip)]
    pub organization: String,
    /// The client's idempotency key; absent for identities an operator registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Type,
    /// Personal data as often as not (a name): hidden from `Debug`, stored sealed.
    #[schema(value_type = String)]
    pub label: crate::pii::Masked<String>,
    /// The identity's accounts, by id.
    pub account_ids: Vec<String>,
    /// Fiat entitlement, independent of the status.
    pub fiat_operations_enabled: bool,
    pub status: Status,
    /// `null` when there is none.
    pub sub_status: Option<SubStatus>,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
}

/// Where an identity verification check stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = IdVerificationStatus)]
pub enum CheckStatus {
    /// Issued; the individual has not opened it yet.
    NotStarted,
    /// The individual opened it.
    InProgress,
    Completed,
    /// Not completed in time; a new submission asks for a new one.
    Expired,
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::NotStarted => "NOT_STARTED",
            CheckStatus::InProgress => "IN_PROGRESS",
            CheckStatus::Completed => "COMPLETED",
            CheckStatus::Expired => "EXPIRED",
        }
    }
}

impl std::str::FromStr for CheckStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [CheckStatus::NotStarted, CheckStatus::InProgress, CheckStatus::Completed, CheckStatus::Expired]
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown check status {s:?}"))
    }
}

/// An identity verification check of an individual.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct IdVerificationCheck {
    pub id: String,
    pub identity_id: String,
    /// Where the individual verifies themselves.
    pub verification_url: String,
    /// Why it was asked for: `ONBOARDING`.
    pub reason: String,
    pub request_id: String,
    pub redirect_url: Option<String>,
    pub status: CheckStatus,
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
    pub labels: Vec<String>,
    #[serde(skip)]
    pub submission_id: String,
    /// When it expires unless completed.
    #[serde(skip)]
    pub expires_at: DateTime<Utc>,
}

/// The `data` of an `identity_status_update`: the identity as it is now,
/// the accounts whose status or mirrors changed with it (all of its
/// accounts), why, and the status and sub-status before (empty string when
/// none). With `check` (the open check, given at `IDV_REQUESTED`,
/// `IDV_IN_PROGRESS` and `IDV_EXPIRED`), its id as
/// `id_verification_check_id` (an extension: the check is read with
/// `GET /v2/identities/{identity_id}/id_verification/{id}`).
pub fn status_update(
    identity: &Identity,
    transition: &Transition,
    account_ids: &[String],
    reason: Option<&str>,
    check: Option<&str>,
) -> Value {
    let mut data = json!({
        "identity": {
            "id": identity.id,
            "label": identity.label,
            "identity_type": identity.kind,
            "status": transition.status(),
            "sub_status": sub_status_str(transition.sub_status()),
        },
        "affected_account_ids": account_ids,
        "status_reason": reason,
        "previous_status": transition.previous_status(),
        "previous_sub_status": sub_status_str(transition.previous_sub_status()),
    });
    if let Some(check) = check {
        data["id_verification_check_id"] = json!(check);
    }
    data
}
