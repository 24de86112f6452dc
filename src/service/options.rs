//! What `run` and `serve` are told: how the HTTP API is served, how
//! webhooks are delivered, where events go besides, and what makes a
//! process one instance among others. Each is a set of command-line
//! options (with their environment variables), shared by `dev`.

use std::{net::SocketAddr, num::NonZeroU32, time::Duration};

use anyhow::Context;
use clap::Args;

use crate::{
    api::{OperatorToken, RateLimit, WeakToken},
    conversions::{
        Settings,
        on_ramp::MAX_FEE_BPS,
        quote::{MAX_BPS, Table},
    },
    events::{
        delivery::{DEFAULT_CONCURRENCY, DeliveryConfig, parse_schedule},
        nats::NatsUrl,
        url::Policy,
    },
    store::OrganizationLimits,
};

/// How the HTTP API is served (`run`, `serve`).
#[derive(Debug, Clone, Args)]
pub struct ApiOptions {
    /// The address the HTTP API listens on (port 0: any free port, logged at start).
    #[arg(long, value_name = "ADDR", env = "CUSTODY_INDEXER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Requests per second each API key may make; more get `429` with `Retry-After`.
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_RATE_LIMIT", default_value = "50")]
    pub rate_limit: NonZeroU32,
    /// Requests an API key may make at once above its rate.
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_RATE_LIMIT_BURST", default_value = "100")]
    pub rate_limit_burst: NonZeroU32,
    #[command(flatten)]
    pub gas: GasCredit,
    /// Dollars above which a reconciliation repair asked for through the
    /// service waits for a second treasury operator.
    #[arg(long, value_name = "USD", env = "CUSTODY_INDEXER_REPAIR_SECOND_OPERATOR_ABOVE", default_value = "10000", value_parser = parse_usd_micros)]
    pub repair_second_operator_above: i64,
    #[command(flatten)]
    pub limits: OrgLimits,
    /// How long an identity verification check stays open before it expires.
    #[arg(long, value_name = "SECONDS", env = "CUSTODY_INDEXER_IDV_EXPIRY_SECS", default_value = "86400")]
    pub idv_expiry_secs: u64,
    /// `sandbox` (counterparties simulated: the sandbox compliance provider
    /// decides) or `production` (nothing simulated: compliance decisions by
    /// operators). A store keeps the environment it was first started in.
    #[arg(long, value_name = "ENV", env = "CUSTODY_INDEXER_ENVIRONMENT")]
    pub environment: Option<crate::environment::Environment>,
    /// How often the sandbox compliance provider reviews identities in onboarding.
    #[arg(long, value_name = "MS", env = "CUSTODY_INDEXER_COMPLIANCE_POLL_MS", default_value = "1000")]
    pub compliance_poll_ms: u64,
    /// The bearer token `/metrics` and the detail of `/readyz` require
    /// (at least 32 visible ASCII characters, e.g. `openssl rand -hex 32`).
    /// Without it `/metrics` answers 401 and `/readyz` only whether it is
    /// ready. Prefer the environment variable: arguments show in `ps`.
    #[arg(long, value_name = "TOKEN", env = "CUSTODY_INDEXER_OPERATOR_TOKEN", hide_env_values = true, value_parser = OperatorTokenParser)]
    pub operator_token: Option<OperatorToken>,
    /// The platform's receiving bank, shown in every mint instruction: a
    /// JSON file holding a Bank account details object. Without it,
    /// `production` refuses mint instructions (`503`) and `sandbox` shows
    /// its fixed sandbox bank.
    #[arg(long, value_name = "FILE", env = crate::issuance::receiving::RECEIVING_BANK_ENV)]
    pub receiving_bank: Option<std::path::PathBuf>,
    /// The proxies in front of the service whose `X-Forwarded-For` names
    /// the console's client address (for its sign-in limits): CIDRs or
    /// addresses, separated by commas. Without them the peer's address is
    /// the client's.
    #[arg(long, value_name = "CIDRS", env = "CUSTODY_INDEXER_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_proxy)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    #[command(flatten)]
    pub pricing: Pricing,
}

/// A proxy's address or network: `10.0.0.0/8`, or `192.0.2.1` alone.
fn parse_proxy(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{text:?} is not an address or a CIDR network"))
}

/// Parses `--operator-token` without ever echoing the value: clap's own
/// error for a refused value quotes it, and this one is a secret.
#[derive(Clone)]
struct OperatorTokenParser;

impl clap::builder::TypedValueParser for OperatorTokenParser {
    type Value = OperatorToken;

    fn parse_ref(
        &self,
        _: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<OperatorToken, clap::Error> {
        let name = arg.map_or_else(|| "--operator-token".to_string(), ToString::to_string);
        let refused = |error: WeakToken| {
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("invalid {name}: {error}\n"))
        };
        OperatorToken::parse(value.to_str().ok_or(WeakToken).map_err(refused)?).map_err(refused)
    }
}

/// What each organization may hold through the API; reaching a limit
/// answers `409 ORGANIZATION_LIMIT_REACHED`. Operators' commands are not
/// limited, except API keys (50 active per organization, always).
#[derive(Debug, Clone, Args)]
pub struct OrgLimits {
    /// Accounts per organization (CLOSED ones do not count).
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_ORG_MAX_ACCOUNTS", default_value_t = OrganizationLimits::DEFAULT_ACCOUNTS)]
    pub org_max_accounts: u32,
    /// Identities per organization (REJECTED and TERMINATED ones do not count).
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_ORG_MAX_IDENTITIES", default_value_t = OrganizationLimits::DEFAULT_IDENTITIES)]
    pub org_max_identities: u32,
    /// Webhooks per organization (deleted ones do not count).
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_ORG_MAX_WEBHOOKS", default_value_t = OrganizationLimits::DEFAULT_WEBHOOKS)]
    pub org_max_webhooks: u32,
}

impl OrgLimits {
    pub(crate) fn limits(&self) -> OrganizationLimits {
        OrganizationLimits {
            accounts: self.org_max_accounts,
            identities: self.org_max_identities,
            webhooks: self.org_max_webhooks,
        }
    }
}

/// Each organization's sponsored-gas credit.
#[derive(Debug, Clone, Args)]
pub struct GasCredit {
    /// USD of network fees the platform pays for each organization before
    /// billing it.
    #[arg(long = "gas-credit-usd", value_name = "USD", env = "CUSTODY_INDEXER_GAS_CREDIT_USD", default_value = "100", value_parser = parse_usd_micros)]
    pub usd_micros: i64,
}

fn parse_usd_micros(text: &str) -> Result<i64, String> {
    let amount = crate::amount::Amount::parse(text, crate::store::USD_DECIMALS).map_err(|e| e.to_string())?;
    i64::try_from(amount.raw()).map_err(|_| format!("{text} USD is too large"))
}

impl ApiOptions {
    pub(crate) fn rate_limit(&self) -> RateLimit {
        RateLimit { per_second: self.rate_limit, burst: self.rate_limit_burst }
    }

    /// The receiving bank of `--receiving-bank`, checked.
    pub(crate) fn receiving_bank(&self) -> anyhow::Result<Option<serde_json::Value>> {
        let Some(path) = &self.receiving_bank else { return Ok(None) };
        crate::issuance::receiving::load(path).map(Some).map_err(|e| anyhow::anyhow!("--receiving-bank: {e}"))
    }

    pub(crate) fn compliance(&self) -> crate::identity::provider::Options {
        crate::identity::provider::Options {
            poll: std::time::Duration::from_millis(self.compliance_poll_ms.max(10)),
            idv_expiry: std::time::Duration::from_secs(self.idv_expiry_secs),
            ..Default::default()
        }
    }
}

/// The on-ramp fee of the virtual accounts `run` and `serve` open.
#[derive(Debug, Clone, Copy, Args)]
pub struct OnRampFee {
    /// The on-ramp fee in basis points of the wire (0 to 1000), fixed on
    /// each virtual account when it is opened: the stablecoin delivered is
    /// the wire less this fee, rounded in the
    /// client's favour.
    #[arg(long = "on-ramp-fee-bps", value_name = "BPS", env = "CUSTODY_INDEXER_ON_RAMP_FEE_BPS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_FEE_BPS)))]
    pub bps: u32,
}

/// How `run` and `serve` price conversions.
#[derive(Debug, Clone, Args)]
pub struct Pricing {
    #[command(flatten)]
    pub on_ramp_fee: OnRampFee,
    /// The off-ramp fee in basis points of the stablecoin (0 to 1000),
    /// bound to each quote.
    #[arg(long, value_name = "BPS", env = "CUSTODY_INDEXER_OFF_RAMP_FEE_BPS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_BPS)))]
    pub off_ramp_fee_bps: u32,
    /// How far below the mid rate quotes price, in basis points (0 to 1000).
    #[arg(long, value_name = "BPS", env = "CUSTODY_INDEXER_QUOTE_SPREAD_BPS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_BPS)))]
    pub quote_spread_bps: u32,
    /// The rates quotes use, per US dollar: `EUR=0.92,MXN=17.25`. Without
    /// it `sandbox` uses its fixed table and `production` quotes nothing.
    #[arg(long, value_name = "RATES", env = "CUSTODY_INDEXER_CONVERSION_RATES", value_parser = Table::parse)]
    pub conversion_rates: Option<Table>,
    /// How long a quote may be used, in seconds (1 to 3600).
    #[arg(long, value_name = "SECS", env = "CUSTODY_INDEXER_QUOTE_TTL_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub quote_ttl_secs: u64,
}

impl Pricing {
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            on_ramp_fee_bps: self.on_ramp_fee.bps,
            off_ramp_fee_bps: self.off_ramp_fee_bps,
            spread_bps: self.quote_spread_bps,
            rates: self.conversion_rates.clone(),
            quote_ttl: std::time::Duration::from_secs(self.quote_ttl_secs),
        }
    }
}

/// Where `run` publishes events besides webhooks, and how long the outbox
/// keeps them.
#[derive(Debug, Clone, Args)]
pub struct EventOptions {
    /// Publish every event to NATS JetStream (stream `CUSTODY_EVENTS`,
    /// subjects `custody.events.<organization>.<event type>`):
    /// `nats://[user:password@]host:4222`, several separated by commas.
    #[arg(long, value_name = "URL", env = "CUSTODY_INDEXER_NATS_URL", hide_env_values = true)]
    pub nats_url: Option<NatsUrl>,
    /// How long the outbox keeps an event once every webhook and sink has
    /// taken it (e.g. 30d, 12h).
    #[arg(long, value_name = "DURATION", env = "CUSTODY_INDEXER_EVENT_RETENTION", default_value = "30d", value_parser = one_duration)]
    pub event_retention: Duration,
}

impl Default for EventOptions {
    fn default() -> Self {
        Self { nats_url: None, event_retention: DEFAULT_RETENTION }
    }
}

/// The outbox's default retention: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Clone, Args)]
pub struct InstanceOptions {
    /// How long a chain's watcher or sender lease lasts unrenewed: the
    /// instance holding it renews it every third of this; another takes the
    /// chain over within this (plus a third) after the holder dies.
    #[arg(long, value_name = "DURATION", env = "CUSTODY_INDEXER_WORKER_LEASE", default_value = "15s", value_parser = one_duration)]
    pub worker_lease: Duration,
    #[command(flatten)]
    pub audit: AuditOptions,
}

/// The audit log's signed checkpoints `run` writes: one instance at a
/// time, every period, when `CUSTODY_INDEXER_AUDIT_KEY_FILE` names the key.
#[derive(Debug, Clone, Args)]
pub struct AuditOptions {
    /// Seconds between two signed checkpoints of the audit log.
    #[arg(long, value_name = "SECS", env = "CUSTODY_INDEXER_AUDIT_CHECKPOINT_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub audit_checkpoint_secs: u64,
    /// A directory each checkpoint is also written to, one file each
    /// (besides the NATS sink's `custody.events.platform.audit_checkpoint`).
    #[arg(long, value_name = "DIR", env = "CUSTODY_INDEXER_AUDIT_CHECKPOINT_DIR")]
    pub audit_checkpoint_dir: Option<std::path::PathBuf>,
}

/// How `run` delivers webhooks.
#[derive(Debug, Clone, Args)]
pub struct DeliveryOptions {
    /// Deliveries in flight at once in this process (0: do not deliver).
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_WEBHOOK_CONCURRENCY", default_value_t = DEFAULT_CONCURRENCY)]
    pub webhook_concurrency: usize,
    /// Of those, at most this many of one organization, so that one whose
    /// receiver is slow or down leaves the others their turn (default: a
    /// quarter of --webhook-concurrency, at least 1).
    #[arg(long, value_name = "N", env = "CUSTODY_INDEXER_WEBHOOK_ORGANIZATION_CONCURRENCY")]
    pub webhook_organization_concurrency: Option<usize>,
    /// How long a receiver has to answer 2xx.
    #[arg(long, value_name = "DURATION", env = "CUSTODY_INDEXER_WEBHOOK_TIMEOUT", default_value = "15s", value_parser = one_duration)]
    pub webhook_timeout: Duration,
    /// The waits between attempts (default: 5s,5m,30m,2h,5h,10h×6, about three days).
    #[arg(long, value_name = "LIST", env = "CUSTODY_INDEXER_WEBHOOK_RETRY_SCHEDULE")]
    pub webhook_retry_schedule: Option<String>,
}

impl DeliveryOptions {
    pub fn config(&self) -> anyhow::Result<DeliveryConfig> {
        let mut config = DeliveryConfig {
            concurrency: self.webhook_concurrency,
            per_organization: self
                .webhook_organization_concurrency
                .unwrap_or(self.webhook_concurrency / 4)
                .max(1),
            timeout: self.webhook_timeout,
            policy: Policy::from_env(),
            ..DeliveryConfig::default()
        };
        if let Some(schedule) = &self.webhook_retry_schedule {
            config.schedule =
                parse_schedule(schedule).map_err(anyhow::Error::msg).context("--webhook-retry-schedule")?;
        }
        Ok(config)
    }
}

/// One duration such as `24h` or `250ms`.
pub fn one_duration(text: &str) -> Result<Duration, String> {
    match parse_schedule(text)?.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!("{text:?} is not one duration such as 24h")),
    }
}
