//! `run`'s outbox tasks besides webhook delivery: the NATS sink when
//! configured, and the hourly purge.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::options::EventOptions;
use crate::{
    events::{
        nats::{self, NatsConfig},
        outbox::purge_events,
    },
    store::{Store, now_micros},
};

/// How often `run` purges the outbox.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

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
            match purge_events(&store, cutoff(options.event_retention)).await {
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

/// The time before which the outbox's taken events are purged.
pub fn cutoff(retention: Duration) -> i64 {
    now_micros().saturating_sub(retention.as_micros().min(i64::MAX as u128) as i64)
}
