//! `custody-indexer webhooks …`: the webhook endpoints' equivalents for
//! operators, the dead-letter queue, and a signature checker for receivers.

use std::{io::Read, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context;
use clap::Subcommand;

use crate::{
    audit::Actor,
    events::{
        signing::{Secret, verify},
        url::Policy,
    },
    service::options::one_duration,
    store::{Delivery, Webhook},
    webhooks,
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
            let target = (url.as_str(), label.as_str());
            let webhook =
                webhooks::register(&store, &organization, target, secret.expose(), &Actor::local(None))
                    .await?;
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
            webhooks::delete(&store, None, &id, &Actor::local(None)).await?;
            println!("deleted webhook {id}");
        }
        WebhooksCommand::Rotate { id, previous_key_expires_in } => {
            let (webhook, secret) =
                webhooks::rotate(&store, None, &id, previous_key_expires_in, &Actor::local(None)).await?;
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
            webhooks::redeliver(&store, &id, &Actor::local(None)).await?;
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
