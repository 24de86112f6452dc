//! `run`'s reconciliation is spread over its period: 401 watched
//! addresses are three slices, read a third of `reconcile_every_secs`
//! apart (their Multicall3 batches seen that far apart by the node), every
//! address compared once a pass, and the period achieved is kept beside
//! the one set, as `health` shows it.

use crate::common;

use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use common::{
    Anvil, CHAIN, catch_up, chain_config,
    db::{Backend, TestDb},
    eventually, proxy,
};
use custody_indexer::{
    evm::EvmWatcher,
    reconcile::{Reconciled, background},
    store::now_micros,
};
use tokio_util::sync::CancellationToken;

const ADDRESSES: usize = 401;
const PERIOD_SECS: u64 = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_is_three_slices_a_third_of_the_period_apart() {
    let anvil = Anvil::start().await;
    anvil.place_multicall3().await;
    let counted = proxy::start(anvil.url()).await;
    let db = TestDb::new(Backend::Sqlite).await;
    let store = &db.store;
    common::numbered_identities(store).await;
    let watched: Vec<Address> =
        (0..ADDRESSES).map(|i| Address::left_padding_from(&(7_000 + i as u64).to_be_bytes())).collect();
    common::watch_numbered(store, &watched).await;
    for address in watched.iter().step_by(40) {
        anvil.send_eth(anvil.accounts[0], *address, U256::from(1_000u64)).await;
    }
    anvil.mine(10).await;
    let extra = format!("reconcile_every_secs = {PERIOD_SECS}\nreconcile_max_rps = 1000");
    let config = chain_config(std::slice::from_ref(&counted.url), None, &extra);
    let mut watcher = EvmWatcher::connect(config.clone(), store.clone()).await.unwrap();
    catch_up(&mut watcher).await;

    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn(background::every(config, store.clone(), stop.clone()));
    let runs = || async { store.reconcile_runs(Some(CHAIN)).await.unwrap().into_iter().next() };
    let first = eventually(Duration::from_secs(60), "the first pass kept", runs).await;
    let first_ended = started.elapsed();
    let batches: Vec<Instant> = counted
        .faults
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, method)| method == "eth_call")
        .map(|(at, _)| *at)
        .collect();
    let second = eventually(Duration::from_secs(60), "the second pass kept", || async {
        runs().await.filter(|run| run.period_ms.is_some())
    })
    .await;
    stop.cancel();
    task.await.unwrap();

    assert_eq!(first.slices, 3, "{first:?}");
    assert_eq!(
        (first.lines, first.differ, first.failed, first.skipped),
        (ADDRESSES as u64, 0, 0, 0),
        "{first:?}"
    );
    assert_eq!(first.period_ms, None, "no pass before the first: {first:?}");
    // One batch of about 200 addresses a slice, the slices 4 s apart: a
    // pass read at once would send them within a second or two.
    assert_eq!(batches.len(), 3, "one eth_call a slice");
    let spread = batches[2].duration_since(batches[0]);
    let third = Duration::from_secs(PERIOD_SECS / 3);
    assert!(
        spread >= 2 * third - Duration::from_millis(200),
        "the last slice 8 s after the first: {spread:?}"
    );
    assert!(first_ended >= 2 * third, "the pass ends with its last slice: {first_ended:?}");
    assert!(first.took_ms >= (2 * third).as_millis() as u64, "{first:?}");

    let every_ms = PERIOD_SECS * 1000;
    assert_eq!(
        (second.slices, second.every_ms, second.lines, second.differ),
        (3, every_ms, ADDRESSES as u64, 0)
    );
    let achieved = second.period_ms.unwrap();
    assert!(
        (every_ms..every_ms + 1500).contains(&achieved),
        "the next pass begins a period after the first: {achieved} ms"
    );
    let shown = Reconciled::of(&second, now_micros());
    assert!(
        shown.line().contains(&format!("every {} s of {PERIOD_SECS} s set", achieved / 1000)),
        "{}",
        shown.line()
    );
    assert!(!shown.behind(), "{}", shown.line());
    assert_eq!(shown.warning(CHAIN), None, "{}", shown.line());
    let stale = Reconciled { seconds_ago: 3 * PERIOD_SECS, ..shown.clone() };
    assert!(stale.warning(CHAIN).unwrap().contains("no pass was kept for two periods"), "{}", stale.line());
    let late = Reconciled { period_ms: Some(2 * every_ms), ..shown };
    assert!(late.behind() && late.warning(CHAIN).unwrap().contains("further apart"), "{}", late.line());
}
