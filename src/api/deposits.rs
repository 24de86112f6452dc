//! `GET /v2/crypto/deposits` and `GET /v2/crypto/deposits/{deposit_id}`.

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
use crate::{deposits::resource::Deposit, store::DepositPage};

const DEFAULT_LIMIT: u32 = 10;
const MAX_LIMIT: u32 = 25;

#[derive(Debug, Serialize, ToSchema)]
pub struct DepositList {
    pub deposits: Vec<Deposit>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The position after a page: the last deposit's `created_at` (microseconds) and id.
#[derive(Serialize, Deserialize)]
struct Keyset {
    t: i64,
    id: String,
}

/// Lists an account's deposits, newest first.
///
/// An account the organization does not hold (unknown, or another
/// organization's) lists no deposits, as the reference's 200, 400 and 500
/// for this route say: the answer never tells whether it exists elsewhere.
///
/// Ordered by `created_at` (the block's time), ties by id. A cursor stays
/// valid while deposits arrive: following pages neither repeat nor skip a
/// deposit that existed when the first page was read.
#[utoipa::path(
    get,
    operation_id = "listDeposits",
    path = "/v2/crypto/deposits",
    tag = "deposits",
    params(
        ("account_id" = String, Query, description = "The account whose deposits to list"),
        ("destination_chain" = Option<crate::chain::Chain>, Query, description = "Only deposits on this chain"),
        ("currency_symbol" = Option<String>, Query, description = "Only deposits of this asset, e.g. USDC"),
        ("start_time" = Option<String>, Query, format = DateTime, description = "Only deposits created at or after this time (RFC 3339)"),
        ("end_time" = Option<String>, Query, format = DateTime, description = "Only deposits created before this time (RFC 3339)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 25, description = "Page size, 1 to 25 (default 10)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of deposits", body = DepositList, example = json!({
            "deposits": [{
                "id": "9b2f4c1e-6a0d-4e8b-8f3a-2c7d5e1b0a94",
                "dedup_key": "3e71c0a2-5b9f-4d86-a1e4-7f20c8d6b513",
                "account_id": "acct_1",
                "account_address": "0x8ba1f109551bd432803012645ac136ddd64dba72",
                "source_address": "0x4242424242424242424242424242424242424242",
                "source_type": "ON_CHAIN",
                "currency_symbol": "USDC",
                "amount": "100.25",
                "destination_chain": "BASE_MAINNET",
                "transaction_hash": "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
                "status": "CONFIRMED",
                "confirmed_at": "2026-03-01T12:00:24Z",
                "created_at": "2026-03-01T12:00:00Z",
            }],
            "cursor": "eyJ0IjoxNzcyMzY2NDAwMDAwMDAwLCJpZCI6IjliMmY0YzFlIn0",
        })),
        (status = 400, description = "Malformed query", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<DepositList>, ApiError> {
    let params = Params::parse(
        query.as_deref(),
        &["account_id", "destination_chain", "currency_symbol", "start_time", "end_time", "limit", "cursor"],
    )?;
    let account_id = params.required("account_id")?.to_string();
    let chain = params.chain("destination_chain")?;
    let currency_symbol = params.one("currency_symbol")?.filter(|s| !s.is_empty()).map(String::from);
    let start = params.time("start_time")?;
    let end = params.time("end_time")?;
    if let (Some(start), Some(end)) = (start, end)
        && start >= end
    {
        return Err(ApiError::invalid("start_time must be before end_time"));
    }
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = params.cursor::<Keyset>()?.map(|k| (k.t, k.id));

    let page = DepositPage {
        organization: caller.organization,
        account_id,
        chain,
        currency_symbol,
        start: start.map(|t| t.timestamp_micros()),
        end: end.map(|t| t.timestamp_micros()),
        after,
        limit: limit + 1,
    };
    let mut deposits = state.store().deposit_page(&page).await?;
    let cursor = if deposits.len() > limit as usize {
        deposits.truncate(limit as usize);
        deposits
            .last()
            .map(|d| encode_cursor(&Keyset { t: d.created_at.timestamp_micros(), id: d.id.clone() }))
    } else {
        None
    };
    Ok(Json(DepositList { deposits, cursor }))
}

/// One deposit.
#[utoipa::path(
    get,
    operation_id = "getDeposit",
    path = "/v2/crypto/deposits/{deposit_id}",
    tag = "deposits",
    params(("deposit_id" = String, Path, description = "The deposit's id")),
    responses(
        (status = 200, description = "The deposit", body = Deposit),
        (status = 404, description = "No such deposit in the organization", body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(deposit_id): Path<String>,
) -> Result<Json<Deposit>, ApiError> {
    Ok(Json(state.store().organization_deposit(&caller.organization, &deposit_id).await?))
}
