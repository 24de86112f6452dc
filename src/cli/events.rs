//! `custody-indexer events …`: the outbox's sinks and its purge, for
//! operators (`run`'s `--nats-url` and `--event-retention` are in
//! [`crate::service::options`]).

use std::time::Duration;

use clap::Subcommand;

use crate::service::{options::one_duration, outbox::cutoff};
use crate::{
    events::outbox::{purge_events, remove_sink},
    store::Store,
};

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
            if !remove_sink(store, &name).await? {
                anyhow::bail!("no sink named {name:?}");
            }
            println!("removed sink {name}");
        }
        EventsCommand::Purge { older_than } => {
            let removed = purge_events(store, cutoff(older_than)).await?;
            println!("removed {removed} event{}", if removed == 1 { "" } else { "s" });
        }
    }
    Ok(())
}
