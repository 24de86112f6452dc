//! `/v2/crypto/transfers`, `GET /v2/transaction-limits/policies/{id}` and
//! `GET /v2/gas/usage`.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    ApiError, ApiState, Body, ErrorBody,
    auth::Caller,
    params::{Params, encode_cursor},
};
use crate::api::ErrorCode;
use crate::{
    chain::Chain,
    store::{GasUsage, LimitPolicy, TransferPage},
    transfers::{AcceptError, Acceptance, Created, Refusal, Request, Transfer},
};

const DEFAULT_LIMIT: u32 = 10;
const MAX_LIMIT: u32 = 100;

/// Where to send: the preferred structured form.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddressDestination {
    pub address: String,
    #[schema(value_type = crate::chain::Chain)]
    pub chain: String,
}

/// A transfer request. Give the destination either as `address_destination`
/// (preferred) or as `destination_address` with `destination_chain`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferRequest {
    /// A UUID: the idempotency key.
    pub request_id: String,
    pub account_id: String,
    /// Major unit, e.g. `"12.5"`; no more decimals than the asset has.
    pub amount: String,
    pub currency_symbol: String,
    #[serde(default)]
    pub address_destination: Option<AddressDestination>,
    #[serde(default)]
    pub destination_address: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Chain>)]
    pub destination_chain: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransferList {
    pub transfers: Vec<Transfer>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Keyset {
    t: i64,
    id: String,
}

/// Sends funds out of an account; the platform pays the network fee.
///
/// Validated before acceptance; sent asynchronously (read the status with
/// GET or follow the `crypto_transfer_*` events). Idempotent by `request_id`,
/// a UUID in any textual form (kept lowercase hyphenated): the same request
/// again returns the existing transfer (`201`, as any create's replay) while it is in flight
/// (`ACCEPTED` or `SUBMITTED`), whatever it holds, and `409
/// DUPLICATE_TRANSACTION` naming it once it was processed (terminal); the
/// same `request_id` with a different request is `409 REQUEST_ID_REUSED`.
#[utoipa::path(post, operation_id = "createTransfer", path = "/v2/crypto/transfers", tag = "transfers",
    request_body(content = TransferRequest, example = json!({
        "request_id": "5f0c6a8e-3b7d-4e52-9a51-2f1d8c0b7e44",
        "account_id": "acct_1",
        "amount": "12.5",
        "currency_symbol": "USDC",
        "address_destination": { "address": "0x4242424242424242424242424242424242424242", "chain": "BASE_MAINNET" },
    })),
    responses(
        (status = 201, description = "Accepted; the same request again, while the transfer is not yet processed, answers the same transfer", body = Transfer),
        (status = 400, description = "INVALID_REQUEST, ACCOUNT_NOT_ACTIVE, INSUFFICIENT_BALANCE, LIMIT_EXCEEDED or GAS_LIMIT_EXCEEDED (EVM: the call's gas estimate is above the 16,777,216 one transaction may carry)", body = ErrorBody,
            examples(
                ("INVALID_REQUEST" = (value = json!({ "code": "INVALID_REQUEST", "message": "a destination is required: address_destination, or destination_address with destination_chain" }))),
                ("INSUFFICIENT_BALANCE" = (value = json!({ "code": "INSUFFICIENT_BALANCE", "message": "insufficient available balance: 3 USDC available, 12.5 requested" }))),
                ("GAS_LIMIT_EXCEEDED" = (value = json!({ "code": "GAS_LIMIT_EXCEEDED", "message": "the transfer needs 20000000 gas, more than the 16777216 one transaction may use (EIP-7825)" }))),
            )),
        (status = 404, description = "No such account in the organization", body = ErrorBody),
        (status = 409, description = "DUPLICATE_TRANSACTION or REQUEST_ID_REUSED, naming the transfer that holds the request_id", body = ErrorBody,
            examples(
                ("DUPLICATE_TRANSACTION" = (value = json!({ "code": "DUPLICATE_TRANSACTION", "message": "transfer 0b6f7c1e-2d43-4a8e-b1f5-6c9d2e7a0f13 with this request_id was already processed", "transfer_id": "0b6f7c1e-2d43-4a8e-b1f5-6c9d2e7a0f13" }))),
                ("REQUEST_ID_REUSED" = (value = json!({ "code": "REQUEST_ID_REUSED", "message": "request_id was already used by transfer 0b6f7c1e-2d43-4a8e-b1f5-6c9d2e7a0f13 with a different request", "transfer_id": "0b6f7c1e-2d43-4a8e-b1f5-6c9d2e7a0f13" }))),
            )),
        (status = 503, description = "TRANSFERS_UNAVAILABLE (no signing keys configured, or the chain waits for its recovery after a restore of the store) or CHAIN_UNAVAILABLE (the chain did not answer a balance read or, three times, the gas estimate)", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(request): Body<TransferRequest>,
) -> Result<(StatusCode, Json<Transfer>), ApiError> {
    let Some(signer) = state.0.signer.clone() else {
        return Err(ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::TransfersUnavailable,
            "transfers are disabled: the service has no signing keys",
        ));
    };
    let (destination_field, chain_field, destination, chain) = match (
        &request.address_destination,
        &request.destination_address,
        &request.destination_chain,
    ) {
        (Some(d), None, None) => {
            ("address_destination.address", "address_destination.chain", d.address.as_str(), d.chain.as_str())
        }
        (None, Some(address), Some(chain)) => {
            ("destination_address", "destination_chain", address.as_str(), chain.as_str())
        }
        (None, None, None) => {
            return Err(ApiError::invalid(
                "a destination is required: address_destination, or destination_address with destination_chain",
            ));
        }
        _ => {
            return Err(ApiError::invalid(
                "give either address_destination or destination_address with destination_chain, not a mix",
            ));
        }
    };
    let parsed =
        chain.parse::<crate::chain::Chain>().map_err(|e| ApiError::invalid(format!("{chain_field}: {e}")))?;
    // Why it is closed names platform addresses and other tenants' (see
    // `health`): never in a tenant's answer.
    if state.gate().closed(parsed).is_some() {
        return Err(ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::TransfersUnavailable,
            format!(
                "transfers on {parsed} wait for the platform's recovery after a restore; try again later"
            ),
        ));
    }
    let acceptance = Acceptance {
        store: state.store(),
        chains: state.chains(),
        balances: &state.0.balances,
        signer: signer.as_ref(),
    };
    let request = Request {
        organization: &caller.organization,
        request_id: &request.request_id,
        account_id: &request.account_id,
        amount: &request.amount,
        currency_symbol: &request.currency_symbol,
        destination_field,
        destination,
        chain,
    };
    match acceptance.accept(&request).await.map_err(accept_error)? {
        Created::New(transfer) => Ok((StatusCode::CREATED, Json(transfer))),
        Created::Existing(transfer) => Ok((StatusCode::CREATED, Json(transfer))),
    }
}

/// The answer to a request acceptance refused.
pub(super) fn accept_error(error: AcceptError) -> ApiError {
    match error {
        AcceptError::Invalid(message) => ApiError::invalid(message),
        AcceptError::Refused(refusal) => refused(refusal),
        AcceptError::Store(error) => error.into(),
        AcceptError::Balance(error) => error.into(),
        AcceptError::GasLimit(_) => {
            ApiError::coded(StatusCode::BAD_REQUEST, ErrorCode::GasLimitExceeded, error.to_string())
        }
        AcceptError::Estimate(failure) => {
            tracing::warn!(chain = %failure.chain, error = %failure, "gas estimate failed");
            ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ChainUnavailable,
                format!(
                    "cannot estimate the transfer's gas on {} now: its node did not answer eth_estimateGas; try again later",
                    failure.chain
                ),
            )
        }
        AcceptError::Key(error) if error.is_unreachable() => {
            tracing::warn!(error = %error, "the signer does not answer: transfer not accepted");
            ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::TransfersUnavailable,
                "the signer does not answer now; nothing was accepted: try again later with the same request_id",
            )
        }
        AcceptError::Key(error) => {
            tracing::error!(error = %error, "the signer cannot derive an address");
            ApiError::internal()
        }
    }
}

pub(super) fn refused(refusal: Refusal) -> ApiError {
    let message = refusal.to_string();
    match refusal {
        Refusal::Duplicate(id) => {
            ApiError::coded(StatusCode::CONFLICT, ErrorCode::DuplicateTransaction, message).with_transfer(id)
        }
        Refusal::RequestReused(id) => {
            ApiError::coded(StatusCode::CONFLICT, ErrorCode::RequestIdReused, message).with_transfer(id)
        }
        Refusal::NotActive(..) | Refusal::IdentityNotActive(..) => {
            ApiError::coded(StatusCode::BAD_REQUEST, ErrorCode::AccountNotActive, message)
        }
        Refusal::Insufficient { .. } => {
            ApiError::coded(StatusCode::BAD_REQUEST, ErrorCode::InsufficientBalance, message)
        }
        Refusal::Limit { .. } => ApiError::coded(StatusCode::BAD_REQUEST, ErrorCode::LimitExceeded, message),
        Refusal::Store(error) => error.into(),
    }
}

/// One transfer.
#[utoipa::path(get, operation_id = "getTransfer", path = "/v2/crypto/transfers/{transfer_id}", tag = "transfers",
    params(("transfer_id" = String, Path, description = "The transfer's id")),
    responses(
        (status = 200, description = "The transfer", body = Transfer),
        (status = 404, description = "No such transfer in the organization", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(transfer_id): Path<String>,
) -> Result<Json<Transfer>, ApiError> {
    Ok(Json(state.store().organization_transfer(&caller.organization, &transfer_id).await?))
}

/// Lists transfers, newest first.
#[utoipa::path(get, operation_id = "listTransfers", path = "/v2/crypto/transfers", tag = "transfers",
    params(
        ("account_id" = Option<String>, Query, description = "Only this account's transfers"),
        ("identity_id" = Option<String>, Query, description = "Only transfers of this identity's accounts"),
        ("status" = Option<crate::transfers::TransferStatus>, Query, description = "Only transfers in this status"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 10)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of transfers", body = TransferList),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<TransferList>, ApiError> {
    let params =
        Params::parse(query.as_deref(), &["account_id", "identity_id", "status", "limit", "cursor"])?;
    let status = params
        .one("status")?
        .map(|s| s.parse().map_err(|e: crate::transfers::UnknownStatus| ApiError::invalid(e.to_string())))
        .transpose()?;
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let page = TransferPage {
        organization: caller.organization,
        account_id: params.one("account_id")?.map(String::from),
        identity_id: params.one("identity_id")?.map(String::from),
        status,
        after: params.cursor::<Keyset>()?.map(|k| (k.t, k.id)),
        limit: limit + 1,
    };
    let mut transfers = state.store().transfer_page(&page).await?;
    let cursor = if transfers.len() > limit as usize {
        transfers.truncate(limit as usize);
        transfers
            .last()
            .map(|t| encode_cursor(&Keyset { t: t.created_at.timestamp_micros(), id: t.id.clone() }))
    } else {
        None
    };
    Ok(Json(TransferList { transfers, cursor }))
}

/// A transaction-limit policy.
#[utoipa::path(get, operation_id = "getTransactionLimitPolicy", path = "/v2/transaction-limits/policies/{policy_id}", tag = "transfers",
    params(("policy_id" = String, Path, description = "The policy's id")),
    responses(
        (status = 200, description = "The policy", body = LimitPolicy),
        (status = 404, description = "No such policy in the organization", body = ErrorBody),
    ))]
pub async fn policy(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(policy_id): Path<String>,
) -> Result<Json<LimitPolicy>, ApiError> {
    Ok(Json(state.store().limit_policy(&caller.organization, &policy_id).await?))
}

/// The organization's sponsored gas: spent, remaining credit and billable.
#[utoipa::path(get, operation_id = "getGasUsage", path = "/v2/gas/usage", tag = "transfers",
    responses(
        (status = 200, description = "Gas spent against the credit", body = GasUsage),
    ))]
pub async fn gas_usage(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<GasUsage>, ApiError> {
    Ok(Json(state.store().gas_usage(&caller.organization, state.0.gas_credit_usd_micros).await?))
}
