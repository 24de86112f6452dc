//! `GET /v2/accounts` and `GET /v2/accounts/{account_id}`.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    ApiError, ApiState, ErrorBody,
    auth::Caller,
    params::{Params, encode_cursor},
};
use crate::{account::Account, store::AccountPage};

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

#[derive(Serialize, Deserialize)]
struct Keyset {
    id: String,
}

/// Lists the organization's accounts by id.
#[utoipa::path(
    get,
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
        (status = 401, description = "Missing, malformed or unknown API key", body = ErrorBody),
        (status = 429, description = "Rate limit exceeded; see Retry-After", body = ErrorBody),
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
    path = "/v2/accounts/{account_id}",
    tag = "accounts",
    params(("account_id" = String, Path, description = "The account's id")),
    responses(
        (status = 200, description = "The account", body = Account),
        (status = 401, description = "Missing, malformed or unknown API key", body = ErrorBody),
        (status = 404, description = "No such account in the organization", body = ErrorBody),
        (status = 429, description = "Rate limit exceeded; see Retry-After", body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(account_id): Path<String>,
) -> Result<Json<Account>, ApiError> {
    Ok(Json(state.store().organization_account(&caller.organization, &account_id).await?))
}
