//! Delivery workers: lease due deliveries from the store, POST each signed
//! event to its webhook, record every attempt, and schedule the next one with
//! exponential backoff and jitter (honouring `Retry-After`) until the
//! schedule runs out and the delivery is dead-lettered.

use std::time::{Duration, Instant};

use alloy::transports::http::reqwest;
use futures::{StreamExt, stream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{
    signing::{Secret, signature_header},
    url::{GuardedResolver, Policy},
};
use crate::{
    alarm::Alarms,
    store::{Attempt, Claimed, Outcome, Store, now_micros},
};

/// Waits after each failed attempt: immediately, then 5 s, 5 min, 30 min,
/// 2 h, 5 h and 10 h six times, about 68 hours in all (12 attempts).
pub const DEFAULT_SCHEDULE: [Duration; 11] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
];

#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// Concurrent deliveries of this process.
    pub concurrency: usize,
    /// A receiver must answer 2xx within this.
    pub timeout: Duration,
    /// The waits between attempts; its length is the number of retries.
    pub schedule: Vec<Duration>,
    /// How often to look for due deliveries.
    pub poll: Duration,
    pub policy: Policy,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
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

/// How many deliveries a worker claims at once for each one in flight.
const ROUNDS: u32 = 4;

/// Delivers until `shutdown`. A delivery in flight at shutdown keeps its lease
/// until the lease expires, then another worker (or the next start) sends it
/// again: delivery is at least once.
///
/// No attempt is sent by two workers: a claim leases a batch for as long as
/// sending it `concurrency` at a time can take, and right before each attempt
/// the worker extends that delivery's lease to cover the attempt, only if it
/// still holds it ([`Store::start_attempt`]). A delivery whose lease lapsed
/// while it waited is left to whichever worker claims it next.
pub async fn run(store: Store, config: DeliveryConfig, shutdown: CancellationToken) {
    let client = client(&config);
    let owner = uuid::Uuid::new_v4().to_string();
    let batch = config.concurrency as u32 * ROUNDS;
    // A batch is sent in `ROUNDS` rounds of at most `timeout` each.
    let claim_lease = config.timeout * ROUNDS + LEASE_MARGIN;
    let alarms = std::sync::Mutex::new(Alarms::default());
    info!(worker = %owner, "webhook delivery started");
    loop {
        let claimed = match store.claim_deliveries(&owner, micros(claim_lease), batch).await {
            Ok(claimed) => claimed,
            Err(error) => {
                warn!(%error, "cannot claim webhook deliveries");
                Vec::new()
            }
        };
        let idle = claimed.is_empty();
        stream::iter(claimed)
            .for_each_concurrent(config.concurrency, |claimed| {
                deliver(&store, &client, &config, &owner, &alarms, claimed)
            })
            .await;
        if idle {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(config.poll) => {}
            }
        } else if shutdown.is_cancelled() {
            break;
        }
    }
    info!(worker = %owner, "webhook delivery stopped");
}

/// Sends one claimed delivery if its lease still holds, and records the
/// attempt under that lease.
async fn deliver(
    store: &Store,
    client: &reqwest::Client,
    config: &DeliveryConfig,
    owner: &str,
    alarms: &std::sync::Mutex<Alarms>,
    claimed: Claimed,
) {
    // The attempt's lease outlives the attempt (its timeout) with a margin.
    match store.start_attempt(&claimed.delivery_id, owner, micros(config.timeout + LEASE_MARGIN)).await {
        Ok(true) => {}
        Ok(false) => {
            debug!(delivery = %claimed.delivery_id, "lease lapsed before the attempt; left to the next claim");
            return;
        }
        Err(error) => {
            warn!(delivery = %claimed.delivery_id, %error, "cannot extend a webhook delivery's lease");
            return;
        }
    }
    let (attempt, outcome) = attempt(client, config, &claimed).await;
    let label = match outcome {
        Outcome::Delivered => "delivered",
        Outcome::Retry(_) => "retry",
        Outcome::Failed => "failed",
        Outcome::Gone => "gone",
    };
    metrics::counter!("custody_indexer_webhook_deliveries_total", "outcome" => label).increment(1);
    watch_endpoint(store, alarms, &claimed, &attempt, &outcome).await;
    match store.finish_attempt(&claimed, owner, &attempt, &outcome).await {
        Ok(true) => {
            debug!(delivery = %claimed.delivery_id, event = %claimed.event_id, outcome = label, "webhook attempt")
        }
        Ok(false) => warn!(delivery = %claimed.delivery_id, "lease lost before the attempt was recorded"),
        Err(error) => warn!(delivery = %claimed.delivery_id, %error, "cannot record a webhook attempt"),
    }
    if matches!(outcome, Outcome::Failed | Outcome::Gone) {
        warn!(delivery = %claimed.delivery_id, webhook = %claimed.webhook_id, event = %claimed.event_id,
            status = ?attempt.status_code, error = ?attempt.error, outcome = label, "webhook delivery dead-lettered");
    }
}

/// The condition's kind in the store.
pub use crate::store::WEBHOOK_FAILING as FAILING;

/// Raises (once a minute in the log) or clears the condition of a webhook
/// whose endpoint fails its attempts. A tenant's endpoint is the tenant's:
/// `health` shows it as a warning and never as a reason to be unhealthy.
async fn watch_endpoint(
    store: &Store,
    alarms: &std::sync::Mutex<Alarms>,
    claimed: &Claimed,
    attempt: &Attempt,
    outcome: &Outcome,
) {
    let webhook = claimed.webhook_id.as_str();
    // Delivered, or answered `410 Gone` (the webhook is disabled: nothing waits on it).
    let result = if matches!(outcome, Outcome::Delivered | Outcome::Gone) {
        alarms.lock().expect("alarms").clear(webhook, &format!("webhook {webhook} answers again"));
        // Another worker may have raised it: cleared in the store whatever this one saw.
        store.clear_condition(None, FAILING, webhook).await
    } else {
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
        if !alarms.lock().expect("alarms").raise(webhook, FAILING, &message).logged() {
            return;
        }
        store.raise_condition(None, FAILING, webhook, &message).await
    };
    if let Err(error) = result {
        debug!(webhook, %error, "cannot record the webhook's condition");
    }
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
        _ => match config.schedule.get(claimed.attempts as usize) {
            None => Outcome::Failed,
            Some(wait) => {
                let asked = retry_after.unwrap_or_default().min(MAX_RETRY_AFTER);
                let wait = jittered(*wait).max(asked);
                Outcome::Retry(at + wait.as_micros() as i64)
            }
        },
    };
    (Attempt { at, status_code, error, duration_ms }, outcome)
}

/// The longest a receiver's `Retry-After` postpones its next attempt: a
/// larger one (or a hostile one) is taken as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// POSTs the event; the status and any `Retry-After` (seconds), or why no
/// answer came.
async fn send(
    client: &reqwest::Client,
    config: &DeliveryConfig,
    claimed: &Claimed,
    timestamp: i64,
) -> Result<(u16, Option<Duration>), String> {
    let url = config.policy.check_shape(&claimed.url).map_err(|e| e.to_string())?;
    let secrets: Vec<Secret> = claimed.secrets.iter().filter_map(|s| Secret::parse(s).ok()).collect();
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

/// ±20% so that receivers coming back are not hit by every retry at once.
fn jittered(wait: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    let factor = 0.8 + 0.4 * f64::from(byte[0]) / 255.0;
    wait.mul_f64(factor)
}

/// Parses a retry schedule such as `5s,5m,30m,2h` (units `ms`, `s`, `m`, `h`).
pub fn parse_schedule(text: &str) -> Result<Vec<Duration>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let (number, unit) = s.split_at(split);
            let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration such as 5s"))?;
            let (scale, millis) = match unit {
                "ms" => (1, true),
                "s" => (1, false),
                "m" => (60, false),
                "h" => (3_600, false),
                "d" => (86_400, false),
                _ => return Err(format!("{s:?}: the unit must be ms, s, m, h or d")),
            };
            let n = n.checked_mul(scale).ok_or_else(|| format!("{s:?} is too long"))?;
            Ok(if millis { Duration::from_millis(n) } else { Duration::from_secs(n) })
        })
        .collect()
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
            policy: Policy { allow_private: true },
            ..DeliveryConfig::default()
        };
        let client = client(&config);
        let claimed = |path: &str, attempts: u32| Claimed {
            delivery_id: "d".into(),
            attempts,
            event_id: "e".into(),
            payload: "{}".into(),
            webhook_id: "w".into(),
            url: format!("{base}{path}"),
            secrets: vec![Secret::generate().expose().to_string()],
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

        let strict = DeliveryConfig { policy: Policy { allow_private: false }, ..config.clone() };
        let (refused, outcome) = attempt(&client, &strict, &claimed("/ok", 0)).await;
        assert_eq!(refused.status_code, None, "nothing was sent");
        assert!(refused.error.unwrap().contains("https"));
        assert!(matches!(outcome, Outcome::Retry(_)));
    }

    #[test]
    fn the_default_schedule_spans_about_three_days() {
        let total: Duration = DEFAULT_SCHEDULE.iter().sum();
        assert!((60..=80).contains(&(total.as_secs() / 3600)), "{total:?}");
        assert_eq!(
            parse_schedule("0s, 5s,5m,2h,250ms").unwrap(),
            [
                Duration::ZERO,
                Duration::from_secs(5),
                Duration::from_secs(300),
                Duration::from_secs(7200),
                Duration::from_millis(250)
            ]
        );
        assert!(parse_schedule("5x").is_err());
        for _ in 0..100 {
            let wait = jittered(Duration::from_secs(100));
            assert!((80..=120).contains(&wait.as_secs()), "{wait:?}");
        }
    }
}
