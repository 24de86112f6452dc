//! `custody-indexer webhooks …`: the webhook endpoints' equivalents for
//! operators, the dead-letter queue, and a signature checker for receivers.

use std::{io::Read, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::{
    events::{
        delivery::{DEFAULT_CONCURRENCY, DeliveryConfig, parse_schedule},
        signing::{Secret, verify},
        url::Policy,
    },
    store::{Delivery, Webhook},
};

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Register a webhook; its signing secret is printed once, alone on the last line.
    Create {
        #[arg(long)]
        organization: String,
        /// `https` URL (plain `http` and private addresses only with ALLOW_PRIVATE_WEBHOOK_URLS=true).
        #[arg(long)]
        url: String,
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List webhooks (never their secrets).
    List {
        #[arg(long)]
        organization: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Delete a webhook: its pending deliveries end.
    Delete { id: String },
    /// Replace a webhook's signing key; the new secret is printed once, on the last line.
    /// Keys rotated out earlier keep signing until their own expiry; of
    /// those, the newest two are kept and older ones dropped at once.
    Rotate {
        id: String,
        /// How long the replaced key keeps signing (e.g. 24h, 30m).
        #[arg(long, default_value = "24h", value_parser = one_duration)]
        previous_key_expires_in: Duration,
    },
    /// List deliveries, newest first.
    Deliveries {
        /// Only the dead-lettered ones.
        #[arg(long)]
        failed: bool,
        #[arg(long)]
        webhook: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Send a dead-lettered delivery again, with a fresh retry schedule.
    Redeliver { id: String },
    /// Check a received webhook's signature (exit 0 when valid, 1 otherwise).
    Verify {
        /// The webhook's signing secret (`whsec_…`), or set WEBHOOK_SECRET.
        #[arg(long, env = "WEBHOOK_SECRET", hide_env_values = true)]
        secret: String,
        /// The `webhook-id` header.
        #[arg(long)]
        id: String,
        /// The `webhook-timestamp` header.
        #[arg(long)]
        timestamp: String,
        /// The `webhook-signature` header.
        #[arg(long)]
        signature: String,
        /// The raw body (default: standard input).
        #[arg(long)]
        body_file: Option<PathBuf>,
    },
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

pub(super) fn one_duration(text: &str) -> Result<Duration, String> {
    match parse_schedule(text)?.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!("{text:?} is not one duration such as 24h")),
    }
}

pub async fn webhooks(url: &str, command: WebhooksCommand) -> anyhow::Result<ExitCode> {
    if let WebhooksCommand::Verify { secret, id, timestamp, signature, body_file } = command {
        return verify_command(&secret, &id, &timestamp, &signature, body_file);
    }
    // Signing secrets are sealed with the personal-data key.
    let store = super::identities::open(url).await?;
    match command {
        WebhooksCommand::Create { organization, url, label } => {
            // A store not yet started is judged as production, its default.
            let environment =
                store.environment().await?.unwrap_or(crate::environment::Environment::Production);
            let url = Policy::from_env().within(environment).check(&url).await?;
            let secret = Secret::generate();
            let webhook = store.create_webhook(&organization, url.as_str(), &label, secret.expose()).await?;
            print_webhook(&webhook);
            println!("the signing secret below is shown once; store it now:");
            println!("{}", secret.expose());
        }
        WebhooksCommand::List { organization, json } => {
            let webhooks = store.webhooks(organization.as_deref()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&webhooks)?);
            } else if webhooks.is_empty() {
                println!("no webhooks");
            } else {
                webhooks.iter().for_each(print_webhook);
            }
        }
        WebhooksCommand::Delete { id } => {
            store.delete_webhook(None, &id).await?;
            println!("deleted webhook {id}");
        }
        WebhooksCommand::Rotate { id, previous_key_expires_in } => {
            let secret = Secret::generate();
            let webhook =
                store.rotate_signing_key(None, &id, secret.expose(), previous_key_expires_in).await?;
            print_webhook(&webhook);
            println!("the new signing secret below is shown once; store it now:");
            println!("{}", secret.expose());
        }
        WebhooksCommand::Deliveries { failed, webhook, json } => {
            let deliveries = store.deliveries(failed, webhook.as_deref()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&deliveries)?);
            } else if deliveries.is_empty() {
                println!("no deliveries");
            } else {
                deliveries.iter().for_each(print_delivery);
            }
        }
        WebhooksCommand::Redeliver { id } => {
            store.redeliver(&id).await?;
            println!("delivery {id} is queued again");
        }
        WebhooksCommand::Verify { .. } => unreachable!("handled above"),
    }
    Ok(ExitCode::SUCCESS)
}

fn verify_command(
    secret: &str,
    id: &str,
    timestamp: &str,
    signature: &str,
    body_file: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let secret = Secret::parse(secret)?;
    let body = match body_file {
        Some(path) => std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
        None => {
            let mut body = Vec::new();
            std::io::stdin().read_to_end(&mut body)?;
            body
        }
    };
    match verify(&secret, id, timestamp, signature, &body, chrono::Utc::now().timestamp()) {
        Ok(()) => {
            println!("valid");
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            println!("invalid: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print_webhook(w: &Webhook) {
    let label = if w.label.is_empty() { String::new() } else { format!(" ({})", w.label) };
    println!("{}  {}{label}  {}  signing key {}", w.id, w.url, w.status, w.signing_key_id);
}

fn print_delivery(d: &Delivery) {
    let last = match (&d.last_status, &d.last_error) {
        (Some(status), _) => format!("last answer {status}"),
        (None, Some(error)) => format!("last error: {error}"),
        (None, None) => "not attempted yet".into(),
    };
    println!(
        "{}  {:9}  {} {} to {}  {} attempts, {last}",
        d.id, d.state, d.event_type, d.event_id, d.url, d.attempts
    );
}
