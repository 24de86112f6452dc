//! An entry a writer appends after the log's authentication is counted in
//! `custody_indexer_audit_broken_total` by the instance signing the
//! checkpoints, once, and the checkpoints go on: a checkpoint grants
//! nothing, and stopping them would silence them.

use std::time::Duration;

use super::{
    World,
    common::{
        checkpoints::nth,
        db::Backend,
        writer::{Forged, append_forged},
    },
};
use custody_indexer::audit::{
    checkpoint,
    schedule::{self, Schedule},
};
use tokio_util::sync::CancellationToken;

/// The counter's value in this process's metrics (0 before it is raised).
fn broken_total() -> f64 {
    let text = custody_indexer::telemetry::prometheus().render();
    let line = text.lines().find(|l| l.starts_with("custody_indexer_audit_broken_total "));
    line.map_or(0.0, |line| line.rsplit(' ').next().unwrap().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writers_entry_is_counted_once_and_the_checkpoints_go_on() {
    let world = World::new(Backend::Sqlite).await;
    let store = world.app.store();
    let before = broken_total();
    let forged = Forged {
        actor: "system",
        action: "operator.enabled",
        target_kind: "operator",
        target_id: &world.operator.operator.id,
        organization_id: None,
        detail: None,
    };
    let entry = append_forged(&world.pool, store, forged).await;

    let dir = tempfile::tempdir().unwrap();
    let key = checkpoint::generate();
    let every = Duration::from_secs(2);
    let instance =
        Schedule { key, every, dir: Some(dir.path().to_path_buf()), nats: None, last: Default::default() };
    let stop = CancellationToken::new();
    let running = tokio::spawn(schedule::run(store.clone(), instance.into(), "node-a".into(), stop.clone()));
    let first = nth(dir.path(), 1, Duration::from_secs(30)).await;
    assert!(first.seq >= entry.seq, "the chain is signed, the writer's entry in it");
    assert_eq!(broken_total(), before + 1.0, "counted when the log was read");
    let second = nth(dir.path(), 2, Duration::from_secs(30)).await;
    assert!(second.at > first.at);
    assert_eq!(broken_total(), before + 1.0, "counted once");
    stop.cancel();
    running.await.unwrap();
}
