//! The NATS JetStream sink: every event of the outbox, in commit order, on
//! the stream [`STREAM`] under `custody.events.<organization>.<event type>`
//! ([`subject`]), its body exactly the envelope a webhook receives and its
//! event id as `Nats-Msg-Id`, so JetStream drops a message it already holds.
//!
//! One instance publishes at a time, under the lease on the sink's row. It
//! reads the events after the sink's durable cursor, publishes a batch
//! (pipelined: every message of a batch is sent before the first
//! acknowledgement is awaited) and moves the cursor past the events
//! acknowledged without a gap. A batch holds at most one event of a resource,
//! so an event whose publication failed is never followed on the stream by a
//! later event of its resource: each resource's events are stored in order.
//! After a failure the batch is published again from its first
//! unacknowledged event; what the stream already stored is dropped as a
//! duplicate within its duplicate window ([`DUPLICATE_WINDOW`]). Delivery is
//! at least once: a consumer keeps the event ids it has seen for longer gaps.
//!
//! The sink never stops `run`: while NATS is unreachable it retries with a
//! backoff and publishes when the server returns, from where its cursor is.

use std::time::Duration;

use async_nats::jetstream::{
    self,
    context::Context,
    message::PublishMessage,
    stream::{Config, StorageType},
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::subject::{STREAM, SUBJECTS, subject};
use crate::{
    redact::redact_urls,
    store::{OutboxEvent, Store, StoreError, now_micros},
};

/// How long JetStream remembers a message id: the window in which a message
/// published again (after a lost acknowledgement, a crash or a takeover) is
/// dropped as a duplicate.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The sink's name in the store: its cursor and lease.
pub const SINK: &str = "nats";

/// How the sink reaches NATS and paces itself.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// `nats://[user:password@]host:port`, several separated by commas.
    pub url: String,
    /// Events read and published per batch.
    pub batch: u32,
    /// How often an idle sink looks for new events.
    pub poll: Duration,
    /// The sink's lease: another instance takes over this long after this
    /// one stops renewing it.
    pub lease: Duration,
    /// How long a publication may wait for its acknowledgement.
    pub ack_timeout: Duration,
}

impl NatsConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            batch: 1_000,
            poll: Duration::from_millis(100),
            lease: Duration::from_secs(15),
            ack_timeout: Duration::from_secs(5),
        }
    }
}

/// Why a step of the sink did not publish; every one is retried.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("NATS: {0}")]
    Nats(String),
    #[error("another instance took the sink over")]
    LeaseLost,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Published this many events.
    Published(usize),
    /// Nothing new.
    Idle,
    /// Another instance holds the sink.
    Standby,
}

/// Publishes the outbox to NATS JetStream until `shutdown`, as `owner`.
pub async fn run(store: Store, config: NatsConfig, owner: String, shutdown: CancellationToken) {
    let shown = redact_urls(&config.url);
    let client = match async_nats::ConnectOptions::new()
        .name("custody-indexer")
        .retry_on_initial_connect()
        .connection_timeout(config.ack_timeout)
        .max_reconnects(None)
        .connect(config.url.as_str())
        .await
    {
        Ok(client) => client,
        Err(error) => {
            // Only a malformed address fails here; unreachable servers are retried.
            warn!(url = %shown, error = %redact_urls(&error.to_string()), "NATS sink disabled: bad --nats-url");
            return;
        }
    };
    info!(url = %shown, stream = STREAM, "publishing events to NATS JetStream");
    let js = jetstream::ContextBuilder::new().timeout(config.ack_timeout).build(client);
    let mut sink = Sink { store, config, owner, js, stream_ready: false };
    let mut failing = false;
    let mut backoff = Duration::from_millis(100);
    while !shutdown.is_cancelled() {
        let wait = match sink.step().await {
            Ok(step) => {
                if std::mem::take(&mut failing) {
                    info!(url = %shown, "NATS sink publishing again");
                }
                backoff = Duration::from_millis(100);
                match step {
                    Step::Published(n) if n as u32 >= sink.config.batch => Duration::ZERO,
                    Step::Published(_) | Step::Idle => sink.config.poll,
                    Step::Standby => sink.config.lease / 3,
                }
            }
            Err(error) => {
                sink.stream_ready = false;
                if !failing {
                    warn!(url = %shown, error = %redact_urls(&error.to_string()), "NATS sink cannot publish; retrying");
                }
                failing = true;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                backoff
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
    }
    if let Err(error) = sink.store.release_sink(SINK, &sink.owner).await {
        warn!(%error, "cannot release the NATS sink's lease");
    }
}

struct Sink {
    store: Store,
    config: NatsConfig,
    owner: String,
    js: Context,
    stream_ready: bool,
}

impl Sink {
    /// Takes or renews the lease, then publishes the next batch after the cursor.
    async fn step(&mut self) -> Result<Step, SinkError> {
        let until = now_micros() + self.config.lease.as_micros() as i64;
        let Some(cursor) = self.store.take_sink(SINK, &self.owner, until).await? else {
            return Ok(Step::Standby);
        };
        if !self.stream_ready {
            ensure_stream(&self.js).await?;
            self.stream_ready = true;
        }
        let events = self.store.outbox_after(cursor, self.config.batch).await?;
        if events.is_empty() {
            return Ok(Step::Idle);
        }
        let batch = &events[..distinct_prefix(&events)];
        let (through, failure) = self.publish(batch).await;
        if let Some(seq) = through {
            if !self.store.advance_sink(SINK, &self.owner, seq).await? {
                return Err(SinkError::LeaseLost);
            }
            let published = batch.iter().take_while(|e| e.seq <= seq).count();
            metrics::counter!("custody_indexer_sink_events_published_total", "sink" => SINK)
                .increment(published as u64);
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(Step::Published(batch.len())),
        }
    }

    /// Publishes `batch` pipelined. The last sequence acknowledged with no
    /// gap before it, and the first failure.
    async fn publish(&self, batch: &[OutboxEvent]) -> (Option<i64>, Option<SinkError>) {
        let mut pending = Vec::with_capacity(batch.len());
        let mut failure = None;
        for event in batch {
            let message = PublishMessage::build().payload(event.payload.clone().into()).message_id(&event.id);
            match self.js.send_publish(subject(&event.organization, &event.kind), message).await {
                Ok(ack) => pending.push((event.seq, ack)),
                Err(error) => {
                    failure = Some(SinkError::Nats(format!("publishing event {}: {error}", event.id)));
                    break;
                }
            }
        }
        let (mut through, mut gap) = (None, false);
        for (seq, ack) in pending {
            match ack.await {
                Ok(_) if !gap => through = Some(seq),
                Ok(_) => {}
                Err(error) => {
                    gap = true;
                    failure.get_or_insert(SinkError::Nats(format!("acknowledging event seq {seq}: {error}")));
                }
            }
        }
        (through, failure)
    }
}

/// Creates the stream when it is missing; an existing one is kept as it is
/// configured.
async fn ensure_stream(js: &Context) -> Result<(), SinkError> {
    js.get_or_create_stream(Config {
        name: STREAM.to_string(),
        subjects: vec![SUBJECTS.to_string()],
        storage: StorageType::File,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    })
    .await
    .map_err(|error| SinkError::Nats(format!("creating the stream {STREAM}: {error}")))?;
    Ok(())
}

/// How many of `events` (in commit order) make a batch: up to the first
/// event of a resource already in it.
pub fn distinct_prefix(events: &[OutboxEvent]) -> usize {
    let mut seen = std::collections::HashSet::new();
    events.iter().take_while(|e| seen.insert(e.resource_id.as_str())).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i64, resource: &str) -> OutboxEvent {
        OutboxEvent {
            seq,
            id: format!("e{seq}"),
            organization: "org".into(),
            kind: "deposit_v2".into(),
            resource_id: resource.into(),
            payload: "{}".into(),
        }
    }

    #[test]
    fn a_batch_holds_one_event_per_resource() {
        let cases: [(&[&str], usize); 5] =
            [(&[], 0), (&["a"], 1), (&["a", "b", "c"], 3), (&["a", "b", "a", "c"], 2), (&["a", "a"], 1)];
        for (resources, want) in cases {
            let events: Vec<_> = resources.iter().enumerate().map(|(i, r)| event(i as i64 + 1, r)).collect();
            assert_eq!(distinct_prefix(&events), want, "{resources:?}");
        }
    }
}
