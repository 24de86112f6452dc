//! `POST /v2/accounts`, `GET /v2/accounts` and `GET /v2/accounts/{account_id}`.

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
    params::{Params, encode_cursor},
};
use crate::api::ErrorCode;
use crate::{
    account::{Account, AccountType},
    keys::accounts::CreateError,
    store::{AccountPage, NewAccount},
};

const DEFAULT_LIMIT: u32 = 25;
const MAX_LIMIT: u32 = 100;
const MAX_IDENTITIES: usize = 25;

#[derive(Debug, Serialize, ToSchema)]
pub struct AccountList {
    pub accounts: Vec<Account>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// A new account of an existing identity of the organization.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountRequest {
    /// The idempotency key.
    pub request_id: String,
    pub identity_id: String,
    /// `SEGREGATED` (an on-chain wallet of its own). `OMNIBUS` accounts
    /// share the omnibus wallet and are registered by an operator.
    #[serde(rename = "type")]
    #[schema(value_type = AccountType)]
    pub kind: String,
}

#[derive(Serialize, Deserialize)]
struct Keyset {
    id: String,
}

/// Lists the organization's accounts by id.
#[utoipa::path(
    get,
    operation_id = "listAccounts",
    path = "/v2/accounts",
    tag = "accounts",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
        ("identity_ids" = Option<String>, Query, description = "Only accounts of these identities: up to 25 ids, comma-separated or repeated"),
    ),
    responses(
        (status = 200, description = "A page of accounts", body = AccountList),
        (status = 400, description = "Malformed query", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<AccountList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["limit", "cursor", "identity_ids"])?;
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let identity_ids: Vec<String> = params.list("identity_ids").into_iter().map(String::from).collect();
    if identity_ids.len() > MAX_IDENTITIES {
        return Err(ApiError::invalid(format!(
            "identity_ids holds {} ids; at most {MAX_IDENTITIES} are allowed",
            identity_ids.len()
        )));
    }
    let after = params.cursor::<Keyset>()?.map(|k| k.id);
    let page = AccountPage { organization: caller.organization, identity_ids, after, limit: limit + 1 };
    let mut accounts = state.store().account_page(&page).await?;
    let cursor = if accounts.len() > limit as usize {
        accounts.truncate(limit as usize);
        accounts.last().map(|a| encode_cursor(&Keyset { id: a.id.clone() }))
    } else {
        None
    };
    Ok(Json(AccountList { accounts, cursor }))
}

/// One account.
#[utoipa::path(
    get,
    operation_id = "getAccount",
    path = "/v2/accounts/{account_id}",
    tag = "accounts",
    params(("account_id" = String, Path, description = "The account's id")),
    responses(
        (status = 200, description = "The account", body = Account),
        (status = 404, description = "No such account in the organization", body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(account_id): Path<String>,
) -> Result<Json<Account>, ApiError> {
    Ok(Json(state.store().organization_account(&caller.organization, &account_id).await?))
}

/// Opens an account for an identity of the organization, with its own
/// addresses on every configured chain.
///
/// The identity must exist in the organization (`404` otherwise) and not be
/// `REJECTED` or `TERMINATED` (`400`). The account's status follows the
/// identity's: a pending identity's account receives deposits but cannot
/// send until the identity is `ACTIVE`. Idempotent by `request_id`: the same
/// request again answers the account it created, `201` like the first.
#[utoipa::path(post, operation_id = "createAccount", path = "/v2/accounts", tag = "accounts", request_body = AccountRequest,
    responses(
        (status = 201, description = "Created; the same request again answers the same account", body = Account),
        (status = 400, description = "Invalid request, or an identity that cannot open accounts", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
        (status = 409, description = "CONFLICT: request_id used with another request; or ORGANIZATION_LIMIT_REACHED", body = ErrorBody),
        (status = 503, description = "ACCOUNTS_UNAVAILABLE: the service holds no keys, or its signer does not answer (retry with the same request_id)", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<(StatusCode, Json<Account>), ApiError> {
    let request: AccountRequest = exact(body)?;
    let kind: AccountType = request.kind.parse().map_err(|e| ApiError::invalid(format!("type: {e}")))?;
    if request.request_id.trim().is_empty() || request.request_id.len() > 256 {
        return Err(ApiError::invalid("request_id: must be 1 to 256 characters"));
    }
    if let Some(found) = repeated(&state, &caller.organization, &request, kind).await? {
        return Ok((StatusCode::CREATED, Json(found)));
    }
    if kind == AccountType::Omnibus {
        return Err(ApiError::invalid(
            "type: OMNIBUS accounts share the omnibus wallet and are registered by an operator; use SEGREGATED",
        ));
    }
    let Some(signer) = state.0.signer.clone() else {
        return Err(ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::AccountsUnavailable,
            "the service has no signing keys to derive an account's addresses from",
        ));
    };
    let new = NewAccount {
        // A retry of an interrupted creation finds the keys it made.
        id: crate::keys::accounts::id_for_request(&caller.organization, &request.request_id),
        organization: caller.organization.clone(),
        identity_id: request.identity_id.clone(),
        request_id: Some(request.request_id.clone()),
        kind,
        addresses: Vec::new(),
        watch_from: Default::default(),
    };
    let chains = state.chains().clone();
    let created =
        crate::keys::accounts::create(state.store(), &*signer, chains.iter().map(|c| c.chain), new).await;
    match created {
        Ok(account) => Ok((StatusCode::CREATED, Json(account))),
        Err(CreateError::Key(error)) => {
            // The backend's own words (a token's label, a cloud account) are
            // the operators', not the tenant's.
            tracing::error!(%error, organization = %caller.organization, "an account's keys were not made");
            if !error.is_retryable() {
                return Err(ApiError::internal());
            }
            Err(ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::AccountsUnavailable,
                "the service's signer does not answer: nothing was created; retry with the same request_id",
            ))
        }
        // A concurrent request with this request_id committed first.
        Err(CreateError::Store(error)) => match repeated(&state, &caller.organization, &request, kind).await?
        {
            Some(found) => Ok((StatusCode::CREATED, Json(found))),
            None => Err(error.into()),
        },
    }
}

/// The account an earlier request with this `request_id` created, if any.
async fn repeated(
    state: &ApiState,
    organization: &str,
    request: &AccountRequest,
    kind: AccountType,
) -> Result<Option<Account>, ApiError> {
    let Some(found) = state.store().account_by_request(organization, &request.request_id).await? else {
        return Ok(None);
    };
    if found.identity_id != request.identity_id || found.kind != kind {
        return Err(ApiError::coded(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            format!("request_id was already used by account {} with a different request", found.id),
        ));
    }
    Ok(Some(found))
}
