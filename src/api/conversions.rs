//! Conversions: an identity's virtual accounts, the conversion read, and
//! `sandbox`'s simulated wire to a virtual account. The virtual account
//! create is this service's extension (`x-extension: true` in
//! `/openapi.json`); there is no conversion list (`GET /v2/conversions`
//! answers `405`).

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{
    ApiError, ApiState, Body, ErrorBody,
    auth::Caller,
    body::exact,
    issuance::{Delivery, Keyset, delivery_address, gate, key, next_cursor, one_of},
    params::Params,
};
use crate::amount::Cents;
use crate::api::ErrorCode;
use crate::{
    chain::Chain,
    conversions::{
        Conversion, VirtualAccount, VirtualAccountStatus,
        resource::{VirtualAccountDestination, VirtualAccountSource},
        virtual_account,
    },
    issuance::FIAT_CURRENCY,
    store::{NewVirtualAccount, NewVirtualWire, NewWire, WireSource},
};

const DEFAULT_LIMIT: u32 = 25;
const MAX_LIMIT: u32 = 100;

/// Where a virtual account's dollars go.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = VirtualAccountDestinationRequest)]
pub struct DestinationRequest {
    /// One of the identity's accounts, with one address on `chain`.
    pub account_id: String,
    /// A stablecoin the platform issues on `chain`.
    #[schema(value_type = crate::schemas::StablecoinCurrency)]
    pub currency: String,
    #[schema(value_type = Chain)]
    pub chain: String,
}

/// Where a virtual account's wires come from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = VirtualAccountSourceRequest)]
pub struct SourceRequest {
    /// ISO 3166-1 alpha-2 country of the senders' banks (`US`).
    pub banking_country: String,
}

/// A virtual account to open. `request_id` is the idempotency key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VirtualAccountRequest {
    pub request_id: String,
    pub destination: DestinationRequest,
    pub source: SourceRequest,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VirtualAccountList {
    pub virtual_accounts: Vec<VirtualAccount>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Opens a virtual account for an `ACTIVE`, fiat-enabled identity
/// (extension).
///
/// Answers it `VIRTUAL_ACCOUNT_STATUS_PENDING`: the bank opens it (its
/// `deposit_instructions` filled) or refuses it (`…_FAILED`) a moment
/// later in `sandbox` (see docs/conversions.md), when an operator records
/// the bank's answer in `production`. Idempotent by `request_id`: the same
/// request again answers the same virtual account, `201`; the same
/// `request_id` with another request is `409`.
#[utoipa::path(post, operation_id = "createVirtualAccount", path = "/v2/identities/{identity_id}/virtual-accounts", tag = "conversions",
    params(("identity_id" = String, Path, description = "The identity's id")),
    request_body = VirtualAccountRequest,
    responses(
        (status = 201, description = "Created; the same request again answers the same virtual account", body = VirtualAccount),
        (status = 400, description = "INVALID_REQUEST naming the field; ACCOUNT_NOT_ACTIVE; FIAT_NOT_ENABLED", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
        (status = 409, description = "request_id used with another request", body = ErrorBody),
        (status = 503, description = "CONVERSIONS_UNAVAILABLE: no receiving bank configured (production)", body = ErrorBody),
    ))]
pub async fn create_virtual_account(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(identity_id): Path<String>,
    Body(body): Body<Value>,
) -> Result<(StatusCode, Json<VirtualAccount>), ApiError> {
    let request: VirtualAccountRequest = exact(body)?;
    let store = state.store();
    let identity = store.identity(&caller.organization, &identity_id).await?;
    let wanted = requested(request, &identity.id, &caller.organization)?;
    let (chain, country) = (wanted.destination.chain, wanted.source.banking_country.clone());
    // A replay answers what the first request made, whatever the identity
    // or its account has become since; a new one needs the identity's
    // entitlement.
    if let Some(found) = store.virtual_account_by_request(&caller.organization, &wanted.request_id).await? {
        if !found.same_request(&wanted) {
            let message = format!(
                "request_id {} was used for another virtual account ({})",
                wanted.request_id, found.id
            );
            return Err(crate::store::StoreError::Duplicate(message).into());
        }
        return Ok((StatusCode::CREATED, Json(found)));
    }
    gate(&identity)?;
    let target = Delivery {
        identity: &identity.id,
        chain,
        symbol: &wanted.destination.currency,
        account: &wanted.destination.account_id,
        fields: ["destination.currency", "destination.account_id"],
    };
    let destination_address = delivery_address(&state, &caller.organization, &target).await?;
    let bank = state.bank().receiving_account().ok_or_else(|| {
        ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ConversionsUnavailable,
            "the platform has no receiving bank configured (--receiving-bank): it cannot open virtual accounts",
        )
    })?;
    let new = NewVirtualAccount {
        account: wanted,
        destination_address,
        opening: state.bank().open_virtual_account(&country),
        bank,
        account_number: virtual_account::new_account_number(),
        deposit_message: virtual_account::new_deposit_message(),
        fee_bps: state.conversions().on_ramp_fee_bps,
    };
    let created = virtual_account::create_virtual_account(store, &new).await?;
    Ok((StatusCode::CREATED, Json(created.into_inner())))
}

/// The virtual account `request` asks for, of `identity`, checked.
fn requested(
    request: VirtualAccountRequest,
    identity: &str,
    organization: &str,
) -> Result<VirtualAccount, ApiError> {
    key("request_id", &request.request_id)?;
    let chain: Chain = request
        .destination
        .chain
        .parse()
        .map_err(|e| ApiError::invalid(format!("destination.chain: {e}")))?;
    let country = request.source.banking_country;
    if !virtual_account::is_country(&country) {
        return Err(ApiError::invalid(format!(
            "source.banking_country: {country:?} is not an ISO 3166-1 alpha-2 country code, such as US"
        )));
    }
    let now = chrono::Utc::now();
    Ok(VirtualAccount {
        id: uuid::Uuid::new_v4().to_string(),
        identity_id: identity.to_string(),
        status: VirtualAccountStatus::Pending,
        source: VirtualAccountSource { banking_country: country },
        destination: VirtualAccountDestination {
            account_id: request.destination.account_id,
            currency: request.destination.currency,
            chain,
        },
        deposit_instructions: None,
        failure_reason: None,
        created_at: now,
        updated_at: now,
        organization: organization.to_string(),
        request_id: request.request_id,
    })
}

/// Lists an identity's virtual accounts by id.
#[utoipa::path(get, operation_id = "listVirtualAccounts", path = "/v2/identities/{identity_id}/virtual-accounts", tag = "conversions",
    params(
        ("identity_id" = String, Path, description = "The identity's id"),
        ("status" = Option<VirtualAccountStatus>, Query, description = "Only virtual accounts showing this status (`VIRTUAL_ACCOUNT_STATUS_UNSPECIFIED`: all)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of virtual accounts", body = VirtualAccountList),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
    ))]
pub async fn list_virtual_accounts(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(identity_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<VirtualAccountList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["status", "limit", "cursor"])?;
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = params.cursor::<Keyset>()?.map(|k| k.id);
    // The reference's `…_UNSPECIFIED` filters nothing.
    let status = params
        .one("status")?
        .filter(|s| *s != "VIRTUAL_ACCOUNT_STATUS_UNSPECIFIED")
        .map(|s| s.parse::<VirtualAccountStatus>().map_err(|e| ApiError::invalid(format!("status: {e}"))))
        .transpose()?;
    let store = state.store();
    let identity = store.identity(&caller.organization, &identity_id).await?;
    let mut virtual_accounts = store
        .virtual_account_page(&caller.organization, &identity.id, status, after.as_deref(), limit + 1)
        .await?;
    let cursor = next_cursor(&mut virtual_accounts, limit, |v| &v.id);
    Ok(Json(VirtualAccountList { virtual_accounts, cursor }))
}

/// One conversion of the organization: its current state, the same shape
/// as the `data` of `conversion_notification_update`.
#[utoipa::path(get, operation_id = "getConversion", path = "/v2/conversions/{conversion_id}", tag = "conversions",
    params(("conversion_id" = String, Path, description = "The conversion's id")),
    responses(
        (status = 200, description = "The conversion", body = Conversion),
        (status = 404, description = "No such conversion in the organization", body = ErrorBody),
    ))]
pub async fn get_conversion(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(conversion_id): Path<String>,
) -> Result<Json<Conversion>, ApiError> {
    Ok(Json(state.store().conversion(Some(&caller.organization), &conversion_id).await?))
}

/// A simulated wire to a virtual account (`sandbox`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VirtualAccountDepositRequest {
    /// One of the organization's `ACTIVE` virtual accounts.
    pub virtual_account_id: String,
    /// Dollars: a positive decimal string with at most 2 decimals. The
    /// cents decide the sandbox bank's outcome, as for a fiat deposit
    /// (see docs/issuance.md).
    pub amount: String,
    /// `USD`.
    pub currency: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VirtualAccountDepositAnswer {
    pub conversion_id: String,
}

/// Simulates a wire arriving at a virtual account (`sandbox` only; absent
/// in `production`). It enters the path a real wire does: an `INITIATED`
/// `ON_RAMP` conversion whose dollars the sandbox bank settles, then mints.
#[utoipa::path(post, operation_id = "simulateVirtualAccountDeposit", path = "/v2/simulation/virtual-account-deposit", tag = "simulation",
    request_body = VirtualAccountDepositRequest,
    responses(
        (status = 200, description = "The wire arrived: the conversion it started", body = VirtualAccountDepositAnswer),
        (status = 400, description = "INVALID_REQUEST naming the field", body = ErrorBody),
        (status = 404, description = "No virtual account of the organization has this id", body = ErrorBody),
        (status = 409, description = "The virtual account is not ACTIVE", body = ErrorBody),
    ))]
pub async fn simulate_virtual_account_deposit(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<Json<VirtualAccountDepositAnswer>, ApiError> {
    let request: VirtualAccountDepositRequest = exact(body)?;
    let cents = Cents::parse(&request.amount).map_err(|e| ApiError::invalid(format!("amount: {e}")))?.0;
    one_of("currency", &request.currency, FIAT_CURRENCY, "ISSUANCE_SUPPORTED_FIAT_CURRENCY_UNSPECIFIED")?;
    key("virtual_account_id", &request.virtual_account_id)?;
    let reference = format!("SIM-{}", uuid::Uuid::new_v4());
    let new = NewVirtualWire {
        organization: Some(&caller.organization),
        virtual_account_id: &request.virtual_account_id,
        wire: NewWire {
            organization: Some(&caller.organization),
            memo_id: "",
            cents,
            reference: &reference,
            source: WireSource::Simulation,
            recorded_by: None,
            reason: None,
            settlement: state.bank().receive(cents),
        },
    };
    let conversion = crate::conversions::on_ramp::record_wire(state.store(), &new).await?.into_inner();
    Ok(Json(VirtualAccountDepositAnswer { conversion_id: conversion.id }))
}
