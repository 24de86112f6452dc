//! `GET /v2/conversions/quotes`: prices an off-ramp to one of the
//! organization's bank accounts and persists the quote.

use axum::{
    Extension, Json,
    extract::{RawQuery, State},
    http::StatusCode,
};

use super::{ApiError, ApiState, ErrorBody, auth::Caller, issuance::gate, params::Params};
use crate::amount::Cents;
use crate::api::ErrorCode;
use crate::{
    conversions::{
        off_ramp::pricing::create_quote as persist_quote,
        quote::{Corridor, Prices, corridor, price},
        resource::Quote,
    },
    store::NewQuote,
};

/// Prices an off-ramp: `source_amount` of the stablecoin `source_currency`
/// paid out in `destination_currency` to the bank account
/// `payment_instructions_id`, and persists the quote (`201`).
///
/// The rate is the price source's mid rate less the spread; the fee is kept
/// from the source and bound to the quote. A quote is used by one
/// conversion, until `expires_at`. A US bank account (an ABA routing
/// number) is paid by a US wire, which takes no quote (`400`).
#[utoipa::path(get, operation_id = "createQuote", path = "/v2/conversions/quotes", tag = "conversions",
    params(
        ("source_currency" = String, Query, description = "A stablecoin the platform issues (USDC)"),
        ("source_amount" = String, Query, description = "A positive decimal with at most 2 decimals"),
        ("destination_currency" = String, Query, description = "The currency paid out (MXN, EUR…)"),
        ("payment_instructions_id" = String, Query, description = "One of the organization's bank accounts"),
    ),
    responses(
        (status = 201, description = "The quote, persisted", body = Quote),
        (status = 400, description = "INVALID_REQUEST naming the parameter; ACCOUNT_NOT_ACTIVE; FIAT_NOT_ENABLED", body = ErrorBody),
        (status = 404, description = "No such bank account in the organization", body = ErrorBody),
        (status = 503, description = "CONVERSIONS_UNAVAILABLE: no price source configured (production)", body = ErrorBody),
    ))]
pub async fn create_quote(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<(StatusCode, Json<Quote>), ApiError> {
    let params = Params::parse(
        query.as_deref(),
        &["source_currency", "source_amount", "destination_currency", "payment_instructions_id"],
    )?;
    let source = params.required("source_currency")?;
    let cents = Cents::parse(params.required("source_amount")?)
        .map_err(|e| ApiError::invalid(format!("source_amount: {e}")))?
        .0;
    let destination = params.required("destination_currency")?;
    let bank_id = params.required("payment_instructions_id")?;
    if !state.chains().iter().any(|c| c.assets.iter().any(|a| a.issued && a.symbol == source)) {
        return Err(ApiError::invalid(format!("source_currency: {source} is not a stablecoin issued here")));
    }
    let store = state.store();
    let bank = store.bank_account(&caller.organization, bank_id).await?;
    gate(&store.identity(&caller.organization, &bank.identity_id).await?)?;
    let prices = state.prices().ok_or_else(|| {
        ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ConversionsUnavailable,
            "the platform has no price source configured (--conversion-rates): it quotes nothing",
        )
    })?;
    let offered = match corridor(bank.bank_account_details.expose()) {
        Corridor::UsWire => {
            return Err(ApiError::invalid(format!(
                "payment_instructions_id: bank account {bank_id} is a US account, paid by a US wire that takes no quote"
            )));
        }
        Corridor::None => {
            return Err(ApiError::invalid(format!(
                "payment_instructions_id: bank account {bank_id} has no rail the platform pays out on"
            )));
        }
        Corridor::Quoted(Some(only)) => only.iter().map(|c| (*c).to_string()).collect(),
        Corridor::Quoted(None) => prices.currencies(),
    };
    let mid =
        prices.mid(destination).filter(|_| offered.iter().any(|c| c == destination)).ok_or_else(|| {
            ApiError::invalid(format!(
                "destination_currency: bank account {bank_id} is paid in {}, not {destination}",
                offered.join(", ")
            ))
        })?;
    let settings = state.conversions();
    let priced = price(cents, mid, settings.spread_bps, settings.off_ramp_fee_bps)
        .map_err(|e| ApiError::invalid(format!("source_amount: {e}")))?;
    let new = NewQuote {
        organization: caller.organization.clone(),
        payment_instructions_id: bank.id.clone(),
        source_currency: source.to_string(),
        source_cents: cents,
        destination_currency: destination.to_string(),
        destination_cents: priced.destination_cents,
        rate: priced.rate,
        fee_cents: priced.fee_cents,
        lives_micros: i64::try_from(settings.quote_ttl.as_micros()).unwrap_or(i64::MAX),
    };
    Ok((StatusCode::CREATED, Json(persist_quote(store, &new).await?)))
}
