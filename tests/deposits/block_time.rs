//! A chain making five blocks a second, as Base does since its Denim
//! upgrade: the watcher measures the block time while it follows the
//! chain, `health` judges a lag limit written in seconds through it, and a
//! restarted watcher starts from the time measured before.

use crate::common;

use std::time::Duration;

use alloy::providers::Provider;
use common::{Anvil, Backend, CHAIN, TestDb, chain_config, eventually};
use custody_indexer::{
    config::{ChainConfig, Chains},
    deposits::health::{self, ChainReport},
    evm::EvmWatcher,
    store::Store,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Follows the chain with `config` until the token is cancelled.
async fn follow(config: ChainConfig, store: &Store) -> (CancellationToken, JoinHandle<()>) {
    let watcher = EvmWatcher::connect(config, store.clone()).await.expect("watcher connects");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { watcher.run(shutdown).await.expect("the watcher follows the chain") }
    });
    (shutdown, task)
}

async fn report(store: &Store, config: &ChainConfig) -> ChainReport {
    let mut chains = Chains::default();
    chains.insert(config.clone());
    let report = health::check(store, &chains, &[CHAIN]).await;
    report.chains.into_iter().next().expect("the chain's report")
}

#[tokio::test]
async fn a_chain_making_five_blocks_a_second_is_measured_and_its_lag_judged_in_seconds() {
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let db = TestDb::new(Backend::Sqlite).await;
    let config = chain_config(&[anvil.url()], None, "poll_interval_secs = 0.5\nmax_lag_secs = 60");
    let (shutdown, task) = follow(config.clone(), &db.store).await;

    let measured = eventually(Duration::from_secs(60), "a measured block time", || async {
        Some(report(&db.store, &config).await).filter(|r| r.block_time_ms.is_some())
    })
    .await;
    let ms = measured.block_time_ms.unwrap();
    assert!((150..=300).contains(&ms), "anvil mines every 200 ms, measured {ms} ms");
    let limit = measured.max_lag_blocks.expect("60 s in blocks");
    assert!((200..=400).contains(&limit), "60 s at {ms} ms is about 300 blocks, not {limit}");
    assert_eq!(measured.max_lag_seconds, Some(60.0));
    assert!(measured.healthy && measured.warnings.is_empty(), "{measured:?}");
    shutdown.cancel();
    task.await.unwrap();

    // 3,000 blocks at once, then a watcher allowed 2 s of lag and reading
    // 50 blocks a step: it starts from the block time measured before, so
    // the lag is judged at once, in seconds, and clears once caught up.
    anvil.provider.raw_request::<_, ()>("anvil_mine".into(), (3000u64,)).await.unwrap();
    let behind = chain_config(
        &[anvil.url()],
        None,
        "poll_interval_secs = 0.5\nmax_lag_secs = 2\nmax_block_range = 50",
    );
    let (shutdown, task) = follow(behind.clone(), &db.store).await;
    let lagging = eventually(Duration::from_secs(30), "the lag judged in seconds", || async {
        Some(report(&db.store, &behind).await).filter(|r| !r.healthy)
    })
    .await;
    let problem = lagging.problems.join("; ");
    assert!(problem.contains("ms a block (limit 2 s)"), "{problem}");
    assert!(lagging.max_lag_blocks.is_some_and(|b| (7..=14).contains(&b)), "{lagging:?}");
    let caught_up = eventually(Duration::from_secs(60), "caught up", || async {
        Some(report(&db.store, &behind).await).filter(|r| r.healthy)
    })
    .await;
    assert!(caught_up.lag.is_some_and(|lag| lag <= 10), "{caught_up:?}");
    shutdown.cancel();
    task.await.unwrap();
}
