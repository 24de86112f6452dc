//! deposit_v2 events end to end: `run` indexing a real anvil, a real HTTP
//! receiver on 127.0.0.1 that verifies signatures and fails when told to,
//! restarts, key rotations, dead letters, the pull API and several instances.

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use alloy::{
    primitives::{Address, U256},
    transports::http::reqwest::Method,
};
use common::{
    Anvil, CHAIN,
    api::{Answer, answers, send, send_json},
    chain_toml,
    cli::{Env, Process, terminate},
    db::{Backend, TestDb},
    dead_port, eventually,
    receiver::{Received, Receiver},
};
use serde_json::{Value, json};

const ETH: u64 = 1_000_000_000_000_000_000;
/// Deeper than any burst of deposits a test sends, so each is seen `PENDING` first.
const DEPTH: u64 = 20;

struct Setup {
    anvil: Anvil,
    env: Env,
    _db: TestDb,
    key: String,
    port: u16,
    run: Process,
    receiver: Receiver,
    secret: String,
    webhook: String,
    alice: Address,
}

/// `run` on anvil (confirmation depth [`DEPTH`]) with webhook retries every `schedule`, and a
/// webhook of organization `acme` registered through the API to a receiver.
async fn setup(backend: Backend, schedule: &str) -> Setup {
    let anvil = Anvil::start().await;
    let mut env = Env::with_chain_file(&chain_toml(
        &[anvil.url()],
        None,
        &format!("confirmation = {{ depth = {DEPTH} }}"),
    ));
    let db = TestDb::new(backend).await;
    if backend == Backend::Postgres {
        env.database_url = db.url.clone();
    }
    let key = env.organization_with_key();
    let alice = anvil.accounts[1];
    env.add_account_of("acme", "alice", "SEGREGATED", &alice.to_string(), CHAIN);
    let receiver = Receiver::start().await;
    let port = dead_port();
    let run = spawn_run(&env, port, schedule);
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) }).await;
    let created = post(port, "/v2/webhooks", &key, &json!({ "url": receiver.url, "label": "ledger" })).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let secret = created.body["signing_secret"].as_str().unwrap().to_string();
    let webhook = created.body["id"].as_str().unwrap().to_string();
    Setup { anvil, env, _db: db, key, port, run, receiver, secret, webhook, alice }
}

fn spawn_run(env: &Env, port: u16, schedule: &str) -> Process {
    spawn_run_with(env, port, schedule, &[])
}

fn spawn_run_with(env: &Env, port: u16, schedule: &str, extra: &[(&str, &str)]) -> Process {
    env.listen(
        "run",
        CHAIN,
        port,
        &[
            extra,
            &[
                ("ALLOW_PRIVATE_WEBHOOK_URLS", "true"),
                ("CUSTODY_INDEXER_WEBHOOK_RETRY_SCHEDULE", schedule),
                // A short timeout keeps the lease of a killed worker short.
                ("CUSTODY_INDEXER_WEBHOOK_TIMEOUT", "2s"),
                ("RUST_LOG", "info,custody_indexer::events=debug"),
            ],
        ]
        .concat(),
    )
}

async fn get(port: u16, path: &str, key: Option<&str>) -> Answer {
    send(Method::GET, &format!("http://127.0.0.1:{port}{path}"), key).await
}

async fn post(port: u16, path: &str, key: &str, body: &Value) -> Answer {
    send_json(Method::POST, &format!("http://127.0.0.1:{port}{path}"), Some(key), Some(body)).await
}

impl Setup {
    /// Sends `count` deposits to alice, waits until the watcher recorded them
    /// `PENDING`, then buries them under [`DEPTH`] blocks: each makes a PENDING and a
    /// CONFIRMED event.
    async fn deposits(&self, count: u64) {
        let before = self.seen().await;
        for i in 0..count {
            self.anvil.send_eth(self.anvil.accounts[0], self.alice, U256::from(ETH + i)).await;
        }
        eventually(Duration::from_secs(30), "the deposits to be seen", || async {
            (self.seen().await >= before + count as usize).then_some(())
        })
        .await;
        self.anvil.mine(DEPTH).await;
    }

    /// Deposits recorded so far, whatever their status: a deposit of an
    /// earlier burst may turn CONFIRMED while a new one turns up PENDING.
    async fn seen(&self) -> usize {
        let list = get(self.port, "/v2/crypto/deposits?account_id=alice&limit=25", Some(&self.key)).await;
        list.body["deposits"].as_array().map_or(0, Vec::len)
    }

    /// Waits until the receiver has accepted `count` events.
    async fn delivered(&self, count: usize) -> Vec<Received> {
        let receiver = &self.receiver;
        eventually(Duration::from_secs(60), &format!("{count} delivered events"), || async {
            let delivered = receiver.delivered();
            (delivered.len() >= count).then_some(delivered)
        })
        .await
    }
}

/// `(deposit id, status)` of each delivered event, in arrival order.
fn statuses(received: &[Received]) -> Vec<(String, String)> {
    received
        .iter()
        .map(|r| {
            let body = r.json();
            (
                body["data"]["id"].as_str().unwrap().to_string(),
                body["data"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every deposit's events arrived PENDING, then CONFIRMED, once each.
fn assert_in_order_once(received: &[Received], deposits: usize) {
    let mut by_deposit: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, status) in statuses(received) {
        by_deposit.entry(id).or_default().push(status);
    }
    assert_eq!(by_deposit.len(), deposits, "{by_deposit:?}");
    for (id, statuses) in by_deposit {
        assert_eq!(statuses, ["PENDING", "CONFIRMED"], "deposit {id}");
    }
}

#[tokio::test]
async fn deposit_events_arrive_signed_in_order_and_match_the_pull_api() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let mut s = setup(backend, "1s").await;
        s.deposits(2).await;
        let received = s.delivered(4).await;
        assert_eq!(received.len(), 4, "{backend:?}: no retries were needed");
        assert!(received.iter().all(|r| r.signed_by(&s.secret)), "every delivery is signed");
        assert!(received.iter().all(|r| r.id == r.json()["id"]), "webhook-id is the event id");
        assert_in_order_once(&received, 2);

        for r in &received {
            let event = r.json();
            assert_eq!(event["type"], "deposit_v2");
            let data = &event["data"];
            // The first event's id is the deposit's dedup_key; later events have their own.
            match data["status"].as_str().unwrap() {
                "PENDING" => assert_eq!(event["id"], data["dedup_key"]),
                _ => assert_ne!(event["id"], data["dedup_key"]),
            }
        }
        // A CONFIRMED event's data is the deposit as the API serves it.
        let confirmed =
            received.iter().map(Received::json).find(|e| e["data"]["status"] == "CONFIRMED").unwrap();
        let path = format!("/v2/crypto/deposits/{}", confirmed["data"]["id"].as_str().unwrap());
        assert_eq!(get(s.port, &path, Some(&s.key)).await.body, confirmed["data"]);

        // The pull API returns the same events in commit order, page by page.
        let all = get(s.port, "/v2/events?limit=100", Some(&s.key)).await;
        let pulled: Vec<Value> = all.body["events"].as_array().unwrap().clone();
        assert_eq!(pulled.len(), 4);
        let mut delivered: Vec<Value> = received.iter().map(Received::json).collect();
        let position = |e: &Value| pulled.iter().position(|p| p == e).expect("delivered event is pulled");
        delivered.sort_by_key(position);
        assert_eq!(delivered, pulled, "same envelopes");
        assert_eq!(all.body["cursor"], pulled[3]["id"]);
        let mut paged = Vec::new();
        let mut after = String::new();
        loop {
            let page = get(s.port, &format!("/v2/events?limit=3&after={after}"), Some(&s.key)).await;
            let events = page.body["events"].as_array().unwrap().clone();
            if events.is_empty() {
                assert_eq!(page.body["cursor"], after.as_str(), "an empty page keeps the cursor");
                break;
            }
            after = page.body["cursor"].as_str().unwrap().to_string();
            paged.extend(events);
        }
        assert_eq!(paged, pulled);
        assert!(terminate(&mut s.run).success());
    }
}

#[tokio::test]
async fn a_failing_receiver_gets_every_event_later_and_gone_disables_the_webhook() {
    let mut s = setup(Backend::Sqlite, "1s,1s,1s,1s").await;
    s.receiver.fail_next(3, 503);
    s.deposits(1).await;
    let received = s.delivered(2).await;
    assert_in_order_once(&received, 1);
    let attempts = s.receiver.received();
    assert_eq!(attempts.iter().filter(|r| r.answered == 503).count(), 3);
    // Retries of one event keep its id; the CONFIRMED event waited for the PENDING one.
    assert_eq!(attempts[0].id, attempts[1].id);
    assert_eq!(attempts[0].json()["data"]["status"], "PENDING");

    s.receiver.answer(410);
    s.deposits(1).await;
    eventually(Duration::from_secs(30), "the webhook to be disabled", || async {
        let list = get(s.port, "/v2/webhooks", Some(&s.key)).await;
        (list.body["webhooks"][0]["status"] == "DISABLED").then_some(())
    })
    .await;
    let gone = s.receiver.received().len();
    s.deposits(1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.receiver.received().len(), gone, "a disabled webhook gets nothing more");
    assert!(terminate(&mut s.run).success());
}

#[tokio::test]
async fn deliveries_pending_at_a_crash_arrive_after_a_restart() {
    let mut s = setup(Backend::Postgres, "1s").await;
    s.receiver.answer(500);
    s.deposits(3).await;
    eventually(Duration::from_secs(30), "failed attempts", || async {
        (s.receiver.received().len() >= 2).then_some(())
    })
    .await;
    s.run.kill().unwrap();
    s.run.wait().unwrap();
    // An attempt the killed instance sent just before it died is answered
    // 500 too: had the receiver accepted it, it would be delivered again
    // (at least once), and this test counts each event once.
    s.receiver.settle(Duration::from_millis(500)).await;

    s.receiver.answer(200);
    s.run = spawn_run(&s.env, s.port, "1s");
    let received = s.delivered(6).await;
    assert_in_order_once(&received, 3);
    assert!(received.iter().all(|r| r.signed_by(&s.secret)));
    assert!(terminate(&mut s.run).success());
}

#[tokio::test]
async fn a_rotation_signs_with_both_keys_until_the_old_one_expires() {
    let mut s = setup(Backend::Sqlite, "1s").await;
    // The old key signs for 30 s after the rotation: long enough for the
    // deliveries below on any machine; then the test waits until it expired.
    let out = s.env.ok(&["webhooks", "rotate", &s.webhook, "--previous-key-expires-in", "30s"]);
    let expired = std::time::Instant::now() + Duration::from_secs(30);
    let new_secret = out.lines().last().unwrap().to_string();
    assert!(new_secret.starts_with("whsec_") && new_secret != s.secret, "{out}");
    // Both doors' changes are in the audit log, each by who made it.
    let log = s.env.ok(&["audit", "list", "--json"]);
    let log: Vec<serde_json::Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let changes: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| e["target_id"] == s.webhook.as_str())
        .map(|e| (e["action"].as_str().unwrap(), e["actor"].as_str().unwrap()))
        .collect();
    assert!(
        matches!(changes.as_slice(), [("webhook.registered", key), ("webhook.key_rotated", local)]
            if key.starts_with("api-key:") && local.starts_with("local:")),
        "{changes:?}"
    );
    s.deposits(1).await;
    let during = s.delivered(2).await;
    for r in &during {
        assert_eq!(r.signature.split(' ').count(), 2, "{}", r.signature);
        assert!(r.signed_by(&s.secret) && r.signed_by(&new_secret));
    }
    // What a receiver can run from a shell.
    let body = s.env.dir.path().join("body.json");
    std::fs::write(&body, &during[0].body).unwrap();
    let verify = |secret: &str| {
        s.env.output(&[
            "webhooks",
            "verify",
            "--secret",
            secret,
            "--id",
            &during[0].id,
            "--timestamp",
            &during[0].timestamp,
            "--signature",
            &during[0].signature,
            "--body-file",
            body.to_str().unwrap(),
        ])
    };
    let valid = verify(&new_secret);
    assert!(valid.status.success() && String::from_utf8_lossy(&valid.stdout).trim() == "valid");
    let forged = verify(custody_indexer::events::signing::Secret::generate().expose());
    assert_eq!(forged.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&forged.stdout).contains("no signature matches"));

    tokio::time::sleep(expired.saturating_duration_since(std::time::Instant::now())).await;
    s.deposits(1).await;
    let after = s.delivered(4).await;
    for r in &after[2..] {
        assert_eq!(r.signature.split(' ').count(), 1);
        assert!(r.signed_by(&new_secret) && !r.signed_by(&s.secret), "the old key expired");
    }
    let listed = get(s.port, "/v2/webhooks", Some(&s.key)).await;
    assert!(listed.body["webhooks"][0]["previous_key_expires_at"].is_string());
    assert!(terminate(&mut s.run).success());
}

/// Two rotations within the overlap: the first previous key (10 min, by
/// the command line) keeps signing beside the second (24 h, through the
/// API), three signatures a delivery, until it expires on its own (its
/// expiry brought forward in the store, as if the ten minutes had passed:
/// nothing here depends on the machine's speed).
#[tokio::test]
async fn two_rotations_sign_with_three_keys_until_the_first_expires() {
    let mut s = setup(Backend::Sqlite, "1s").await;
    let out = s.env.ok(&["webhooks", "rotate", &s.webhook, "--previous-key-expires-in", "10m"]);
    let middle = out.lines().last().unwrap().to_string();
    let path = format!("/v2/webhooks/{}/rotate-signing-key", s.webhook);
    let rotated = send(Method::POST, &format!("http://127.0.0.1:{}{path}", s.port), Some(&s.key)).await;
    assert_eq!(rotated.status, 200, "{:?}", rotated.body);
    let newest = rotated.body["signing_secret"].as_str().unwrap().to_string();
    let latest = rotated.body["previous_key_expires_at"].as_str().unwrap();
    let latest = chrono::DateTime::parse_from_rfc3339(latest).unwrap();
    assert!(latest > chrono::Utc::now() + chrono::Duration::hours(23), "the latest expiry: {latest}");

    s.deposits(1).await;
    let during = s.delivered(2).await;
    for r in &during {
        assert_eq!(r.signature.split(' ').count(), 3, "{}", r.signature);
        for secret in [&newest, &middle, &s.secret] {
            assert!(r.signed_by(secret), "{}", r.signature);
        }
    }

    s.env.store().await; // installs sqlx's drivers
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&s.env.database_url).await.unwrap();
    let expired = custody_indexer::store::now_micros() - 1;
    let moved = sqlx::query(
        "UPDATE webhook_previous_keys SET expires_at = $1 WHERE webhook_id = $2 AND expires_at =
            (SELECT MIN(expires_at) FROM webhook_previous_keys WHERE webhook_id = $2)",
    )
    .bind(expired)
    .bind(&s.webhook)
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(moved.rows_affected(), 1, "the first previous key");
    s.deposits(1).await;
    let after = s.delivered(4).await;
    for r in &after[2..] {
        assert_eq!(r.signature.split(' ').count(), 2, "{}", r.signature);
        assert!(r.signed_by(&newest) && r.signed_by(&middle));
        assert!(!r.signed_by(&s.secret), "the first previous key expired");
    }
    let listed = get(s.port, "/v2/webhooks", Some(&s.key)).await;
    assert_eq!(
        listed.body["webhooks"][0]["previous_key_expires_at"],
        rotated.body["previous_key_expires_at"]
    );
    assert!(terminate(&mut s.run).success());
}

#[tokio::test]
async fn a_dead_lettered_delivery_is_listed_and_redelivered() {
    let mut s = setup(Backend::Sqlite, "1s").await;
    s.receiver.answer(500);
    s.deposits(1).await;
    // Two attempts (the first and one retry), then the dead letter.
    let failed = eventually(Duration::from_secs(30), "a dead letter", || async {
        let out = s.env.ok(&["webhooks", "deliveries", "--failed", "--json"]);
        let list: Vec<Value> = serde_json::from_str(&out).unwrap();
        (!list.is_empty()).then_some(list)
    })
    .await;
    assert_eq!(failed[0]["attempts"], 2);
    assert_eq!(failed[0]["last_status"], 500);
    assert_eq!(failed[0]["state"], "FAILED");
    let pending_event = failed[0]["event_id"].as_str().unwrap().to_string();
    assert_eq!(s.receiver.received().iter().filter(|r| r.id == pending_event).count(), 2);

    s.receiver.answer(200);
    s.env.ok(&["webhooks", "redeliver", failed[0]["id"].as_str().unwrap()]);
    // In the audit log, by the operating-system user who asked.
    let log = s.env.ok(&["audit", "list", "--json"]);
    let resent = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["action"] == "webhook_delivery.resent" && e["target_id"] == failed[0]["id"]);
    assert!(resent.is_some_and(|e| e["actor"].as_str().unwrap().starts_with("local:")), "{log}");
    let delivered = eventually(Duration::from_secs(30), "the redelivery", || async {
        let delivered = s.receiver.delivered();
        delivered.iter().any(|r| r.id == pending_event).then_some(delivered)
    })
    .await;
    assert!(delivered.iter().all(|r| r.signed_by(&s.secret)));
    // Recorded as delivered, its earlier attempts kept (numbered on).
    eventually(Duration::from_secs(30), "the redelivery recorded", || async {
        let out = s.env.ok(&["webhooks", "deliveries", "--json"]);
        let list: Vec<Value> = serde_json::from_str(&out).unwrap();
        list.iter().any(|d| d["id"] == failed[0]["id"] && d["state"] == "DELIVERED").then_some(())
    })
    .await;
    let store = custody_indexer::store::Store::open(&s.env.database_url).await.unwrap();
    let attempts = store.delivery_attempts(failed[0]["id"].as_str().unwrap()).await.unwrap();
    let numbers: Vec<u32> = attempts.iter().map(|a| a.0).collect();
    assert_eq!(numbers, [1, 2, 3], "{attempts:?}");
    assert_eq!(attempts[2].1, Some(200));
    let again = s.env.output(&["webhooks", "redeliver", failed[0]["id"].as_str().unwrap()]);
    assert!(!again.status.success(), "only a failed delivery is re-sent");
    assert!(terminate(&mut s.run).success());
}

#[tokio::test]
async fn two_instances_deliver_each_event_once() {
    let mut s = setup(Backend::Postgres, "1s").await;
    let second_port = dead_port();
    let mut second = spawn_run(&s.env, second_port, "1s");
    s.deposits(10).await;
    let received = s.delivered(20).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let received_now = s.receiver.received();
    assert_eq!(received_now.len(), 20, "no event was delivered twice");
    assert_in_order_once(&received, 10);
    assert!(terminate(&mut second).success());
    assert!(terminate(&mut s.run).success());
}

/// Deliveries connect to the webhook themselves, whatever proxy the
/// process's environment names: a proxy would connect in the address
/// policy's place. (The RPC client still honours it; anvil is exempted.)
#[tokio::test]
async fn deliveries_ignore_the_environments_proxy() {
    let mut s = setup(Backend::Sqlite, "1s").await;
    assert!(terminate(&mut s.run).success());
    let proxy = format!("http://127.0.0.1:{}", dead_port());
    let vars = [
        ("HTTP_PROXY", proxy.as_str()),
        ("http_proxy", proxy.as_str()),
        ("HTTPS_PROXY", proxy.as_str()),
        ("ALL_PROXY", proxy.as_str()),
        ("NO_PROXY", "127.0.0.1"),
        ("no_proxy", "127.0.0.1"),
    ];
    s.run = spawn_run_with(&s.env, s.port, "1s", &vars);
    let healthz = format!("http://127.0.0.1:{}/healthz", s.port);
    eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) }).await;
    // A second webhook to the same receiver by a name the proxy would take.
    let by_name = s.receiver.url.replace("127.0.0.1", "localhost");
    let created = post(s.port, "/v2/webhooks", &s.key, &json!({ "url": by_name, "label": "by name" })).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    s.deposits(1).await;
    // PENDING and CONFIRMED, to each of the two webhooks.
    let received = s.delivered(4).await;
    assert_eq!(received.len(), 4);
    assert!(terminate(&mut s.run).success());
}
