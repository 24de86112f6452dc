//! Worker leases on both backends: one holder at a time, an epoch that grows
//! with every takeover, and no write under a stale epoch.

mod common;

use std::time::Duration;

use common::{TestDb, db::BACKENDS};
use custody_indexer::{
    chain::Chain,
    store::{CursorMove, ScanCommit, Store, StoreError, WorkerKind},
};

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
        let first = store.take_lease(WorkerKind::Watcher, CHAIN, "a", 300_000, false).await.unwrap().unwrap();
        assert_eq!(first.epoch, 1);
        assert_eq!(store.take_lease(WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap(), None);
        // The sender's lease of the same chain is another lease.
        assert!(store.take_lease(WorkerKind::Sender, CHAIN, "b", MINUTE, false).await.unwrap().is_some());
        // `a` stops renewing: once its lease lapses, `b` takes over.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let second = store.take_lease(WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();
        assert_eq!(second.epoch, 2, "{backend:?}");
        assert!(
            !store.renew_lease(&first, MINUTE).await.unwrap(),
            "{backend:?}: a stale holder cannot renew"
        );
        assert!(store.renew_lease(&second, MINUTE).await.unwrap());
        // A release on a clean stop frees the lease at once; the epoch goes on.
        store.release_lease(&second).await.unwrap();
        let third = store.take_lease(WorkerKind::Watcher, CHAIN, "a", MINUTE, false).await.unwrap().unwrap();
        assert_eq!(third.epoch, 3);
        let leases = store.worker_leases().await.unwrap();
        let watcher = leases.iter().find(|l| l.kind == WorkerKind::Watcher).unwrap();
        assert_eq!((watcher.owner.as_str(), watcher.epoch), ("a", 3));
        assert!(watcher.held_at(chrono::Utc::now()));
    }
}

#[tokio::test]
async fn a_watcher_whose_lease_was_taken_over_commits_no_cursor() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        let old = store.take_lease(WorkerKind::Watcher, CHAIN, "a", 300_000, false).await.unwrap().unwrap();
        let a = store.fenced(old);
        a.commit_scan(&live_scan(0, 4, None)).await.unwrap();
        assert_eq!(next_block(store).await, 5);
        tokio::time::sleep(Duration::from_millis(400)).await;
        // Lapsed, not yet taken over: `a` no longer writes either.
        let lapsed = a.commit_scan(&live_scan(5, 6, Some(5))).await.unwrap_err();
        assert!(matches!(lapsed, StoreError::Conflict(_)), "{backend:?}: {lapsed:?}");
        let new = store.take_lease(WorkerKind::Watcher, CHAIN, "b", MINUTE, false).await.unwrap().unwrap();
        let b = store.fenced(new);
        // Renewing late does not revive a taken-over holding.
        assert!(!store.renew_lease(a.fence().unwrap(), MINUTE).await.unwrap());
        let stale = a.commit_scan(&live_scan(5, 6, Some(5))).await.unwrap_err();
        assert!(matches!(stale, StoreError::Conflict(_)), "{backend:?}: {stale:?}");
        assert_eq!(next_block(store).await, 5, "{backend:?}: the stale scan moved nothing");
        b.commit_scan(&live_scan(5, 6, Some(5))).await.unwrap();
        assert_eq!(next_block(store).await, 7);
    }
}
