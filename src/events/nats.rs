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

pub(crate) mod stream;

use std::time::Duration;

use async_nats::jetstream::{
    self,
    context::Context,
    message::PublishMessage,
    stream::{Config, StorageType},
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use self::stream::Fitness;
use super::{
    outbox::{advance_sink, register_sink, release_sink, take_sink},
    subject::{PUBLISHED, STREAM, SUBJECTS, subject},
};
use crate::{
    redact::redact_urls,
    store::{OutboxEvent, Store, StoreError},
};

/// How long JetStream remembers a message id: the window in which a message
/// published again (after a lost acknowledgement, a crash or a takeover) is
/// dropped as a duplicate.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The sink's name in the store: its cursor and lease.
pub const SINK: &str = "nats";

/// The NATS servers the sink publishes to: `nats://[user:password@]host:port`
/// (or `tls://`; no scheme means `nats://`), several separated by commas.
/// Shown (`Display`, `Debug`) as its hosts and ports only: it may hold
/// credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct NatsUrl(Vec<async_nats::ServerAddr>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "not a NATS server address (nats://[user:password@]host:port, several separated by commas): item {0}"
)]
pub struct BadNatsUrl(usize);

impl std::str::FromStr for NatsUrl {
    type Err = BadNatsUrl;

    fn from_str(text: &str) -> Result<Self, BadNatsUrl> {
        let servers = text
            .split(',')
            .map(str::trim)
            .enumerate()
            .map(|(i, item)| {
                let item = if item.contains("://") { item.to_string() } else { format!("nats://{item}") };
                let scheme = item.split("://").next().unwrap_or_default().to_ascii_lowercase();
                if !matches!(scheme.as_str(), "nats" | "tls") {
                    return Err(BadNatsUrl(i + 1));
                }
                let server = item.parse::<async_nats::ServerAddr>().map_err(|_| BadNatsUrl(i + 1))?;
                if server.host().is_empty() {
                    return Err(BadNatsUrl(i + 1));
                }
                Ok(server)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(servers))
    }
}

impl NatsUrl {
    pub fn servers(&self) -> &[async_nats::ServerAddr] {
        &self.0
    }
}

impl std::fmt::Display for NatsUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts: Vec<String> = self.0.iter().map(|s| format!("{}:{}", s.host(), s.port())).collect();
        f.write_str(&hosts.join(","))
    }
}

impl std::fmt::Debug for NatsUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NatsUrl({self})")
    }
}

/// How the sink reaches NATS and paces itself.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    pub url: NatsUrl,
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
    pub fn new(url: NatsUrl) -> Self {
        Self {
            url,
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
    /// Published a batch; `more` when events after it are waiting.
    Published { more: bool },
    /// Nothing new.
    Idle,
    /// Another instance holds the sink.
    Standby,
}

/// Publishes the outbox to NATS JetStream until `shutdown`, as `owner`.
pub async fn run(store: Store, config: NatsConfig, owner: String, shutdown: CancellationToken) {
    let shown = config.url.to_string();
    // The purge keeps what the sink has not taken from now on, even while
    // NATS is out of reach.
    if let Err(error) = register_sink(&store, SINK).await {
        warn!(%error, "cannot register the NATS sink yet");
    }
    let client = loop {
        // With `retry_on_initial_connect` only a refused configuration fails
        // here; an unreachable server is retried in the background.
        match async_nats::ConnectOptions::new()
            .name("custody-indexer")
            .retry_on_initial_connect()
            .connection_timeout(config.ack_timeout)
            .max_reconnects(None)
            .connect(config.url.servers())
            .await
        {
            Ok(client) => break client,
            Err(error) => {
                warn!(url = %shown, error = %redact_urls(&error.to_string()), "cannot connect to NATS; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    };
    info!(url = %shown, stream = STREAM, "publishing events to NATS JetStream");
    let js = jetstream::ContextBuilder::new().timeout(config.ack_timeout).build(client.clone());
    let mut sink = Sink { store, config, owner, client, js, stream_ready: false };
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
                    Step::Published { more: true } => Duration::ZERO,
                    Step::Published { more: false } | Step::Idle => sink.config.poll,
                    Step::Standby => sink.config.lease / 3,
                }
            }
            Err(error) => {
                sink.stream_ready = false;
                metrics::counter!("custody_indexer_sink_errors_total", "sink" => SINK).increment(1);
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
    if let Err(error) = release_sink(&sink.store, SINK, &sink.owner).await {
        warn!(%error, "cannot release the NATS sink's lease");
    }
}

struct Sink {
    store: Store,
    config: NatsConfig,
    owner: String,
    client: async_nats::Client,
    js: Context,
    stream_ready: bool,
}

impl Sink {
    /// Takes or renews the lease, then publishes the next batch after the cursor.
    async fn step(&mut self) -> Result<Step, SinkError> {
        // An instance that cannot reach NATS holds no lease: another may.
        if self.client.connection_state() != async_nats::connection::State::Connected {
            release_sink(&self.store, SINK, &self.owner).await?;
            return Err(SinkError::Nats("not connected".into()));
        }
        let lease = self.config.lease.as_micros() as i64;
        let Some(cursor) = take_sink(&self.store, SINK, &self.owner, lease).await? else {
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
            if !advance_sink(&self.store, SINK, &self.owner, seq, lease).await? {
                return Err(SinkError::LeaseLost);
            }
            let published = batch.iter().take_while(|e| e.seq <= seq).count();
            metrics::counter!("custody_indexer_sink_events_published_total", "sink" => SINK)
                .increment(published as u64);
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(Step::Published {
                more: events.len() > batch.len() || events.len() as u32 >= self.config.batch,
            }),
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
        // One deadline for the batch's acknowledgements: a lost one costs
        // the timeout once, not once per message.
        let deadline = tokio::time::Instant::now() + self.config.ack_timeout;
        let mut through = None;
        for (seq, ack) in pending {
            match tokio::time::timeout_at(deadline, ack).await {
                Ok(Ok(_)) => through = Some(seq),
                Ok(Err(error)) => {
                    failure.get_or_insert(SinkError::Nats(format!("acknowledging event seq {seq}: {error}")));
                    break;
                }
                Err(_) => {
                    failure.get_or_insert(SinkError::Nats(format!("no acknowledgement of event seq {seq}")));
                    break;
                }
            }
        }
        (through, failure)
    }
}

/// Creates the stream when it is missing. An existing one is judged
/// ([`stream::judge`]): one that cannot take the events fails the step,
/// which is retried, so a corrected stream is used without a restart; what
/// merely weakens it is logged.
pub(crate) async fn ensure_stream(js: &Context) -> Result<(), SinkError> {
    let stream = js
        .get_or_create_stream(Config {
            name: STREAM.to_string(),
            subjects: vec![SUBJECTS.to_string()],
            storage: StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        })
        .await
        .map_err(|error| SinkError::Nats(format!("creating the stream {STREAM}: {error}")))?;
    match stream::judge(&stream.cached_info().config, PUBLISHED, DUPLICATE_WINDOW) {
        Fitness::Unfit(reason) => Err(SinkError::Nats(reason)),
        Fitness::Fit(warnings) => {
            for warning in warnings {
                warn!(stream = STREAM, "{warning}");
            }
            Ok(())
        }
    }
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
    fn nats_urls_list_servers_and_show_no_credentials() {
        let url: NatsUrl = "nats://svc:pw@nats-1:4222, tls://svc:pw@nats-2:4443,nats-3".parse().unwrap();
        assert_eq!(url.servers().len(), 3);
        assert_eq!(url.to_string(), "nats-1:4222,nats-2:4443,nats-3:4222");
        assert!(!format!("{url:?}").contains("pw"));
        let bare: NatsUrl = "svc:secret@127.0.0.1:4222".parse().unwrap();
        assert_eq!(bare.to_string(), "127.0.0.1:4222");
        assert_eq!("nats://a:4222,".parse::<NatsUrl>(), Err(BadNatsUrl(2)));
        assert_eq!("http://a:4222".parse::<NatsUrl>().map(|u| u.to_string()).ok(), None);
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
