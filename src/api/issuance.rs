//! `/v2/issuance`: an identity's bank accounts and mint instructions, the
//! mints wires start, and `sandbox`'s simulated wire. The reference shows
//! the reads and the simulation; the creates, the bank-account list and the
//! mint read are this service's extensions (`x-extension: true` in
//! `/openapi.json`).

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
use crate::amount::Cents;
use crate::api::ErrorCode;
use crate::{
    chain::Chain,
    identity::Identity,
    issuance::{
        self, BankAccount, FIAT_CURRENCY, Gate, Mint, MintInstruction, PAYMENT_RAIL, bank, requested, wires,
    },
    pii::Masked,
    store::{NewMintInstruction, NewWire, WireSource},
};

const DEFAULT_LIMIT: u32 = 25;
const MAX_LIMIT: u32 = 100;

/// A bank account to register for an identity. `request_id` is the
/// idempotency key. No `Debug`: it holds bank details in the clear.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BankAccountRequest {
    pub request_id: String,
    pub identity_id: String,
    /// Bank account details: `bank_name`, `account_holder_name` (or
    /// `first_name` and `last_name`), one rail (`routing_number` and
    /// `account_number`; `clabe`; `ifsc_code` and `account_number`;
    /// `swift_or_bic_number` and `account_number`), `address` with
    /// `region_code`; see docs/issuance.md.
    #[schema(value_type = crate::schemas::BankAccountDetails)]
    pub bank_account_details: Value,
}

/// A mint instruction to create. `request_id` is the idempotency key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintInstructionRequest {
    pub request_id: String,
    pub identity_id: String,
    /// A stablecoin the platform issues on `chain`.
    pub stablecoin_symbol: String,
    #[schema(value_type = Chain)]
    pub chain: String,
    /// The id of one of the identity's accounts with one address on `chain`.
    pub mint_destination_address_id: String,
    #[serde(default)]
    pub label: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BankAccountList {
    pub bank_accounts: Vec<BankAccount>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MintInstructionList {
    pub mint_instructions: Vec<MintInstruction>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct Keyset {
    pub id: String,
}

/// Registers a bank account of an `ACTIVE`, fiat-enabled identity
/// (extension).
///
/// The details are checked as a bank would before they are stored, every
/// failure a `400` naming its field. Idempotent by `request_id`: the same
/// request again answers the same bank account, `201`; the same
/// `request_id` with another request is `409`.
#[utoipa::path(post, operation_id = "createBankAccount", path = "/v2/issuance/bank-accounts", tag = "issuance",
    request_body = BankAccountRequest,
    responses(
        (status = 201, description = "Created; the same request again answers the same bank account", body = BankAccount),
        (status = 400, description = "INVALID_REQUEST naming the field; ACCOUNT_NOT_ACTIVE (the identity is not ACTIVE); FIAT_NOT_ENABLED", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
        (status = 409, description = "request_id used with another request", body = ErrorBody),
    ))]
pub async fn create_bank_account(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<(StatusCode, Json<BankAccount>), ApiError> {
    let request: BankAccountRequest = exact(body)?;
    key("request_id", &request.request_id)?;
    key("identity_id", &request.identity_id)?;
    bank::validate("bank_account_details.", &request.bank_account_details)
        .map_err(|errors| ApiError::invalid(errors.join("; ")))?;
    let store = state.store();
    let identity = store.identity(&caller.organization, &request.identity_id).await?;
    let account = BankAccount {
        id: uuid::Uuid::new_v4().to_string(),
        identity_id: identity.id.clone(),
        bank_account_details: Masked::new(request.bank_account_details),
    };
    // A replay answers what the first request made, whatever the identity
    // has become since; a new account needs the identity's entitlement.
    if store.bank_account_by_request(&caller.organization, &request.request_id).await?.is_none() {
        gate(&identity)?;
    }
    let created =
        requested::create_bank_account(store, &caller.organization, &request.request_id, &account).await?;
    Ok((StatusCode::CREATED, Json(created.into_inner())))
}

/// One bank account (the reference's path).
#[utoipa::path(get, operation_id = "getBankAccount", path = "/v2/issuance/bank-account/{id}", tag = "issuance",
    params(("id" = String, Path, description = "The bank account's id")),
    responses(
        (status = 200, description = "The bank account", body = BankAccount),
        (status = 404, description = "No such bank account in the organization", body = ErrorBody),
    ))]
pub async fn get_bank_account(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<BankAccount>, ApiError> {
    Ok(Json(state.store().bank_account(&caller.organization, &id).await?))
}

/// Lists the organization's bank accounts by id (extension).
#[utoipa::path(get, operation_id = "listBankAccounts", path = "/v2/issuance/bank-accounts", tag = "issuance",
    params(
        ("identity_id" = Option<String>, Query, description = "Only this identity's bank accounts"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of bank accounts", body = BankAccountList),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ))]
pub async fn list_bank_accounts(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<BankAccountList>, ApiError> {
    let (identity, after, limit) = page_query(query.as_deref())?;
    let store = state.store();
    let mut bank_accounts = store
        .bank_account_page(&caller.organization, identity.as_deref(), after.as_deref(), limit + 1)
        .await?;
    let cursor = next_cursor(&mut bank_accounts, limit, |a| &a.id);
    Ok(Json(BankAccountList { bank_accounts, cursor }))
}

/// Creates a mint instruction for an `ACTIVE`, fiat-enabled identity
/// (extension): a wire of dollars to `bank_account_details` quoting
/// `memo_id` is minted as `stablecoin_symbol` on `chain` to the address of
/// the account `mint_destination_address_id`.
///
/// Idempotent by `request_id` like the bank accounts.
#[utoipa::path(post, operation_id = "createMintInstruction", path = "/v2/issuance/mint-instructions", tag = "issuance",
    request_body = MintInstructionRequest,
    responses(
        (status = 201, description = "Created; the same request again answers the same instruction", body = MintInstruction),
        (status = 400, description = "INVALID_REQUEST naming the field; ACCOUNT_NOT_ACTIVE; FIAT_NOT_ENABLED", body = ErrorBody),
        (status = 404, description = "No such identity in the organization", body = ErrorBody),
        (status = 409, description = "request_id used with another request", body = ErrorBody),
        (status = 503, description = "ISSUANCE_UNAVAILABLE: no receiving bank is configured", body = ErrorBody),
    ))]
pub async fn create_mint_instruction(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<(StatusCode, Json<MintInstruction>), ApiError> {
    let request: MintInstructionRequest = exact(body)?;
    key("request_id", &request.request_id)?;
    key("identity_id", &request.identity_id)?;
    if let Some(label) = &request.label {
        key("label", label)?;
    }
    let chain: Chain = request.chain.parse().map_err(|e| ApiError::invalid(format!("chain: {e}")))?;
    let store = state.store();
    let identity = store.identity(&caller.organization, &request.identity_id).await?;
    let wanted = MintInstruction {
        id: uuid::Uuid::new_v4().to_string(),
        identity_id: identity.id.clone(),
        request_id: request.request_id.clone(),
        stablecoin_symbol: request.stablecoin_symbol.clone(),
        chain,
        mint_destination_address_id: request.mint_destination_address_id.clone(),
        payment_rail: PAYMENT_RAIL,
        fiat_currency_symbol: FIAT_CURRENCY,
        memo_id: String::new(),
        bank_account_details: Value::Null,
        label: request.label.clone(),
    };
    if let Some(found) = store.mint_instruction_by_request(&caller.organization, &request.request_id).await? {
        let replayed = crate::store::same_instruction(found, &wanted)?;
        return Ok((StatusCode::CREATED, Json(replayed.into_inner())));
    }
    gate(&identity)?;
    let destination_address = destination(&state, &caller.organization, &wanted).await?;
    let bank = state.bank().receiving_account().ok_or_else(|| {
        ApiError::coded(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IssuanceUnavailable,
            "the platform has no receiving bank configured (--receiving-bank): it cannot take wires",
        )
    })?;
    let mut new = NewMintInstruction {
        organization: caller.organization.clone(),
        instruction: MintInstruction { bank_account_details: bank, ..wanted },
        destination_address,
    };
    // A memo drawn twice (1 in 2^50) is drawn again.
    for _ in 0..5 {
        new.instruction.memo_id = issuance::new_memo_id();
        if let Some(created) = requested::create_mint_instruction(store, &new).await? {
            return Ok((StatusCode::CREATED, Json(created.into_inner())));
        }
    }
    Err(ApiError::internal())
}

/// Lists the organization's mint instructions by id.
#[utoipa::path(get, operation_id = "listMintInstructions", path = "/v2/issuance/mint-instructions", tag = "issuance",
    params(
        ("identity_id" = Option<String>, Query, description = "Only this identity's mint instructions"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)"),
        ("cursor" = Option<String>, Query, description = "The cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of mint instructions", body = MintInstructionList),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ))]
pub async fn list_mint_instructions(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<MintInstructionList>, ApiError> {
    let (identity, after, limit) = page_query(query.as_deref())?;
    let store = state.store();
    let mut mint_instructions = store
        .mint_instruction_page(&caller.organization, identity.as_deref(), after.as_deref(), limit + 1)
        .await?;
    let cursor = next_cursor(&mut mint_instructions, limit, |i| &i.id);
    Ok(Json(MintInstructionList { mint_instructions, cursor }))
}

/// A request's key or label: 1 to 256 characters.
pub(super) fn key(field: &str, value: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() || value.len() > 256 {
        return Err(ApiError::invalid(format!("{field}: must be 1 to 256 characters")));
    }
    Ok(())
}

/// The identity's entitlement, as the API answers its absence.
pub(super) fn gate(identity: &Identity) -> Result<(), ApiError> {
    issuance::gate(identity).map_err(|gate| match gate {
        Gate::NotActive(status) => ApiError::coded(
            StatusCode::BAD_REQUEST,
            ErrorCode::AccountNotActive,
            format!("identity {} is {status}, not ACTIVE: it cannot start fiat operations", identity.id),
        ),
        Gate::FiatNotEnabled => ApiError::coded(
            StatusCode::BAD_REQUEST,
            ErrorCode::FiatNotEnabled,
            format!("identity {} is not enabled for fiat operations", identity.id),
        ),
    })
}

/// The address that receives the mint: the one address on the chain of an
/// account of the instruction's identity, for a stablecoin issued there.
async fn destination(
    state: &ApiState,
    organization: &str,
    wanted: &MintInstruction,
) -> Result<String, ApiError> {
    let target = Delivery {
        identity: &wanted.identity_id,
        chain: wanted.chain,
        symbol: &wanted.stablecoin_symbol,
        account: &wanted.mint_destination_address_id,
        fields: ["stablecoin_symbol", "mint_destination_address_id"],
    };
    delivery_address(state, organization, &target).await
}

/// Where a stablecoin issued here is delivered: `symbol` on `chain` to the
/// account `account` of `identity`; `fields` name the symbol's and the
/// account's fields in errors.
pub(super) struct Delivery<'a> {
    pub identity: &'a str,
    pub chain: Chain,
    pub symbol: &'a str,
    pub account: &'a str,
    pub fields: [&'a str; 2],
}

/// The one address of `target`'s account on its chain, when the account
/// is its identity's and the symbol a stablecoin issued on the chain.
pub(super) async fn delivery_address(
    state: &ApiState,
    organization: &str,
    target: &Delivery<'_>,
) -> Result<String, ApiError> {
    let (chain, symbol, [symbol_field, account_field]) = (target.chain, target.symbol, target.fields);
    let config = state
        .chains()
        .get(chain)
        .map_err(|_| ApiError::invalid(format!("chain: {chain} is not served here")))?;
    let issued: Vec<&str> = config.assets.iter().filter(|a| a.issued).map(|a| a.symbol.as_str()).collect();
    if !issued.contains(&symbol) {
        return Err(ApiError::invalid(format!(
            "{symbol_field}: {symbol} is not a stablecoin issued on {chain} (issued there: {})",
            if issued.is_empty() { "none".to_string() } else { issued.join(", ") }
        )));
    }
    let id = target.account;
    let unknown =
        || ApiError::invalid(format!("{account_field}: identity {} has no account {id}", target.identity));
    let account = state.store().account(id).await.map_err(|_| unknown())?;
    if account.organization != organization || account.identity_id != target.identity {
        return Err(unknown());
    }
    let on_chain: Vec<&str> =
        account.addresses.iter().filter(|a| a.chains.contains(&chain)).map(|a| a.address.as_str()).collect();
    match on_chain.as_slice() {
        [address] => Ok((*address).to_string()),
        [] => Err(ApiError::invalid(format!("{account_field}: account {id} has no address on {chain}"))),
        many => Err(ApiError::invalid(format!(
            "{account_field}: account {id} has {} addresses on {chain}; name an account with one",
            many.len()
        ))),
    }
}

/// The list query: `identity_id`, `cursor`, `limit`.
fn page_query(query: Option<&str>) -> Result<(Option<String>, Option<String>, u32), ApiError> {
    let params = Params::parse(query, &["identity_id", "limit", "cursor"])?;
    let limit = params.limit("limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = params.cursor::<Keyset>()?.map(|k| k.id);
    Ok((params.one("identity_id")?.map(String::from), after, limit))
}

/// Cuts `page` (fetched with one row more than `limit`) to `limit` and
/// answers the cursor of the next page, if there is one.
pub(super) fn next_cursor<T>(page: &mut Vec<T>, limit: u32, id: impl Fn(&T) -> &String) -> Option<String> {
    if page.len() <= limit as usize {
        return None;
    }
    page.truncate(limit as usize);
    page.last().map(|last| encode_cursor(&Keyset { id: id(last).clone() }))
}

/// A simulated wire (`sandbox`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FiatDepositRequest {
    /// Dollars: a positive decimal string with at most 2 decimals. The
    /// cents decide the sandbox bank's outcome (see docs/issuance.md).
    pub amount: String,
    /// The `memo_id` of one of the organization's mint instructions.
    pub memo_id: String,
    /// `USD` (`ISSUANCE_SUPPORTED_FIAT_CURRENCY_UNSPECIFIED` is refused).
    #[schema(value_type = crate::schemas::FiatCurrency)]
    pub currency: String,
    /// `WIRE` (`ISSUANCE_SUPPORTED_FIAT_PAYMENT_METHOD_UNSPECIFIED` is refused).
    #[schema(value_type = crate::schemas::FiatPaymentRail)]
    pub payment_rail: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiatDepositAnswer {
    pub mint_id: String,
}

/// Simulates a wire arriving for a mint instruction (`sandbox` only; absent
/// in `production`). It enters the path a real wire does: a `RECEIVED`
/// mint that the sandbox bank settles, rejects or returns by the amount's
/// cents, then mints.
#[utoipa::path(post, operation_id = "simulateFiatDeposit", path = "/v2/simulation/fiat-deposit", tag = "simulation",
    request_body = FiatDepositRequest,
    responses(
        (status = 200, description = "The wire arrived: the mint it started", body = FiatDepositAnswer),
        (status = 400, description = "INVALID_REQUEST naming the field", body = ErrorBody),
        (status = 404, description = "No mint instruction of the organization has this memo_id", body = ErrorBody),
    ))]
pub async fn simulate_fiat_deposit(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Value>,
) -> Result<Json<FiatDepositAnswer>, ApiError> {
    let request: FiatDepositRequest = exact(body)?;
    let cents = Cents::parse(&request.amount).map_err(|e| ApiError::invalid(format!("amount: {e}")))?.0;
    one_of("currency", &request.currency, FIAT_CURRENCY, "ISSUANCE_SUPPORTED_FIAT_CURRENCY_UNSPECIFIED")?;
    one_of(
        "payment_rail",
        &request.payment_rail,
        PAYMENT_RAIL,
        "ISSUANCE_SUPPORTED_FIAT_PAYMENT_METHOD_UNSPECIFIED",
    )?;
    key("memo_id", &request.memo_id)?;
    let reference = format!("SIM-{}", uuid::Uuid::new_v4());
    let wire = NewWire {
        organization: Some(&caller.organization),
        memo_id: &request.memo_id,
        cents,
        reference: &reference,
        source: WireSource::Simulation,
        recorded_by: None,
        reason: None,
        settlement: state.bank().receive(cents),
    };
    let mint = wires::arrive(state.store(), &wire, &state.mint_approval()).await?.into_inner();
    Ok(Json(FiatDepositAnswer { mint_id: mint.id }))
}

/// One mint of the organization (extension): a wire and the stablecoin it
/// became; `status` ends `COMPLETED` or `FAILED`.
#[utoipa::path(get, operation_id = "getMint", path = "/v2/issuance/mints/{id}", tag = "issuance",
    params(("id" = String, Path, description = "The mint's id")),
    responses(
        (status = 200, description = "The mint", body = Mint),
        (status = 404, description = "No such mint in the organization", body = ErrorBody),
    ))]
pub async fn get_mint(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<Mint>, ApiError> {
    Ok(Json(state.store().mint(Some(&caller.organization), &id).await?))
}

/// `value` must be `wanted`; `unspecified` is named as such.
pub(super) fn one_of(field: &str, value: &str, wanted: &str, unspecified: &str) -> Result<(), ApiError> {
    match value {
        v if v == wanted => Ok(()),
        v if v == unspecified => {
            Err(ApiError::invalid(format!("{field}: {unspecified} is not a {field}; use {wanted}")))
        }
        v => Err(ApiError::invalid(format!("{field}: {v:?} is not supported; use {wanted}"))),
    }
}
