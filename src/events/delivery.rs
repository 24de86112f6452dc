//! Delivery workers: lease due deliveries from the store, POST each signed
//! event to its webhook, record every attempt, and schedule the next one with
//! exponential backoff and jitter (honouring `Retry-After`) until the
//! schedule runs out and the delivery is dead-lettered.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::transports::http::reqwest;
use tokio::{sync::mpsc, task::JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use super::schedule::{DEFAULT_SCHEDULE, parse_schedule};
use super::{
    claims::{claim_deliveries, finish_attempts},
    schedule::next_wait,
    signing::{Secret, signature_header},
    slots::Slots,
    url::{GuardedResolver, Policy},
};
use crate::{
    alarm::Alarms,
    store::{Attempt, Claimed, Finished, Outcome, Store, now_micros},
};

#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// Concurrent deliveries of this process.
    pub concurrency: usize,
    /// Of those, at most this many of one organization, so that one whose
    /// receiver is slow or hangs leaves the others their turn.
    pub per_organization: usize,
    /// A receiver must answer 2xx within this.
    pub timeout: Duration,
    /// The waits between attempts; its length is the number of retries.
    pub schedule: Vec<Duration>,
    /// How often to look for due deliveries.
    pub poll: Duration,
    pub policy: Policy,
}

/// Deliveries in flight at once by default.
pub const DEFAULT_CONCURRENCY: usize = 128;

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            concurrency: DEFAULT_CONCURRENCY,
            per_organization: DEFAULT_CONCURRENCY / 4,
            timeout: Duration::from_secs(15),
            schedule: DEFAULT_SCHEDULE.to_vec(),
            poll: Duration::from_millis(200),
            policy: Policy::from_env(),
        }
    }
}

/// Above an attempt's timeout, what a lease leaves for recording the answer.
/// (Lease times are the database's clock, so instances' clocks may differ.)
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// The most attempts recorded in one transaction.
const RECORD_BATCH: usize = 256;

/// Delivers until `shutdown`, then waits for the deliveries in flight and
/// records them. A delivery whose attempt is not recorded (a crash, the
/// store unreachable) keeps its lease until the lease expires, then another
/// worker (or the next start) sends it again: delivery is at least once.
///
/// A claim leases each delivery for one attempt (the timeout and a margin)
/// and the attempt starts at once, so no attempt is sent by two workers.
/// The worker claims again whenever a quarter of its slots is free, taking
/// turns among organizations and at most [`DeliveryConfig::per_organization`]
/// of one in flight. Attempts are recorded in batches by one task beside
/// the sends: a delivery counts as pending until its attempt is recorded, so
/// the next event of the same resource waits for it.
pub async fn run(store: Store, config: DeliveryConfig, shutdown: CancellationToken) {
    let owner = uuid::Uuid::new_v4().to_string();
    let (results, finished) = mpsc::channel(RECORD_BATCH);
    let recorder = tokio::spawn(record(store.clone(), owner.clone(), finished));
    let listener = tokio::spawn({
        let (store, shutdown) = (store.clone(), shutdown.clone());
        async move { store.listen_outbox(shutdown).await }
    });
    let mut worker = Worker {
        client: client(&config),
        slots: Slots::new(config.concurrency as u32, config.per_organization as u32),
        lease: micros(config.timeout + LEASE_MARGIN),
        config: Arc::new(config),
        store: store.clone(),
        owner,
        in_flight: JoinSet::new(),
        organizations: HashMap::new(),
        next_claim: Instant::now(),
        results,
    };
    info!(worker = %worker.owner, "webhook delivery started");
    loop {
        let claiming = !shutdown.is_cancelled();
        if claiming && Instant::now() >= worker.next_claim {
            worker.claim().await;
        }
        if worker.in_flight.is_empty() && !claiming {
            break;
        }
        let wait = worker.slots.wanted().is_some() && claiming;
        tokio::select! {
            Some(done) = worker.in_flight.join_next_with_id() => worker.landed(done).await,
            _ = tokio::time::sleep_until(worker.next_claim.into()), if wait => {}
            // Events committed (see `Store::outbox_written`): claimed now, not at the next poll.
            _ = store.outbox_written(), if claiming => worker.next_claim = Instant::now(),
            _ = shutdown.cancelled(), if claiming => {}
        }
    }
    info!(worker = %worker.owner, "webhook delivery stopped");
    drop(worker);
    let _ = tokio::join!(recorder, listener);
}

/// One delivery worker's state: its slots, the attempts in flight (each its
/// own task, so a claim never holds up a send), and when it claims next.
struct Worker {
    store: Store,
    client: reqwest::Client,
    config: Arc<DeliveryConfig>,
    owner: String,
    lease: i64,
    slots: Slots,
    in_flight: JoinSet<Finished>,
    /// The organization of each attempt in flight, by task.
    organizations: HashMap<tokio::task::Id, String>,
    next_claim: Instant,
    /// To the recorder; it holds the worker back when the store is slower
    /// than the receivers.
    results: mpsc::Sender<Finished>,
}

impl Worker {
    /// Claims what the free slots take, if a claim is worth it, and starts
    /// each attempt at once.
    async fn claim(&mut self) {
        let Some(wanted) = self.slots.wanted() else { return };
        match claim_deliveries(&self.store, &self.owner, self.lease, wanted, &self.slots.rooms()).await {
            Ok(claimed) => {
                // Fewer than asked: nothing more is due, or organizations
                // are at their share (an attempt coming back claims again).
                if (claimed.len() as u32) < wanted {
                    self.next_claim = Instant::now() + self.config.poll;
                }
                for claimed in claimed {
                    self.slots.take(&claimed.organization);
                    let organization = claimed.organization.clone();
                    let (client, config) = (self.client.clone(), self.config.clone());
                    let task = self.in_flight.spawn(async move {
                        let (attempt, outcome) = attempt(&client, &config, &claimed).await;
                        Finished { claimed, attempt, outcome }
                    });
                    self.organizations.insert(task.id(), organization);
                }
            }
            Err(error) => {
                warn!(%error, "cannot claim webhook deliveries");
                self.next_claim = Instant::now() + self.config.poll;
            }
        }
    }

    /// An attempt came back: its slot is free and it goes to be recorded.
    /// Once its organization has room for a batch again, claim at once: it
    /// may have more due.
    async fn landed(&mut self, done: Result<(tokio::task::Id, Finished), tokio::task::JoinError>) {
        let id = match &done {
            Ok((id, _)) => *id,
            Err(error) => error.id(),
        };
        if let Some(organization) = self.organizations.remove(&id) {
            self.slots.give_back(&organization);
            if self.slots.has_room_for_a_batch(&organization) {
                self.next_claim = Instant::now();
            }
        }
        match done {
            Ok((_, done)) => {
                report(&done);
                let _ = self.results.send(done).await;
            }
            // Its lease lapses and another attempt follows.
            Err(error) => warn!(%error, "a webhook attempt ended abnormally"),
        }
    }
}

/// Counts an attempt by its outcome, and logs a dead letter.
fn report(done: &Finished) {
    let label = match done.outcome {
        Outcome::Delivered => "delivered",
        Outcome::Retry(_) => "retry",
        Outcome::Failed => "failed",
        Outcome::Gone => "gone",
    };
    metrics::counter!("custody_indexer_webhook_deliveries_total", "outcome" => label).increment(1);
    let Finished { claimed, attempt, .. } = done;
    debug!(delivery = %claimed.delivery_id, event = %claimed.event_id, outcome = label, "webhook attempt");
    if matches!(done.outcome, Outcome::Failed | Outcome::Gone) {
        warn!(delivery = %claimed.delivery_id, webhook = %claimed.webhook_id, event = %claimed.event_id,
            status = ?attempt.status_code, error = ?attempt.error, outcome = label, "webhook delivery dead-lettered");
    }
}

/// Records attempts as they come back, as many at once as have come, until
/// the worker closes the channel.
async fn record(store: Store, owner: String, mut finished: mpsc::Receiver<Finished>) {
    let mut alarms = Alarms::default();
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while finished.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        let mut tries = 0;
        let recorded = loop {
            match finish_attempts(&store, &owner, &batch).await {
                Ok(recorded) => break recorded.len(),
                Err(error) if tries < 3 => {
                    tries += 1;
                    debug!(%error, tries, "cannot record webhook attempts yet");
                    tokio::time::sleep(Duration::from_millis(200 * tries)).await;
                }
                Err(error) => {
                    warn!(%error, attempts = batch.len(), "cannot record webhook attempts; they are sent again when their leases lapse");
                    break 0;
                }
            }
        };
        if recorded < batch.len() {
            warn!(lost = batch.len() - recorded, "leases lost before their attempts were recorded");
        }
        watch_endpoints(&store, &mut alarms, &batch).await;
        batch.clear();
    }
}

/// The condition's kind in the store.
pub use crate::store::WEBHOOK_FAILING as FAILING;

/// Raises (once a minute in the log) or clears the condition of each
/// webhook whose endpoint fails its attempts, by its last attempt in
/// `batch`. A tenant's endpoint is the tenant's: `health` shows it as a
/// warning and never as a reason to be unhealthy.
async fn watch_endpoints(store: &Store, alarms: &mut Alarms, batch: &[Finished]) {
    let mut last: HashMap<&str, &Finished> = HashMap::new();
    for done in batch {
        last.insert(done.claimed.webhook_id.as_str(), done);
    }
    for (webhook, done) in last {
        if let Err(error) = watch_endpoint(store, alarms, webhook, done).await {
            debug!(webhook, %error, "cannot record the webhook's condition");
        }
    }
}

async fn watch_endpoint(
    store: &Store,
    alarms: &mut Alarms,
    webhook: &str,
    done: &Finished,
) -> Result<(), crate::store::StoreError> {
    let Finished { claimed, attempt, outcome } = done;
    // Delivered, or answered `410 Gone` (the webhook is disabled: nothing waits on it).
    if matches!(outcome, Outcome::Delivered | Outcome::Gone) {
        alarms.clear(webhook, &format!("webhook {webhook} answers again"));
        // Another worker may have raised it: cleared in the store whatever this one saw.
        return crate::conditions::clear(store, None, FAILING, webhook).await;
    }
    let why = match (attempt.status_code, &attempt.error) {
        (Some(status), _) => format!("answered HTTP {status}"),
        (None, Some(error)) => format!("did not answer: {error}"),
        (None, None) => "did not answer".to_string(),
    };
    let host = reqwest::Url::parse(&claimed.url).ok().and_then(|u| u.host_str().map(String::from));
    let message = format!(
        "webhook {webhook} (host {}) fails its deliveries: attempt {} of event {} {why}; retried on its schedule",
        host.unwrap_or_default(),
        claimed.attempts + 1,
        claimed.event_id
    );
    if !alarms.raise(webhook, FAILING, &message).logged() {
        return Ok(());
    }
    crate::conditions::raise(store, None, FAILING, webhook, &message).await
}

/// The delivery client: no redirects, no proxy, the policy's resolver, the timeout.
fn client(config: &DeliveryConfig) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(config.timeout)
        .connect_timeout(config.timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::none())
        // A proxy of the process's environment would connect in the
        // resolver's place, past the address policy.
        .no_proxy()
        .dns_resolver(std::sync::Arc::new(GuardedResolver(config.policy)))
        .user_agent(concat!("custody-indexer/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("a reqwest client with static settings builds")
}

/// One attempt of one delivery, and what follows from its answer.
async fn attempt(client: &reqwest::Client, config: &DeliveryConfig, claimed: &Claimed) -> (Attempt, Outcome) {
    let at = now_micros();
    let started = Instant::now();
    let answer = send(client, config, claimed, at / 1_000_000).await;
    let duration_ms = started.elapsed().as_millis() as u64;
    let (status_code, error, retry_after) = match &answer {
        Ok((status, retry_after)) => (Some(*status), None, *retry_after),
        Err(error) => (None, Some(error.clone()), None),
    };
    let outcome = match status_code {
        Some(200..=299) => Outcome::Delivered,
        Some(410) => Outcome::Gone,
        _ => match next_wait(&config.schedule, claimed.attempts, retry_after) {
            None => Outcome::Failed,
            Some(wait) => Outcome::Retry(at + micros(wait)),
        },
    };
    (Attempt { at, status_code, error, duration_ms }, outcome)
}

/// POSTs the event; the status and any `Retry-After` (seconds), or why no
/// answer came.
async fn send(
    client: &reqwest::Client,
    config: &DeliveryConfig,
    claimed: &Claimed,
    timestamp: i64,
) -> Result<(u16, Option<Duration>), String> {
    let url = config.policy.check_shape(&claimed.url).map_err(|e| e.to_string())?;
    let secrets = claimed.secrets.as_ref().map_err(Clone::clone)?;
    let secrets: Vec<Secret> = secrets.iter().filter_map(|s| Secret::parse(s.as_str()).ok()).collect();
    let signature = signature_header(
        &secrets.iter().collect::<Vec<_>>(),
        &claimed.event_id,
        timestamp,
        claimed.payload.as_bytes(),
    );
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &claimed.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(claimed.payload.clone())
        .send()
        .await
        .map_err(|e| crate::redact::redact_urls(&format!("{e:#}")))?;
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    Ok((response.status().as_u16(), retry_after))
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use axum::{Router, http::StatusCode, response::IntoResponse, routing::post};

    use super::*;

    /// Answers `/ok` 204, `/later` 429 with `Retry-After: 120`, `/moved` a
    /// redirect to `/ok`, `/gone` 410.
    async fn server() -> String {
        let app = Router::new()
            .route("/ok", post(|| async { StatusCode::NO_CONTENT }))
            .route(
                "/later",
                post(|| async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "120")]).into_response() }),
            )
            .route(
                "/never",
                post(|| async {
                    (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "99999999999999")]).into_response()
                }),
            )
            .route("/moved", post(|| async { (StatusCode::FOUND, [("location", "/ok")]).into_response() }))
            .route("/gone", post(|| async { StatusCode::GONE }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        base
    }

    #[tokio::test]
    async fn answers_decide_the_outcome() {
        let base = server().await;
        let config = DeliveryConfig {
            schedule: vec![Duration::from_secs(5)],
            policy: Policy::PRIVATE,
            ..DeliveryConfig::default()
        };
        let client = client(&config);
        let claimed = |path: &str, attempts: u32| Claimed {
            delivery_id: "d".into(),
            attempts,
            event_id: "e".into(),
            payload: "{}".into(),
            webhook_id: "w".into(),
            organization: "o".into(),
            url: format!("{base}{path}"),
            secrets: Ok(vec![zeroize::Zeroizing::new(Secret::generate().expose().to_string())]),
        };
        let (attempt_ok, ok) = attempt(&client, &config, &claimed("/ok", 0)).await;
        assert_eq!((ok, attempt_ok.status_code), (Outcome::Delivered, Some(204)));

        let (later, outcome) = attempt(&client, &config, &claimed("/later", 0)).await;
        let Outcome::Retry(at) = outcome else { panic!("{outcome:?}") };
        assert!(at - later.at >= 120_000_000, "Retry-After outweighs the 5 s of the schedule");

        let (never, outcome) = attempt(&client, &config, &claimed("/never", 0)).await;
        let Outcome::Retry(at) = outcome else { panic!("{outcome:?}") };
        assert_eq!(at - never.at, 3_600_000_000, "a Retry-After of three million years is an hour");

        let (moved, outcome) = attempt(&client, &config, &claimed("/moved", 0)).await;
        assert_eq!(moved.status_code, Some(302), "redirects are not followed");
        assert!(matches!(outcome, Outcome::Retry(_)));

        let (_, outcome) = attempt(&client, &config, &claimed("/moved", 1)).await;
        assert_eq!(outcome, Outcome::Failed, "the schedule is spent");
        assert_eq!(attempt(&client, &config, &claimed("/gone", 0)).await.1, Outcome::Gone);

        let strict = DeliveryConfig { policy: Policy::default(), ..config.clone() };
        let (refused, outcome) = attempt(&client, &strict, &claimed("/ok", 0)).await;
        assert_eq!(refused.status_code, None, "nothing was sent");
        assert!(refused.error.unwrap().contains("https"));
        assert!(matches!(outcome, Outcome::Retry(_)));
    }
}
