//! `POST /v2/conversions`: an `OFF_RAMP`, a client's stablecoin paid out
//! to one of its bank accounts.

use axum::{Extension, Json, extract::State, http::StatusCode};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{
    ApiError, ApiState, Body, ErrorBody,
    auth::Caller,
    body::exact,
    issuance::{gate, key},
    transfers::{accept_error, refused},
};
use crate::amount::Cents;
use crate::api::ErrorCode;
use crate::{
    chain::Chain,
    conversions::{
        Conversion,
        off_ramp::{
            self, OffRampRefusal,
            pricing::{self, PricingError},
        },
    },
    keys::{KeyRef, Signer},
    store::{Made, NewOffRamp},
    transfers::{Acceptance, Request, canonical_request_id},
};

/// Where the stablecoin comes from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OffRampSource)]
pub struct SourceRequest {
    /// A stablecoin the platform issues on `chain` (USDC).
    pub currency: String,
    #[schema(value_type = Chain)]
    pub chain: String,
}

/// An off-ramp to submit. `request_id` is the idempotency key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversionRequest {
    /// A UUID, in any textual form.
    pub request_id: String,
    /// `OFF_RAMP`: an `ON_RAMP` starts with a wire to a virtual account.
    #[serde(rename = "type")]
    #[schema(value_type = crate::conversions::resource::Type)]
    pub kind: String,
    /// The account whose stablecoin is paid out.
    pub account_id: String,
    /// A bank account (issuance) of the account's identity.
    pub payment_instructions_id: String,
    /// Of the stablecoin, in dollars: a positive decimal with at most 2
    /// decimals; equal to the quote's `source.amount` when one is used.
    pub amount: String,
    pub source: SourceRequest,
    /// Required for every corridor but a US wire, refused on a US wire.
    #[serde(default)]
    pub quote_id: Option<String>,
}

/// Submits an `OFF_RAMP`: the account's stablecoin paid out to one of its
/// identity's bank accounts (`201`, `INITIATED`).
///
/// The stablecoin is held at submission, with the balance, holds and limits
/// of any transfer, and moved to the platform's settlement wallet; the bank
/// then pays out (`PAYOUT_INITIATED`, `PAYOUT_IN_PROGRESS`, `COMPLETED`). A
/// payout the bank refuses (`FAILED`) or returns (`RETURNED`, with
/// `refund_details`) ends only once the stablecoin is back, confirmed. A US
/// bank account (ABA routing number) is a US wire: no quote, and
/// `destination.amount` is set at once (the amount less the off-ramp fee).
/// Every other corridor uses a quote, once, before it expires. Idempotent
/// by `request_id`: the same request again answers the same conversion
/// (`201`, as every create's replay) and uses no second quote; another request under it is `409`.
#[utoipa::path(post, operation_id = "createConversion", path = "/v2/conversions", tag = "conversions",
    request_body(content = ConversionRequest, example = json!({
        "request_id": "7d2f1c44-0b1e-4a53-9c1f-2f6a8e0d9b31",
        "type": "OFF_RAMP",
        "account_id": "acct_1",
        "payment_instructions_id": "2b8e5f0a-6c1d-4f3e-9a7b-1d2c3e4f5a6b",
        "amount": "100.00",
        "source": { "currency": "USDC", "chain": "BASE_MAINNET" },
        "quote_id": "5a9e3c1b-8d2f-4e6a-b0c7-9f1e2d3c4b5a",
    })),
    responses(
        (status = 201, description = "Accepted: the conversion, INITIATED; the same request again answers the same conversion", body = Conversion),
        (status = 400, description = "INVALID_REQUEST naming the field (a quote on a US wire, a missing quote, an amount or bank account other than the quote's, fee fields); QUOTE_EXPIRED; ACCOUNT_NOT_ACTIVE; FIAT_NOT_ENABLED; INSUFFICIENT_BALANCE; LIMIT_EXCEEDED", body = ErrorBody),
        (status = 404, description = "No such account, bank account or quote in the organization", body = ErrorBody),
        (status = 409, description = "QUOTE_ALREADY_USED; REQUEST_ID_REUSED", body = ErrorBody),
        (status = 503, description = "CONVERSIONS_UNAVAILABLE: no signing keys", body = ErrorBody),
    ))]
pub async fn create_conversion(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<(StatusCode, Json<Conversion>), ApiError> {
    refuse_fee_fields(&body)?;
    let request: ConversionRequest = exact(body)?;
    let asked = Asked::of(&state, &request)?;
    let store = state.store();
    if let Some(answer) = replayed(store, &caller.organization, &asked, &request).await? {
        return answer;
    }
    match submit(&state, &caller.organization, &request, &asked).await {
        Ok(made) => Ok(made),
        // A retry that raced the first request past the lookup above is
        // answered from what the first made, not refused by what it changed.
        Err(refused) => match replayed(store, &caller.organization, &asked, &request).await? {
            Some(answer) => answer,
            None => Err(refused),
        },
    }
}

/// The answer to a request whose `request_id` is taken: its conversion
/// (`201`, as the first answer), or `409 REQUEST_ID_REUSED` when it asked
/// something else.
async fn replayed(
    store: &crate::store::Store,
    organization: &str,
    asked: &Asked,
    request: &ConversionRequest,
) -> Result<Option<Result<(StatusCode, Json<Conversion>), ApiError>>, ApiError> {
    let Some((found, print)) = store.off_ramp_by_request(organization, &asked.request_id).await? else {
        return Ok(None);
    };
    if print != asked.fingerprint(request) {
        return Ok(Some(Err(refusal(OffRampRefusal::RequestReused(found.id)))));
    }
    Ok(Some(Ok((StatusCode::CREATED, Json(found)))))
}

/// Checks and accepts a new off-ramp.
async fn submit(
    state: &ApiState,
    organization: &str,
    request: &ConversionRequest,
    asked: &Asked,
) -> Result<(StatusCode, Json<Conversion>), ApiError> {
    let store = state.store();
    let signer = state.0.signer.clone().ok_or_else(|| {
        ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ConversionsUnavailable,
            "off-ramps are disabled: the service has no signing keys",
        )
    })?;
    let account = store.organization_account(organization, &request.account_id).await?;
    let bank = store.bank_account(organization, &request.payment_instructions_id).await?;
    if bank.identity_id != account.identity_id {
        return Err(ApiError::invalid(format!(
            "payment_instructions_id: bank account {} is not of account {}'s identity",
            bank.id, account.id
        )));
    }
    gate(&store.identity(organization, &account.identity_id).await?)?;
    let wanted = pricing::Asked {
        organization,
        currency: &request.source.currency,
        cents: asked.cents,
        quote_id: request.quote_id.as_deref(),
    };
    let fee_bps = state.conversions().off_ramp_fee_bps;
    let priced = pricing::price(store, wanted, &bank, fee_bps).await.map_err(|error| match error {
        PricingError::Invalid(message) => ApiError::invalid(message),
        PricingError::QuoteExpired(quote) => refusal(OffRampRefusal::QuoteExpired(quote)),
        PricingError::Store(error) => error.into(),
    })?;
    let settlement = settlement_address(signer.as_ref(), asked.chain).map_err(|error| {
        tracing::error!(%error, "the signer cannot derive the settlement wallet's address");
        ApiError::internal()
    })?;
    let collect_id = uuid::Uuid::new_v4().to_string();
    let amount = Cents(asked.cents).to_string();
    let collect = Request {
        organization,
        request_id: &collect_id,
        account_id: &request.account_id,
        amount: &amount,
        currency_symbol: &request.source.currency,
        destination_field: "settlement",
        destination: &settlement,
        chain: &request.source.chain,
    };
    let acceptance =
        Acceptance { store, chains: state.chains(), balances: &state.0.balances, signer: signer.as_ref() };
    let (collect, balance) = acceptance.prepare(&collect).await.map_err(accept_error)?;
    let new = NewOffRamp {
        organization: organization.to_string(),
        request_id: asked.request_id.clone(),
        fingerprint: asked.fingerprint(request),
        payment_instructions_id: bank.id.clone(),
        source_cents: asked.cents,
        destination_currency: priced.currency,
        destination_cents: priced.cents,
        fee_cents: priced.fee_cents,
        quote_id: request.quote_id.clone(),
        collect,
        balance,
    };
    match off_ramp::accept(store, &new).await.map_err(refusal)? {
        Made::New(conversion) => Ok((StatusCode::CREATED, Json(conversion))),
        Made::Existing(conversion) => Ok((StatusCode::CREATED, Json(conversion))),
    }
}

/// The request's keys, checked before anything is read.
struct Asked {
    request_id: String,
    chain: Chain,
    cents: i64,
}

impl Asked {
    fn of(state: &ApiState, request: &ConversionRequest) -> Result<Self, ApiError> {
        let request_id = canonical_request_id(&request.request_id).ok_or_else(|| {
            ApiError::invalid(format!("request_id: {:?} is not a UUID", request.request_id))
        })?;
        if request.kind != "OFF_RAMP" {
            return Err(ApiError::invalid(format!(
                "type: {:?} cannot be submitted; only OFF_RAMP (an ON_RAMP starts with a wire to a virtual account)",
                request.kind
            )));
        }
        key("account_id", &request.account_id)?;
        key("payment_instructions_id", &request.payment_instructions_id)?;
        let cents = Cents::parse(&request.amount).map_err(|e| ApiError::invalid(format!("amount: {e}")))?.0;
        let chain: Chain =
            request.source.chain.parse().map_err(|e| ApiError::invalid(format!("source.chain: {e}")))?;
        let currency = &request.source.currency;
        let config = state.chains().get(chain).map_err(|_| {
            ApiError::invalid(format!("source.chain: {chain} is not configured on this service"))
        })?;
        if !config.assets.iter().any(|a| a.issued && &a.symbol == currency) {
            return Err(ApiError::invalid(format!(
                "source.currency: {currency} is not a stablecoin issued on {chain}"
            )));
        }
        if let Some(quote) = &request.quote_id {
            key("quote_id", quote)?;
        }
        Ok(Self { request_id, chain, cents })
    }

    fn fingerprint(&self, request: &ConversionRequest) -> String {
        off_ramp::fingerprint(
            &request.account_id,
            &request.payment_instructions_id,
            self.cents,
            &request.source.currency,
            self.chain.as_str(),
            request.quote_id.as_deref(),
        )
    }
}

/// Fees are the quote's or the platform's: a request naming one is refused.
fn refuse_fee_fields(body: &Value) -> Result<(), ApiError> {
    let mut named: Vec<String> = Vec::new();
    if let Some(object) = body.as_object() {
        named.extend(object.keys().filter(|k| k.contains("fee")).cloned());
        if let Some(source) = object.get("source").and_then(Value::as_object) {
            named.extend(source.keys().filter(|k| k.contains("fee")).map(|k| format!("source.{k}")));
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(format!(
        "{}: fees are not set by the request; a quote's fee is bound to it, a US wire's is the platform's",
        named.join(", ")
    )))
}

/// The platform's settlement wallet on `chain`.
fn settlement_address(signer: &dyn Signer, chain: Chain) -> Result<String, crate::keys::KeyError> {
    crate::family::keys::key_address(signer, chain.family(), KeyRef::Settlement)
}

fn refusal(refusal: OffRampRefusal) -> ApiError {
    let message = refusal.to_string();
    match refusal {
        OffRampRefusal::Transfer(refusal) => refused(refusal),
        OffRampRefusal::QuoteUsed(_) => {
            ApiError::coded(StatusCode::CONFLICT, ErrorCode::QuoteAlreadyUsed, message)
        }
        OffRampRefusal::QuoteExpired(_) => {
            ApiError::coded(StatusCode::BAD_REQUEST, ErrorCode::QuoteExpired, message)
        }
        OffRampRefusal::RequestReused(_) => {
            ApiError::coded(StatusCode::CONFLICT, ErrorCode::RequestIdReused, message)
        }
    }
}
