//! `GET /v2/accounts/{account_id}/balances` and `GET /v2/assets`.

use alloy::primitives::U256;
use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ApiState, ErrorBody, auth::Caller, params::Params};
use crate::{
    assets::{Asset, Balance, assets_of},
    chain::{Family, Sponsorship},
};

#[derive(Debug, Serialize, ToSchema)]
pub struct BalanceList {
    pub balances: Vec<Balance>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssetList {
    pub assets: Vec<Asset>,
}

/// An account's balances, read from the chains for its addresses.
///
/// One entry per supported asset of every chain the account has an address
/// on (or of `chain` only). `total` is what the chain holds at its latest
/// block; `available` is `total` less what outbound transfers in flight hold.
#[utoipa::path(
    get,
    operation_id = "listBalances",
    path = "/v2/accounts/{account_id}/balances",
    tag = "accounts",
    params(
        ("account_id" = String, Path, description = "The account's id"),
        ("chain" = Option<crate::chain::Chain>, Query, description = "Only balances on this chain"),
    ),
    responses(
        (status = 200, description = "The account's balances", body = BalanceList),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 404, description = "No such account in the organization", body = ErrorBody),
        (status = 503, description = "A chain's RPC endpoints did not answer", body = ErrorBody),
    )
)]
pub async fn balances(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(account_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<BalanceList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["chain"])?;
    let chain = params.chain("chain")?;
    let balances = account_balances(&state, &caller.organization, &account_id, chain).await?;
    Ok(Json(BalanceList { balances }))
}

/// Whether the sponsor tops up an account's addresses on a family's
/// chains: where it pays gas by giving the address some.
fn topped_up(family: Family) -> bool {
    crate::family::rules::sponsorship(family) == Sponsorship::Gas
}

/// The balances of `organization`'s account `account_id` (on `chain`
/// only, when given), as `GET /v2/accounts/{account_id}/balances` and the
/// console show them.
pub(crate) async fn account_balances(
    state: &ApiState,
    organization: &str,
    account_id: &str,
    chain: Option<crate::chain::Chain>,
) -> Result<Vec<crate::assets::Balance>, ApiError> {
    let account = state.store().organization_account(organization, account_id).await?;
    let mut held = state.store().held_amounts(&account.id).await?;
    // Sponsor money left at the account's addresses for gas is not the
    // account's. Only EVM addresses of accounts whose key the service holds
    // are ever topped up.
    if state.store().account_key(&account.id).await?.is_some() {
        for entry in &account.addresses {
            for chain in
                entry.chains.iter().filter(|c| topped_up(c.family()) && chain.is_none_or(|o| o == **c))
            {
                let left = state.store().sponsored_gas_left(*chain, &entry.address).await?;
                if let (false, Ok(config)) = (left.is_zero(), state.chains().get(*chain)) {
                    *held.entry((*chain, config.native.symbol.clone())).or_default() += left;
                }
            }
        }
    }
    Ok(state
        .0
        .balances
        .balances(&account, chain, |chain, symbol| {
            held.get(&(chain, symbol.to_string())).copied().unwrap_or(U256::ZERO)
        })
        .await?)
}

/// The supported assets: each configured chain's coin and listed tokens.
#[utoipa::path(
    get,
    operation_id = "listAssets",
    path = "/v2/assets",
    tag = "assets",
    params(("chain" = Option<crate::chain::Chain>, Query, description = "Only assets on this chain")),
    responses(
        (status = 200, description = "The supported assets", body = AssetList),
        (status = 400, description = "Malformed query", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<ApiState>,
    Extension(_caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<AssetList>, ApiError> {
    let params = Params::parse(query.as_deref(), &["chain"])?;
    let chain = params.chain("chain")?;
    let assets = state
        .chains()
        .iter()
        .filter(|c| chain.is_none_or(|only| only == c.chain))
        .flat_map(assets_of)
        .collect();
    Ok(Json(AssetList { assets }))
}
