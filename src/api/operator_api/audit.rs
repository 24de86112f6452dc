//! `GET /operator/v1/audit`: the audit log in `seq` order, for every
//! operator.

use axum::{
    Extension, Json,
    extract::{Query, State},
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::OperatorCaller;
use crate::{
    api::{ApiError, ApiState, ErrorBody},
    audit,
    operators::Action,
};

/// At most this many entries per page.
const MAX_LIMIT: i64 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Entries after this `seq` (default 0: from the first).
    pub after: Option<i64>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<i64>,
    /// One organization's entries only.
    pub organization_id: Option<String>,
}

/// An entry as a person reads it: the reason opened; `hash` is over the
/// reason as written (sealed), see docs/operations.md.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntry {
    pub seq: i64,
    /// RFC 3339, by the store's clock.
    pub at: String,
    pub actor: String,
    pub actor_name: Option<String>,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub organization_id: Option<String>,
    pub reason: Option<String>,
    pub request_id: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// The last entry's `seq`: pass it as `after` to continue.
    pub after: i64,
}

/// The audit log, oldest first.
#[utoipa::path(get, operation_id = "listAudit", path = "/operator/v1/audit", tag = "operators", security(("operator_key" = [])), security(("operator_key" = [])),
    params(AuditQuery),
    responses(
        (status = 200, description = "A page of the log", body = AuditPage),
        (status = 400, description = "A limit out of range", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    caller.may(Action::Audit)?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(format!("limit: between 1 and {MAX_LIMIT}")));
    }
    let after = query.after.unwrap_or(0);
    let store = state.store();
    let rows = store.audit_entries(after, query.organization_id.as_deref(), limit).await?;
    let cipher = store.cipher().ok();
    let mut entries = Vec::with_capacity(rows.len());
    for entry in rows {
        entries.push(AuditEntry {
            reason: audit::reason(cipher, &entry)?,
            seq: entry.seq,
            at: crate::deposits::resource::format_time(&crate::store::time(entry.at)?),
            actor: entry.actor,
            actor_name: entry.actor_name,
            action: entry.action,
            target_kind: entry.target_kind,
            target_id: entry.target_id,
            organization_id: entry.organization_id,
            request_id: entry.request_id,
            prev_hash: entry.prev_hash,
            hash: entry.hash,
        });
    }
    let after = entries.last().map_or(after, |e| e.seq);
    Ok(Json(AuditPage { entries, after }))
}

/// An entry found after the log's authentication whose MAC fails.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AcknowledgeRequest {
    /// The entry's `seq`.
    pub seq: i64,
    /// What was found, and what was done about it.
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Acknowledged {
    /// The entry acknowledged.
    pub seq: i64,
    /// What the entry acknowledged claims: its action and actor.
    pub action: String,
    pub actor: String,
    /// The `audit_log.acknowledged` entry that records it.
    pub acknowledged_by: i64,
}

/// Records that an unauthenticated entry (after the log's authentication,
/// its MAC failing: written outside the service) was found: `audit verify`
/// lists it as acknowledged from then on. It stays no authority.
#[utoipa::path(post, operation_id = "acknowledgeAuditEntry", path = "/operator/v1/audit/acknowledgements",
    tag = "operators", security(("operator_key" = [])), request_body = AcknowledgeRequest,
    responses(
        (status = 201, description = "Recorded", body = Acknowledged),
        (status = 400, description = "No reason", body = ErrorBody),
        (status = 403, description = "The caller is not an `admin`", body = ErrorBody),
        (status = 409, description = "No such entry, or it is authenticated or acknowledged already", body = ErrorBody),
    ))]
pub async fn acknowledge(
    State(state): State<ApiState>,
    Extension(caller): Extension<OperatorCaller>,
    crate::api::Body(request): crate::api::Body<AcknowledgeRequest>,
) -> Result<(axum::http::StatusCode, Json<Acknowledged>), ApiError> {
    caller.may(Action::Operators)?;
    if request.reason.trim().is_empty() {
        return Err(ApiError::invalid("reason: say what was found"));
    }
    let actor = crate::operators::manage::actor(&caller.0);
    let done = audit::acknowledge::acknowledge(state.store(), &actor, request.seq, &request.reason)
        .await
        .map_err(|error| match error {
            audit::acknowledge::AcknowledgeError::Refused(why) => {
                ApiError::coded(axum::http::StatusCode::CONFLICT, crate::api::ErrorCode::Conflict, why)
            }
            audit::acknowledge::AcknowledgeError::Store(error) => error.into(),
        })?;
    let answer =
        Acknowledged { seq: request.seq, action: done.action, actor: done.actor, acknowledged_by: done.by };
    Ok((axum::http::StatusCode::CREATED, Json(answer)))
}
