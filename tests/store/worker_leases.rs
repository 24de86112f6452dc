//! Worker leases on both backends: one holder at a time, an epoch that grows
//! with every takeover, and no write under a stale epoch; on PostgreSQL,
//! whatever the instances' clocks say.

use crate::common;

use std::time::Duration;

use common::{
    TestDb,
    db::{BACKENDS, Backend},
};
use custody_indexer::deposits::commit;
use custody_indexer::{
    chain::Chain,
    lease::{self, Leases},
    store::{Clock, CursorMove, ScanCommit, Store, StoreError, WorkerKind},
};

use tokio_util::sync::CancellationToken;

const CHAIN: Chain = Chain::BaseSepolia;
const MINUTE: i64 = 60_000_000;

fn live_scan(from: u64, to: u64, expected: Option<u64>) -> ScanCommit {
    ScanCommit {
        chain: CHAIN,
        from,
        to,
        head: to,
        blocks: vec![],
        deposits: vec![],
        confirmed_through: None,
        cursor: CursorMove::Live { expected, watch_version: 0 },
        keep_blocks: 100,
    }
}

async fn next_block(store: &Store) -> u64 {
    store.chain_state(CHAIN).await.unwrap().unwrap().next_block
}

#[tokio::test]
async fn a_lease_has_one_holder_and_a_new_epoch_at_each_takeover() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        let first =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "a", 300_000, false).await.unwrap().unwrap();
        assert_eq!(first.epoch, 1);
        assert_eq!(
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap(),
            None
        );
        // The sender's lease of the same chain is another lease.
        assert!(
            lease::take_lease(store, WorkerKind::Sender, CHAIN, "b", MINUTE, false).await.unwrap().is_some()
        );
        // `a` stops renewing: once its lease lapses, `b` takes over.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let second =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();
        assert_eq!(second.epoch, 2, "{backend:?}");
        assert!(
            !lease::renew_lease(store, &first, MINUTE).await.unwrap(),
            "{backend:?}: a stale holder cannot renew"
        );
        assert!(lease::renew_lease(store, &second, MINUTE).await.unwrap());
        // A release on a clean stop frees the lease at once; the epoch goes on.
        lease::release_lease(store, &second).await.unwrap();
        let third =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "a", MINUTE, false).await.unwrap().unwrap();
        assert_eq!(third.epoch, 3);
        let leases = store.worker_leases().await.unwrap();
        let watcher = leases.iter().find(|l| l.kind == WorkerKind::Watcher).unwrap();
        assert_eq!((watcher.owner.as_str(), watcher.epoch), ("a", 3));
        assert!(watcher.held);
    }
}

#[tokio::test]
async fn a_watcher_whose_lease_was_taken_over_commits_no_cursor() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        let old =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "a", 300_000, false).await.unwrap().unwrap();
        let a = store.fenced(old);
        commit::commit_scan(&a, &live_scan(0, 4, None)).await.unwrap();
        assert_eq!(next_block(store).await, 5);
        tokio::time::sleep(Duration::from_millis(400)).await;
        // Lapsed, not yet taken over: `a` no longer writes either.
        let lapsed = commit::commit_scan(&a, &live_scan(5, 6, Some(5))).await.unwrap_err();
        assert!(matches!(lapsed, StoreError::LeaseLost(_)), "{backend:?}: {lapsed:?}");
        let new =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();
        let b = store.fenced(new);
        // Renewing late does not revive a taken-over holding.
        assert!(!lease::renew_lease(store, a.fence().unwrap(), MINUTE).await.unwrap());
        let stale = commit::commit_scan(&a, &live_scan(5, 6, Some(5))).await.unwrap_err();
        assert!(matches!(stale, StoreError::LeaseLost(_)), "{backend:?}: {stale:?}");
        assert_eq!(next_block(store).await, 5, "{backend:?}: the stale scan moved nothing");
        commit::commit_scan(&b, &live_scan(5, 6, Some(5))).await.unwrap();
        assert_eq!(next_block(store).await, 7);
    }
}

/// Instances on one PostgreSQL whose clocks disagree by an hour: lease times
/// are the database's clock, so none of them takes over a live lease or
/// keeps writing under a lapsed one.
#[tokio::test]
async fn on_postgres_a_lease_lapses_by_the_databases_clock_not_an_instances() {
    const HOUR: i64 = 3_600_000_000;
    let db = TestDb::new(Backend::Postgres).await;
    let fast = db.store.with_clock(Clock::skewed(HOUR));
    let slow = db.store.with_clock(Clock::skewed(-HOUR));

    // `a` holds the watcher's lease for two seconds; `b`, whose clock is an
    // hour ahead, finds it live, and so does `health` read through it.
    let held = lease::take_lease(&db.store, WorkerKind::Watcher, CHAIN, "a", 2_000_000, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease::take_lease(&fast, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap(), None);
    let leases = fast.worker_leases().await.unwrap();
    assert!(leases.iter().all(|l| l.held), "{leases:?}");

    // `c`, whose clock is an hour behind, takes the sender's lease for two
    // seconds and renews it: still two seconds ahead of the database's now,
    // not an hour in its past, so `b` cannot take it either.
    let sender =
        lease::take_lease(&slow, WorkerKind::Sender, CHAIN, "c", 2_000_000, false).await.unwrap().unwrap();
    assert!(lease::renew_lease(&slow, &sender, 2_000_000).await.unwrap());
    assert_eq!(lease::take_lease(&fast, WorkerKind::Sender, CHAIN, "b", MINUTE, false).await.unwrap(), None);

    // Once the watcher's lease lapsed by the database's clock, `a` writes
    // nothing even through a handle whose clock is an hour behind, and `b`
    // takes over.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let lapsed = commit::commit_scan(&slow.fenced(held), &live_scan(0, 4, None)).await.unwrap_err();
    assert!(matches!(lapsed, StoreError::LeaseLost(_)), "{lapsed:?}");
    let leases = slow.worker_leases().await.unwrap();
    assert!(leases.iter().all(|l| !l.held), "{leases:?}");
    let taken =
        lease::take_lease(&fast, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();
    assert_eq!((taken.owner.as_str(), taken.epoch), ("b", 2));
}

/// A renewal that hangs (another transaction holds the lease row's lock)
/// does not keep the worker running past its lease: the worker is stopped
/// when the lease ends, not when the database answers.
#[tokio::test]
async fn a_worker_whose_renewal_hangs_is_stopped_when_its_lease_ends() {
    use sqlx::{Connection, Executor};
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let leases = Leases::new(db.store.apart(1).await.unwrap(), Duration::from_millis(900), false);
        let shutdown = CancellationToken::new();
        let (events, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let holding = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let work = |_fence, stop: CancellationToken| {
                    let events = events.clone();
                    async move {
                        events.send("started").unwrap();
                        stop.cancelled().await;
                        events.send("stopped").unwrap();
                        Ok::<(), std::convert::Infallible>(())
                    }
                };
                leases.hold(WorkerKind::Watcher, CHAIN, &shutdown, work).await
            }
        });
        assert_eq!(seen.recv().await, Some("started"), "{backend:?}");

        // Another transaction locks the lease row (on SQLite, the whole file)
        // and keeps it far longer than the lease lasts.
        let mut locker = sqlx::AnyConnection::connect(&db.url).await.unwrap();
        match backend {
            Backend::Sqlite => locker.execute("BEGIN IMMEDIATE").await.unwrap(),
            Backend::Postgres => {
                locker.execute("BEGIN").await.unwrap();
                locker.execute("SELECT epoch FROM worker_leases FOR UPDATE").await.unwrap()
            }
        };
        let stopped = tokio::time::timeout(Duration::from_secs(10), seen.recv()).await;
        assert_eq!(
            stopped.ok().flatten(),
            Some("stopped"),
            "{backend:?}: stopped while the renewal still hangs"
        );

        locker.execute("ROLLBACK").await.unwrap();
        shutdown.cancel();
        holding.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn only_the_watchers_holder_stops_its_chain_and_a_resume_records_who() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        let stale =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "a", 300_000, false).await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let holder =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();

        let refused = commit::stop_chain(&store.fenced(stale), CHAIN, "store", "stale", "a").await;
        assert!(matches!(refused, Err(StoreError::LeaseLost(_))), "{backend:?}: {refused:?}");
        assert_eq!(store.chain_stop(CHAIN).await.unwrap(), None, "{backend:?}: a lost lease stops nothing");

        let holding = store.fenced(holder);
        commit::stop_chain(&holding, CHAIN, "reorg_too_deep", "too deep", "b").await.unwrap();
        commit::stop_chain(&holding, CHAIN, "store", "later", "b").await.unwrap();
        let stop = store.chain_stop(CHAIN).await.unwrap().expect("stopped");
        assert_eq!(
            (stop.kind.as_str(), stop.reason.as_str(), stop.instance.as_str()),
            ("reorg_too_deep", "too deep", "b")
        );
        assert_eq!(store.chain_stops().await.unwrap(), vec![stop.clone()]);
        assert_eq!(store.chain_stop(Chain::EthereumTestnet).await.unwrap(), None, "other chains run");

        let resumed = commit::resume_chain(store, CHAIN, "oncall-ana").await.unwrap().expect("was stopped");
        assert_eq!(resumed.resumed_by.as_deref(), Some("oncall-ana"), "{backend:?}");
        assert!(resumed.resumed_at.is_some_and(|at| at >= stop.stopped_at));
        assert_eq!(store.chain_stop(CHAIN).await.unwrap(), None);
        assert_eq!(
            commit::resume_chain(store, CHAIN, "oncall-ana").await.unwrap(),
            None,
            "nothing left to resume"
        );

        // Stopped again, it needs a new resume; both stops stay on record.
        commit::stop_chain(&holding, CHAIN, "store", "again", "b").await.unwrap();
        assert_eq!(store.chain_stop(CHAIN).await.unwrap().unwrap().reason, "again");
        let history = store.chain_stop_history(CHAIN).await.unwrap();
        let reasons: Vec<_> = history.iter().map(|s| (s.reason.as_str(), s.resumed_by.as_deref())).collect();
        assert_eq!(reasons, [("again", None), ("too deep", Some("oncall-ana"))], "{backend:?}");
    }
}

/// Every transaction of a handle fenced by a lease checks it, whatever
/// wing writes: the watcher's health records (once written outside any
/// transaction) and a transaction begun by hand are refused alike once the
/// lease was taken over, and nothing is written.
#[tokio::test]
async fn every_write_of_a_worker_that_lost_its_lease_is_refused() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        let stale =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "a", 300_000, false).await.unwrap().unwrap();
        let stale = store.fenced(stale);
        commit::record_check(&stale, CHAIN, 10, 9, None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let holder =
            lease::take_lease(store, WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();

        let check = commit::record_check(&stale, CHAIN, 20, 19, None).await;
        assert!(matches!(check, Err(StoreError::LeaseLost(_))), "{backend:?}: {check:?}");
        let failure = commit::record_failure(&stale, CHAIN, "store", "stale").await;
        assert!(matches!(failure, Err(StoreError::LeaseLost(_))), "{backend:?}: {failure:?}");
        let begun = stale.begin().await;
        assert!(matches!(begun, Err(StoreError::LeaseLost(_))), "{backend:?}: a transaction begun by hand");
        let health = store.chain_health().await.unwrap();
        assert_eq!(
            (health[0].head, health[0].last_error.as_deref()),
            (Some(10), None),
            "{backend:?}: {health:?}"
        );

        commit::record_check(&store.fenced(holder), CHAIN, 20, 19, None).await.unwrap();
        assert_eq!(store.chain_health().await.unwrap()[0].head, Some(20), "{backend:?}: the holder writes");
    }
}
