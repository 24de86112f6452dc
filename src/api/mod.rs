//! The HTTP API: the deposit store and the chain-facing reads under `/v2`
//! (every request authenticated by an organization's API key and scoped to
//! that organization), operator health at `/healthz`, `/readyz` and
//! `/metrics` (the latter two's detail behind the operator token), and the
//! OpenAPI document generated from the handlers at `/openapi.json`.

mod accounts;
pub(crate) mod assets;
mod auth;
mod body;
mod conversions;
mod deposits;
mod doc;
mod error;
mod identities;
mod instance;
mod issuance;
mod off_ramps;
mod operator;
mod operator_api;
mod ops;
mod params;
mod quotes;
mod signature;
mod transfers;
mod webhooks;

use std::{num::NonZeroU32, sync::Arc, time::Duration};

use axum::{Router, middleware};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityRequirement, SecurityScheme},
};
use utoipa_axum::{router::OpenApiRouter, routes};

pub use body::Body;
pub use error::{ApiError, ErrorBody, ErrorCode};
pub use operator::{OperatorToken, WeakToken};
pub use ops::{method_not_allowed, not_found};

use crate::{
    assets::BalanceReader,
    chain::Chain,
    config::Chains,
    environment::Environment,
    events::url::Policy,
    keys::Signer,
    store::{OrganizationLimits, Store},
};

/// Requests per second each API key may make, with bursts up to `burst`.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    pub per_second: NonZeroU32,
    pub burst: NonZeroU32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: NonZeroU32::new(50).expect("nonzero"),
            burst: NonZeroU32::new(100).expect("nonzero"),
        }
    }
}

#[derive(Clone)]
pub struct ApiState(Arc<Inner>);

struct Inner {
    store: Store,
    balances: BalanceReader,
    limiter: DefaultKeyedRateLimiter<String>,
    /// The chains `/readyz` requires; empty: every chain with a recorded step.
    required: Vec<Chain>,
    webhook_policy: Policy,
    /// How long a rotated-out signing key keeps signing.
    key_overlap: Duration,
    /// Signs transfers; without it transfers are refused.
    signer: Option<Arc<dyn Signer>>,
    /// Each organization's sponsored-gas credit, in micro-USD.
    gas_credit_usd_micros: i64,
    /// Sandbox or production: whether the sandbox compliance provider runs.
    environment: Environment,
    /// How the sandbox compliance provider's worker runs.
    compliance: crate::identity::provider::Options,
    /// What `/metrics` and the detail of `/readyz` require; without one
    /// neither is shown.
    operator_token: Option<OperatorToken>,
    /// The proxies whose `X-Forwarded-For` names the console's client.
    trusted_proxies: Arc<Vec<ipnet::IpNet>>,
    /// The platform's bank: the environment's (see
    /// [`crate::bank::for_environment`]) unless one was given.
    bank: Arc<dyn crate::bank::Bank>,
    /// How conversions are priced.
    conversions: crate::conversions::Settings,
    /// Where invitations are mailed; without it production invites no one.
    mail: Option<Arc<crate::mail::MailSettings>>,
    /// Micro-USD above which a reconciliation repair waits for a second
    /// treasury operator.
    repair_above_usd_micros: u128,
    /// Set when the process begins to stop: `/readyz` answers `503` from then.
    draining: std::sync::atomic::AtomicBool,
    /// The leases this process holds (see [`crate::lease::Leases::holding`]):
    /// a stopping listener answers until they are given up.
    leases: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// Closed on a chain while a restore waits for its recovery: its
    /// transfers are refused (see [`crate::restore`]).
    gate: crate::restore::gate::Gate,
}

/// Each organization's sponsored-gas credit: 100 USD.
pub const DEFAULT_GAS_CREDIT_USD_MICROS: i64 = 100_000_000;

/// A repair worth more than 10,000 USD waits for a second operator.
pub const DEFAULT_REPAIR_ABOVE_USD_MICROS: u128 = 10_000_000_000;

/// How long the previous signing key stays valid after a rotation.
pub const DEFAULT_KEY_OVERLAP: Duration = Duration::from_secs(24 * 3600);

impl ApiState {
    pub fn new(store: Store, chains: Chains, required: Vec<Chain>, rate_limit: RateLimit) -> Self {
        let quota = Quota::per_second(rate_limit.per_second).allow_burst(rate_limit.burst);
        Self(Arc::new(Inner {
            store: store.with_limits(OrganizationLimits::default()),
            balances: crate::family::balance_reader(chains),
            limiter: RateLimiter::keyed(quota),
            required,
            webhook_policy: Policy::from_env(),
            key_overlap: DEFAULT_KEY_OVERLAP,
            signer: None,
            gas_credit_usd_micros: DEFAULT_GAS_CREDIT_USD_MICROS,
            environment: Environment::Production,
            compliance: Default::default(),
            operator_token: None,
            trusted_proxies: Default::default(),
            bank: crate::bank::for_environment(Environment::Production, None),
            conversions: Default::default(),
            mail: None,
            repair_above_usd_micros: DEFAULT_REPAIR_ABOVE_USD_MICROS,
            draining: Default::default(),
            leases: None,
            gate: Default::default(),
        }))
    }

    /// Repairs worth more than `usd_micros` wait for a second operator.
    pub fn with_repairs(mut self, usd_micros: u128) -> Self {
        Arc::get_mut(&mut self.0).expect("configured before it is shared").repair_above_usd_micros =
            usd_micros;
        self
    }

    pub fn repair_above_usd_micros(&self) -> u128 {
        self.0.repair_above_usd_micros
    }

    /// Serves `environment` (by default `production`) with its bank (set
    /// one after this); in `sandbox` the sandbox compliance provider's
    /// worker runs with `options`.
    pub fn with_compliance(
        mut self,
        environment: Environment,
        options: crate::identity::provider::Options,
    ) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.environment = environment;
        inner.compliance = options;
        inner.bank = crate::bank::for_environment(environment, None);
        self
    }

    /// The environment's bank, production's showing `receiving` as the
    /// receiving bank of mint instructions (a sandbox shows only its own:
    /// it never shows real wiring instructions, where a client could send
    /// real money to a platform that only simulates).
    pub fn with_receiving_bank(self, receiving: Option<serde_json::Value>) -> Self {
        let bank = crate::bank::for_environment(self.0.environment, receiving);
        self.with_bank(bank)
    }

    /// Works with `bank`.
    pub fn with_bank(mut self, bank: Arc<dyn crate::bank::Bank>) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.bank = bank;
        self
    }

    /// The platform's bank.
    pub fn bank(&self) -> &Arc<dyn crate::bank::Bank> {
        &self.0.bank
    }

    /// Prices conversions with `settings` (by default no on-ramp fee).
    pub fn with_conversions(mut self, settings: crate::conversions::Settings) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.conversions = settings;
        self
    }

    fn conversions(&self) -> &crate::conversions::Settings {
        &self.0.conversions
    }

    /// The rates quotes use: the configured ones; in `sandbox` without
    /// them, the sandbox's fixed table; in `production` without them, none.
    fn prices(&self) -> Option<crate::conversions::quote::Table> {
        match (&self.0.conversions.rates, self.0.environment) {
            (Some(table), _) => Some(table.clone()),
            (None, Environment::Sandbox) => {
                crate::conversions::quote::Table::parse(crate::conversions::quote::SANDBOX_RATES).ok()
            }
            (None, Environment::Production) => None,
        }
    }

    /// When a settled wire's mint waits for a second operator's approval:
    /// always in `production`, above the daily mint caps in `sandbox`.
    pub fn mint_approval(&self) -> crate::issuance::Approval {
        crate::issuance::Approval::new(self.0.environment == Environment::Production, self.chains())
    }

    /// Limits what each organization may create to `limits` (by default
    /// [`OrganizationLimits::default`]).
    pub fn with_limits(mut self, limits: OrganizationLimits) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.store = inner.store.clone().with_limits(limits);
        self
    }

    /// Enables transfers signed by `signer`, with each organization's gas
    /// credit in micro-USD.
    pub fn with_transfers(mut self, signer: Option<Arc<dyn Signer>>, gas_credit_usd_micros: i64) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.signer = signer;
        inner.gas_credit_usd_micros = gas_credit_usd_micros;
        self
    }

    /// Where webhooks registered through the API may point (default: the
    /// environment's `ALLOW_PRIVATE_WEBHOOK_URLS`).
    pub fn with_webhook_policy(mut self, policy: Policy) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.webhook_policy = policy;
        self
    }

    /// Believes `X-Forwarded-For` from these proxies only (CIDRs), to tell
    /// the console's client address (see [`crate::people::rules::client_address`]).
    pub fn with_trusted_proxies(mut self, proxies: Vec<ipnet::IpNet>) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.trusted_proxies = Arc::new(proxies);
        self
    }

    /// Mails invitations through `mail` (and builds their links on its
    /// public address).
    pub fn with_mail(mut self, mail: Option<crate::mail::MailSettings>) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.mail = mail.map(Arc::new);
        self
    }

    /// Where mail goes, when configured.
    pub fn mail(&self) -> Option<&Arc<crate::mail::MailSettings>> {
        self.0.mail.as_ref()
    }

    /// How invitations' links are built, when mail is configured.
    pub fn invitations(&self) -> Option<&crate::mail::Invitations> {
        self.0.mail.as_deref().map(|mail| &mail.invitations)
    }

    /// The proxies whose `X-Forwarded-For` is believed.
    pub fn trusted_proxies(&self) -> &[ipnet::IpNet] {
        &self.0.trusted_proxies
    }

    /// Shows `/metrics` and the detail of `/readyz` to requests bearing
    /// `token`; without one (the default) they are shown to nobody.
    pub fn with_operator_token(mut self, token: Option<OperatorToken>) -> Self {
        let inner = Arc::get_mut(&mut self.0).expect("configured before it is shared");
        inner.operator_token = token;
        self
    }

    /// Whether an operator token was configured.
    pub fn has_operator_token(&self) -> bool {
        self.0.operator_token.is_some()
    }

    /// Whether the request bears the operator token, or an enabled
    /// operator's live key.
    async fn operator(&self, headers: &axum::http::HeaderMap) -> bool {
        if self.0.operator_token.as_ref().is_some_and(|token| token.admits(headers)) {
            return true;
        }
        let Some(token) = auth::bearer(headers) else { return false };
        matches!(crate::operators::authenticate(self.store(), token).await, Ok(Some(_)))
    }

    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// Where webhooks may point.
    pub(crate) fn webhook_policy(&self) -> &Policy {
        &self.0.webhook_policy
    }

    /// How long a rotated-out webhook signing key keeps signing.
    pub(crate) fn key_overlap(&self) -> Duration {
        self.0.key_overlap
    }

    pub fn chains(&self) -> &Chains {
        self.0.balances.chains()
    }

    /// The environment served: whether the sandbox compliance provider runs.
    pub fn environment(&self) -> Environment {
        self.0.environment
    }

    /// How the sandbox compliance provider's worker runs.
    pub fn compliance(&self) -> crate::identity::provider::Options {
        self.0.compliance
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "custody-indexer",
        description = "Deposits, accounts, balances and assets of a custody platform's chains. \
            Every /v2 request needs `Authorization: Bearer <API_KEY>` and sees only its organization's data; \
            a key paired with a public key also needs `X-Request-Signature` (see the `request_signature` scheme). \
            Errors share one shape: `{ \"code\": \"…\", \"message\": \"…\" }`."
    ),
    modifiers(&BearerAuth),
    security(("api_key" = []))
)]
struct ApiDoc;

struct BearerAuth;

/// How a request of a key paired with a public key is signed.
const REQUEST_SIGNATURE: &str = "Required on every request of an API key paired with a public key \
    (`api-keys pair`); keys that are not paired send none. A compact JWT (JWS) signed by the paired key's \
    private key. Header `alg`: `ES256` (P-256 key) or `EdDSA` (Ed25519 key), matching the paired key; \
    anything else, `none` and HMAC included, is refused. Claims: `sub` the API key's id, `method` the \
    request's method (upper case), `uri` its path and, when present, `?` and the query exactly as sent, \
    `body_hash` the lower-case hex SHA-256 of the raw body (of the empty string when there is none), \
    `iat` and `exp` in seconds (`exp` after `iat` by at most 120 s; 30 s of clock skew tolerated), `jti` \
    unique (1 to 128 characters; each token is accepted once). A refused signature is `401` \
    `INVALID_SIGNATURE`, its message naming the failed check.";

const API_KEY: &str = "An organization's API key, sent as `Authorization: Bearer <API_KEY>` on every /v2 \
    request. Created by an operator (`api-keys create`); only its hash is stored, so it is shown once.";

const OPERATOR_TOKEN: &str = "The operator token (`--operator-token` or `CUSTODY_INDEXER_OPERATOR_TOKEN`), sent \
    as `Authorization: Bearer <OPERATOR_TOKEN>`: `/metrics` and the detail of `/readyz` need it.";

const OPERATOR_KEY: &str = "An operator's key, sent as `Authorization: Bearer <OPERATOR_KEY>` on every \
    /operator/v1 request (and accepted where the operator token is). Printed once by `operators create` or \
    `operators keys create`; a disabled operator's keys stop working at once.";

fn bearer(format: Option<&str>, description: &str) -> SecurityScheme {
    let mut scheme = Http::new(HttpAuthScheme::Bearer);
    scheme.bearer_format = format.map(String::from);
    scheme.description = Some(description.to_string());
    SecurityScheme::Http(scheme)
}

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("api_key", bearer(Some("cik_<id>_<secret>"), API_KEY));
        // `/metrics` and the detail of `/readyz`: `--operator-token`, not an API key.
        components.add_security_scheme("operator_token", bearer(None, OPERATOR_TOKEN));
        components.add_security_scheme("operator_key", bearer(Some("cio_<id>_<secret>"), OPERATOR_KEY));
        components.add_security_scheme(
            "request_signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Request-Signature",
                REQUEST_SIGNATURE,
            ))),
        );
        // Either the bearer key alone, or (a paired key) with a signature.
        let signed = SecurityRequirement::new("api_key", Vec::<String>::new())
            .add("request_signature", Vec::<String>::new());
        openapi.security.get_or_insert_with(Vec::new).push(signed);
    }
}

/// The `/v2` routes and their OpenAPI document, built from the same handlers.
fn v2() -> (Router<ApiState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(deposits::list))
        .routes(routes!(deposits::get))
        .routes(routes!(identities::create, identities::list))
        .routes(routes!(identities::get))
        .routes(routes!(identities::compliance))
        .routes(routes!(identities::id_verification_list))
        .routes(routes!(identities::id_verification))
        .routes(routes!(accounts::create, accounts::list))
        .routes(routes!(accounts::get))
        .routes(routes!(assets::balances))
        .routes(routes!(assets::list))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::delete))
        .routes(routes!(webhooks::rotate))
        .routes(routes!(webhooks::revoke_previous_keys))
        .routes(routes!(webhooks::events))
        .routes(routes!(transfers::create, transfers::list))
        .routes(routes!(transfers::get))
        .routes(routes!(transfers::policy))
        .routes(routes!(transfers::gas_usage))
        .routes(routes!(issuance::create_bank_account, issuance::list_bank_accounts))
        .routes(routes!(issuance::get_bank_account))
        .routes(routes!(issuance::create_mint_instruction, issuance::list_mint_instructions))
        .routes(routes!(issuance::get_mint))
        .routes(routes!(conversions::create_virtual_account, conversions::list_virtual_accounts))
        .routes(routes!(conversions::get_conversion))
        .routes(routes!(off_ramps::create_conversion))
        .routes(routes!(quotes::create_quote))
        .split_for_parts()
}

/// The `sandbox`'s simulation routes: absent from `production`, its
/// router and its document alike.
fn simulation() -> (Router<ApiState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::new()
        .routes(routes!(issuance::simulate_fiat_deposit))
        .routes(routes!(conversions::simulate_virtual_account_deposit))
        .split_for_parts()
}

/// The OpenAPI document of the whole API as `environment` serves it.
pub fn openapi(environment: Environment) -> utoipa::openapi::OpenApi {
    let (_, mut document) = v2();
    if environment == Environment::Sandbox {
        document.merge(simulation().1);
    }
    document.merge(ops::openapi());
    document.merge(operator_api::routes().1);
    doc::finish(&mut document);
    document
}

/// The API's routes (`/v2`, the simulation in `sandbox`, the operator API,
/// the operator health and the OpenAPI document), served by
/// [`crate::server`] beside the console's pages.
pub fn routes(state: &ApiState) -> Router<ApiState> {
    let (mut v2, _) = v2();
    if state.0.environment == Environment::Sandbox {
        v2 = v2.merge(simulation().0);
    }
    // There is no conversion list: `GET /v2/conversions` answers 405.
    let v2 = v2.layer(middleware::from_fn_with_state(state.clone(), auth::authenticate));
    let mut document = openapi(state.0.environment);
    let mut issued: Vec<String> = state
        .chains()
        .iter()
        .flat_map(|chain| chain.assets.iter().filter(|a| a.issued).map(|a| a.symbol.clone()))
        .collect();
    issued.sort();
    issued.dedup();
    doc::issued_currencies(&mut document, &issued);
    let document = Arc::new(document);
    Router::new().merge(v2).merge(operator_api::router(state.clone())).merge(ops::router(document))
}
