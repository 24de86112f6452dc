//! The outbox's sinks and retention: `run`'s `--nats-url` and
//! `--event-retention`, and `custody-indexer events …` for operators.

use std::time::Duration;

use clap::{Args, Subcommand};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::webhooks::one_duration;
use crate::{
    events::nats::{self, NatsConfig, NatsUrl},
    store::{Store, now_micros},
};

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

/// How often `run` purges the outbox.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// The sinks' cursors: the last event each has taken and how many are behind it.
    Sinks {
        #[arg(long)]
        json: bool,
    },
    /// Forget a sink that will not run again, so the purge no longer waits for it.
    RemoveSink { name: String },
    /// Remove now the events older than the retention that every webhook
    /// and sink has taken (`run` does it every hour).
    Purge {
        #[arg(long, value_name = "DURATION", env = "CUSTODY_INDEXER_EVENT_RETENTION", default_value = "30d", value_parser = one_duration)]
        older_than: Duration,
    },
}

pub async fn run(store: &Store, command: EventsCommand) -> anyhow::Result<()> {
    match command {
        EventsCommand::Sinks { json } => {
            let sinks = store.sinks().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sinks)?);
            } else if sinks.is_empty() {
                println!("no sinks");
            }
            for s in sinks.iter().filter(|_| !json) {
                let holder = s.lease_owner.as_deref().unwrap_or("nobody");
                println!("{}  last event {}  {} behind  held by {holder}", s.name, s.last_seq, s.behind);
            }
        }
        EventsCommand::RemoveSink { name } => {
            if !store.remove_sink(&name).await? {
                anyhow::bail!("no sink named {name:?}");
            }
            println!("removed sink {name}");
        }
        EventsCommand::Purge { older_than } => {
            let removed = store.purge_events(cutoff(older_than)).await?;
            println!("removed {removed} event{}", if removed == 1 { "" } else { "s" });
        }
    }
    Ok(())
}

/// Starts `run`'s outbox tasks beside the others: the NATS sink when
/// configured, and the hourly purge.
pub fn spawn(
    tasks: &mut tokio::task::JoinSet<anyhow::Result<()>>,
    store: &Store,
    options: EventOptions,
    owner: &str,
    shutdown: &CancellationToken,
) {
    if let Some(url) = options.nats_url {
        let (store, owner, shutdown) = (store.clone(), owner.to_string(), shutdown.clone());
        tasks.spawn(async move {
            nats::run(store, NatsConfig::new(url), owner, shutdown).await;
            Ok(())
        });
    }
    let (store, shutdown) = (store.clone(), shutdown.clone());
    tasks.spawn(async move {
        loop {
            match store.purge_events(cutoff(options.event_retention)).await {
                Ok(0) => {}
                Ok(removed) => info!(removed, "purged the outbox's expired events"),
                Err(error) => warn!(%error, "cannot purge the outbox"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(PURGE_EVERY) => {}
            }
        }
    });
}

fn cutoff(retention: Duration) -> i64 {
    now_micros().saturating_sub(retention.as_micros().min(i64::MAX as u128) as i64)
}
