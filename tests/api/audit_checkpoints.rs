//! Checkpoints no database writer can silence: with `audit_checkpoint_due`
//! kept just under one period ahead by SQL, an instance holding the key
//! still signs one within one period and its slack, timed by the newest
//! signature it verifies; `health` reports that age from the signatures
//! (a directory, NATS) and fails past one period and twice the slack. Each
//! instance chains to the newest checkpoint on NATS, whichever signed it.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use custody_indexer::{
    audit::{
        checkpoint::{self, Checkpoint},
        overdue,
        schedule::{self, Schedule, ScheduleError},
    },
    store::now_micros,
};
use sqlx::AnyPool;
use tokio_util::sync::CancellationToken;

use super::audit_log::{bootstrap, cli, decide, drop_guards, rehash_from, text};
use crate::common::{
    checkpoints::nth,
    db::{Backend, TestDb},
    nats::NatsServer,
};

/// `health`'s seconds on its `audit: last checkpoint N s ago` line.
fn age_said(said: &str) -> u64 {
    let line =
        said.lines().find(|l| l.starts_with("audit: last checkpoint ")).unwrap_or_else(|| panic!("{said}"));
    line["audit: last checkpoint ".len()..].trim_end_matches(" s ago").parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_kept_from_ever_being_due_does_not_silence_the_checkpoints() {
    let db = TestDb::new(Backend::Sqlite).await;
    bootstrap(&db.store).await;
    decide(&db.store, "mint-2").await;
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("checkpoints");
    std::fs::create_dir_all(&kept).unwrap();
    let key = checkpoint::generate();
    let public = checkpoint::public_key_text(&key.verifying_key());
    let every = Duration::from_secs(4);

    // A writer keeps the row just under one period ahead, every second.
    let writer = AnyPool::connect(&db.url).await.unwrap();
    let put_off = move |pool: AnyPool| async move {
        let ahead = i64::try_from(every.as_micros()).unwrap() - 500_000;
        sqlx::query("UPDATE audit_checkpoint_due SET due_at = $1")
            .bind(now_micros() + ahead)
            .execute(&pool)
            .await
    };
    put_off(writer.clone()).await.unwrap();
    let stop = CancellationToken::new();
    let (pool, stopped) = (writer.clone(), stop.clone());
    let writing = tokio::spawn(async move {
        while !stopped.is_cancelled() {
            put_off(pool.clone()).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let instance =
        Schedule { key: key.clone(), every, dir: Some(kept.clone()), nats: None, last: Default::default() };
    let running =
        tokio::spawn(schedule::run(db.store.clone(), instance.into(), "node-a".into(), stop.clone()));

    // None verifies yet: signed at once. The next one, once the first is
    // older than one period and its slack, never later than health allows.
    let first = nth(&kept, 1, Duration::from_secs(15)).await;
    let since = Instant::now();
    let second = nth(&kept, 2, overdue::stale_after(every) + Duration::from_secs(5)).await;
    let gap = Duration::from_micros((second.at - first.at) as u64);
    assert!(gap > overdue::overdue_after(every), "not before it was overdue: {gap:?}");
    assert!(gap < overdue::stale_after(every), "{gap:?} (waited {:?})", since.elapsed());
    assert_eq!(second.seq, 2);

    // health reads the age from the signatures.
    let key_env = [("CUSTODY_INDEXER_AUDIT_PUBLIC_KEY", public.as_str())];
    let checked =
        ["health", "--audit-checkpoint-dir", kept.to_str().unwrap(), "--audit-checkpoint-secs", "4"];
    let said = text(&cli(&db.url, &checked, &key_env));
    assert!(age_said(&said) <= overdue::stale_after(every).as_secs(), "{said}");
    assert!(!said.contains("unhealthy: audit"), "{said}");
    stop.cancel();
    running.await.unwrap();
    writing.await.unwrap();

    // No instance signs any more: past one period and twice the slack
    // health fails, whatever the store says.
    let old = dir.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    let twenty_ago = now_micros() - 20_000_000;
    let other = Checkpoint::sign(&checkpoint::generate(), 2, &second.hash, now_micros());
    schedule::save(&old.join("a.json"), &other).unwrap();
    let old_dir = ["health", "--audit-checkpoint-dir", old.to_str().unwrap(), "--audit-checkpoint-secs", "4"];
    let said = text(&cli(&db.url, &old_dir, &key_env));
    assert!(said.contains("audit: no checkpoint whose signature verifies"), "another key's: {said}");
    schedule::save(&old.join("b.json"), &Checkpoint::sign(&key, 2, &second.hash, twenty_ago)).unwrap();
    let out = cli(&db.url, &old_dir, &key_env);
    let said = text(&out);
    assert!(age_said(&said) >= 20, "{said}");
    assert!(said.contains("unhealthy: audit: the last checkpoint was signed"), "{said}");
    assert!(!out.status.success());
    let unchecked = text(&cli(&db.url, &["health"], &[]));
    assert!(unchecked.contains("audit: checkpoints not checked"), "{unchecked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_chains_to_the_newest_checkpoint_on_nats_whoever_signed_it() {
    let db = TestDb::new(Backend::Sqlite).await;
    bootstrap(&db.store).await;
    decide(&db.store, "mint-2").await;
    let nats = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = checkpoint::generate();
    let public = checkpoint::public_key_text(&key.verifying_key());
    let instance = |dir: Option<&Path>| Schedule {
        key: key.clone(),
        every: Duration::from_secs(3600),
        dir: dir.map(Path::to_path_buf),
        nats: Some(nats.url().parse().unwrap()),
        last: Default::default(),
    };
    let (a, b) = (instance(Some(dir.path())), instance(None));
    assert_eq!(b.known().await, None, "nothing signed yet");
    let by_a = schedule::write(&db.store, &a).await.unwrap();
    assert_eq!(b.known().await, Some(by_a.clone()), "b reads a's from NATS");
    decide(&db.store, "mint-3").await;
    let by_b = schedule::write(&db.store, &b).await.unwrap();
    assert_eq!(by_b.seq, 3);
    assert_eq!(a.known().await, Some(by_b.clone()), "a reads b's, which its directory lacks");

    // health reads the age from the NATS subject.
    let url = nats.url();
    let key_env = [("CUSTODY_INDEXER_AUDIT_PUBLIC_KEY", public.as_str())];
    let said = text(&cli(&db.url, &["health", "--nats-url", &url], &key_env));
    assert!(age_said(&said) < 60, "{said}");

    // The log rewritten behind b's checkpoint: a third instance, knowing
    // nothing of its own, chains to it and refuses to sign.
    let pool = AnyPool::connect(&db.url).await.unwrap();
    drop_guards(&pool, Backend::Sqlite).await;
    rehash_from(&pool, &db.store, 2, |e| e.target_id = "mint-forged".into()).await;
    let refused = schedule::write(&db.store, &instance(None)).await.unwrap_err();
    assert!(matches!(refused, ScheduleError::Broken(ref at) if at.seq == 3), "{refused}");
}
