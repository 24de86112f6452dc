//! `/v2/identities`: create, read and list identities, submit their
//! compliance data, and read their identity verification checks.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::{
    ApiError, ApiState, Body, ErrorBody,
    auth::Caller,
    body::exact,
    params::{Params, encode_cursor},
};
use crate::{
    identity::{
        IdVerificationCheck, Identity, State as Lifecycle, Type, compliance, register::create_identity,
    },
    store::{NewIdentity, Registered},
};

const DEFAULT_LIMIT: u32 = 25;
const MAX_LIMIT: u32 = 100;

/// A new identity. `request_id` is the idempotency key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityRequest {
    pub request_id: String,
    #[serde(rename = "type")]
    #[schema(value_type = Type)]
    pub kind: String,
    pub label: String,
}

/// Compliance data: exactly one of `kyc` (an `INDIVIDUAL` identity) or
/// `kyb` (a `BUSINESS` one). Only the document's shape: the handler reads
/// the body as JSON and validates each field itself, naming the failures.
#[derive(ToSchema)]
#[allow(dead_code)] // never built: the schema of a body read as `Value`
pub struct ComplianceRequest {
    kyc: Option<crate::schemas::Kyc>,
    kyb: Option<crate::schemas::Kyb>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct IdentityList {
    pub identities: Vec<Identity>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct IdVerificationAnswer {
    pub id_verification_check: IdVerificationCheck,
}

/// A page of an identity's verification checks, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct IdVerificationList {
    pub id_verification_checks: Vec<IdVerificationCheck>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Keyset {
    id: String,
}

/// Where a page of checks ends: the last check's creation time
/// (microseconds) and id.
#[derive(Serialize, Deserialize)]
struct CheckKeyset {
    t: i64,
    id: String,
}

/// Creates an identity (`PENDING_ONBOARDING`, sub-status `CREATED`).
///
/// Idempotent by `request_id`: the same request again answers the identity
/// it created, `201` like the first answer (the reference answers every
/// create `201`); the same `request_id` with another type or label is
/// `409`.
#[utoipa::path(post, operation_id = "createIdentity", path = "/v2/identities", tag = "identities", request_body = IdentityRequest,
    responses(
        (status = 201, description = "Created; the same request again answers the same identity", body = Identity),
        (status = 400, description = "Invalid request, naming the field", body = ErrorBody),
        (status = 409, description = "CONFLICT: request_id used with another request; or ORGANIZATION_LIMIT_REACHED", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<(StatusCode, Json<Identity>), ApiError> {
    let request: IdentityRequest = exact(body)?;
    let kind: Type = request.kind.parse().map_err(|e| ApiError::invalid(format!("type: {e}")))?;
    for (field, value) in [("request_id", &request.request_id), ("label", &request.label)] {
        if value.trim().is_empty() || value.len() > 256 {
            return Err(ApiError::invalid(format!("{field}: must be 1 to 256 characters")));
        }
    }
    let new = NewIdentity {
        organization: caller.organization,
        id: uuid::Uuid::new_v4().to_string(),
        request_id: Some(request.request_id),
        kind,
        label: request.label.into(),
        state: Lifecycle::CREATED,
        actor: "client".into(),
    };
    match create_identity(state.store(), &new).await? {
        Registered::New(identity) => Ok((StatusCode::CREATED, Json(identity))),
        Registered::Existing(identity) => Ok((StatusCode::CREATED, Json(identity))),
    }
}

/// One identity.
#[utoipa::path(get, operation_id = "getIdentity", path = "/v2/identities/{identity_id}", tag = "identities",
    params(("identity_id" = String, Path, description = "The identity's id")),
    responses(
        (status = 200, description = "The identity", body = Identity),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(identity_id): Path<String>,
) -> Result<Json<Identity>, ApiError> {
    Ok(Json(state.store().identity(&caller.organization, &identity_id).await?))
}

/// Lists the organization's identities by id.
#[utoipa::path(get, operation_id = "listIdentities", path = "/v2/identities", tag = "identities",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of identities", body = IdentityList),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<IdentityList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["limit", "cursor"])?;
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = params.cursor::<Keyset>()?.map(|k| k.id);
    let mut identities =
        state.store().identity_page(&caller.organization, after.as_deref(), limit + 1).await?;
    let cursor = if identities.len() > limit as usize {
        identities.truncate(limit as usize);
        identities.last().map(|i| encode_cursor(&Keyset { id: i.id.clone() }))
    } else {
        None
    };
    Ok(Json(IdentityList { identities, cursor }))
}

/// Submits KYC (`kyc`, individuals) or KYB (`kyb`, US businesses) data and
/// starts the compliance checks; their outcome arrives as
/// `identity_status_update` events.
///
/// KYC: `first_name`, `last_name`, `date_of_birth` (YYYY-MM-DD),
/// `nationality` and `country_of_birth` (ISO 3166-1 alpha-2), `occupation`,
/// `source_of_funds`, `account_purpose` (enums), `addresses` (each
/// `street_line_1`, optional `street_line_2`, `city`, `region_code`,
/// `postal_code`, `country`, as bank details name them; the older `line1`,
/// `line2` and `country_code` are still accepted),
/// `additional_id_number` for residents of US, BR, MX, IN and AR; optional
/// `middle_name`, `email`, `phone`. KYB: `business_name`, `business_type`,
/// `tax_id` (EIN), `incorporation_country` (`US` only), `source_of_funds`,
/// `account_purpose`, `addresses` (US); optional `doing_business_as`,
/// `incorporation_date`, `website`, `email`. Data resubmitted while an RFI
/// is open is accepted, keeps the RFI open and emits no event. Text fields
/// are bounded (100 characters for names and cities, 254 for an email, 32
/// for a phone, 20 for a postal code, 64 for tax and ID numbers, 2,048 for
/// a website, 200 for the rest; at most 5 addresses), a longer value a
/// `400` naming its field. At most 20 submissions are accepted per identity
/// per UTC day: the next answers `429 RATE_LIMITED` with `Retry-After`
/// until midnight UTC; refused bodies do not count.
#[utoipa::path(post, operation_id = "submitCompliance", path = "/v2/identities/{identity_id}/compliance", tag = "identities",
    params(("identity_id" = String, Path, description = "The identity's id")),
    request_body(content = ComplianceRequest, example = json!({ "kyc": {
        "first_name": "Ada", "last_name": "Lovelace", "date_of_birth": "1990-12-10",
        "nationality": "GB", "country_of_birth": "GB", "occupation": "EMPLOYED",
        "source_of_funds": "SALARY", "account_purpose": "SAVINGS",
        "addresses": [{ "street_line_1": "1 Main St", "city": "London", "region_code": "LND",
                        "postal_code": "N1 1AA", "country": "GB" }]
    }})),
    responses(
        (status = 200, description = "Accepted: `{}`", body = super::webhooks::Empty),
        (status = 400, description = "Validation failures, each naming its field", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
        (status = 409, description = "The identity's state takes no data now", body = ErrorBody),
    ))]
pub async fn compliance(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(identity_id): Path<String>,
    Body(body): Body<Value>,
) -> Result<Json<Value>, ApiError> {
    let identity = state.store().identity(&caller.organization, &identity_id).await?;
    compliance::validate(identity.kind, &body).map_err(|errors| ApiError::invalid(errors.join("; ")))?;
    crate::identity::change::submit(state.store(), &caller.organization, &identity_id, &body).await?;
    Ok(Json(json!({})))
}

/// Lists an identity's verification checks, newest first: how a client
/// finds a check's `id` and `verification_url` (extension). The open
/// check's id also arrives in `identity_status_update` as
/// `id_verification_check_id`.
#[utoipa::path(get, operation_id = "listIdVerificationChecks", path = "/v2/identities/{identity_id}/id_verification", tag = "identities",
    params(
        ("identity_id" = String, Path, description = "The identity's id"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of the identity's checks, newest first", body = IdVerificationList),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
    ))]
pub async fn id_verification_list(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(identity_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<IdVerificationList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["limit", "cursor"])?;
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = params.cursor::<CheckKeyset>()?;
    let store = state.store();
    store.identity(&caller.organization, &identity_id).await?;
    let after = after.as_ref().map(|k| (k.t, k.id.as_str()));
    let mut checks = store.idv_check_page(&caller.organization, &identity_id, after, limit + 1).await?;
    let cursor = if checks.len() > limit as usize {
        checks.truncate(limit as usize);
        checks
            .last()
            .map(|c| encode_cursor(&CheckKeyset { t: c.created_at.timestamp_micros(), id: c.id.clone() }))
    } else {
        None
    };
    Ok(Json(IdVerificationList { id_verification_checks: checks, cursor }))
}

/// One identity verification check of an identity.
#[utoipa::path(get, operation_id = "getIdVerificationCheck", path = "/v2/identities/{identity_id}/id_verification/{check_id}", tag = "identities",
    params(
        ("identity_id" = String, Path, description = "The identity's id"),
        ("check_id" = String, Path, description = "The check's id"),
    ),
    responses(
        (status = 200, description = "The check", body = IdVerificationAnswer),
        (status = 404, description = "No such check of this identity in the organization", body = ErrorBody),
    ))]
pub async fn id_verification(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path((identity_id, check_id)): Path<(String, String)>,
) -> Result<Json<IdVerificationAnswer>, ApiError> {
    let check = state.store().idv_check(&caller.organization, &identity_id, &check_id).await?;
    Ok(Json(IdVerificationAnswer { id_verification_check: check }))
}
