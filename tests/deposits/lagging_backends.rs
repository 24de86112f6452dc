//! The EVM watcher through one load-balanced URL whose backends disagree: the
//! real node and a backend 12 blocks behind, chosen at random per request
//! (tests/common/lagging.rs; Solana's are in tests/deposits/lagging_solana.rs).
//! Nothing may be missed or recorded twice.

use crate::common;

use std::time::Duration;

use alloy::primitives::{Address, U256};
use common::{
    Anvil, Backend, CHAIN, TestDb, add_account,
    anvil::{Mined, TestToken::TestTokenInstance},
    chain_config,
    lagging::{self, Family, LaggingRpc, Row, assert_exact, settled},
};
use custody_indexer::evm::{EvmWatcher, WatchError};
use tokio_util::sync::CancellationToken;

const ETH: u64 = 1_000_000_000_000_000_000;

/// Sends the `i`-th EVM deposit: native (`i` ETH) or token (`i` TUSD), to
/// alice or bob; returns its row.
async fn evm_deposit(anvil: &Anvil, token: &TestTokenInstance<alloy::providers::DynProvider>, i: u64) -> Row {
    let (outsider, alice, bob) = (anvil.accounts[0], anvil.accounts[1], anvil.accounts[2]);
    let (to, account) = if i.is_multiple_of(2) { (alice, "alice") } else { (bob, "bob") };
    let (hash, symbol) = if i.is_multiple_of(3) {
        (anvil.send_eth(outsider, to, U256::from(i) * U256::from(ETH)).await, "ETH")
    } else {
        let receipt = token.transfer(to, U256::from(i * 1_000_000)).from(outsider).mined().await;
        (receipt.transaction_hash, "TUSD")
    };
    (hash.to_string(), account.into(), symbol.into(), i.to_string())
}

struct EvmSetup {
    anvil: Anvil,
    db: TestDb,
    token: TestTokenInstance<alloy::providers::DynProvider>,
    token_address: Address,
    rpc: LaggingRpc,
}

async fn evm_setup(backend: Backend) -> EvmSetup {
    let anvil = Anvil::start().await;
    let db = TestDb::new(backend).await;
    add_account(&db.store, "alice", &anvil.accounts[1].to_string()).await;
    add_account(&db.store, "bob", &anvil.accounts[2].to_string()).await;
    let token_address = anvil.deploy_token("TUSD").await;
    let token = anvil.token(token_address);
    token.mint(anvil.accounts[0], U256::from(1_000_000_000_000u64)).from(anvil.accounts[0]).mined().await;
    let rpc = lagging::start(anvil.url(), Family::Evm, 12).await;
    EvmSetup { anvil, db, token, token_address, rpc }
}

async fn evm_watcher(setup: &EvmSetup) -> EvmWatcher {
    evm_watcher_reading(setup, "transactions").await
}

async fn evm_watcher_reading(setup: &EvmSetup, reads: &str) -> EvmWatcher {
    let token = setup.token_address.to_checksum(None);
    let extra = format!("max_block_range = 4\nblock_reads = {reads:?}");
    let config = chain_config(std::slice::from_ref(&setup.rpc.url), Some(&token), &extra);
    EvmWatcher::connect(config, setup.db.store.clone()).await.expect("watcher connects")
}

#[tokio::test]
async fn evm_live_deposits_through_a_lagging_backend_are_found_exactly_once() {
    let setup = evm_setup(Backend::Sqlite).await;
    let watcher = evm_watcher(&setup).await;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));

    // One deposit block at a time, slowly enough that the watcher follows
    // the tip, where the backend behind lacks the newest blocks.
    let mut expected = Vec::new();
    for i in 1..=40 {
        expected.push(evm_deposit(&setup.anvil, &setup.token, i).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Past the confirmation depth and the lagging backend's head.
    setup.anvil.mine(20).await;
    let found = settled(&setup.db.store, CHAIN, expected.len(), Duration::from_secs(90)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();

    assert_exact(&found, &expected, "live");
    let dropped = setup.rpc.stats.dropped_logs.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("logs withheld by the backend behind: {dropped}");
    assert!(dropped > 0, "the backend behind answered eth_getLogs without logs");
}

#[tokio::test]
async fn evm_backfill_through_a_lagging_backend_finds_every_deposit_once() {
    let setup = evm_setup(Backend::Postgres).await;
    let dropped = || setup.rpc.stats.dropped_logs.load(std::sync::atomic::Ordering::SeqCst);
    backfill_until_withheld(&setup, "transactions", dropped).await;
    eprintln!("logs withheld by the backend behind: {}", dropped());
    assert!(dropped() > 0, "the backend behind answered eth_getLogs without logs");
}

#[tokio::test]
async fn evm_backfill_by_block_receipts_through_a_lagging_backend_finds_every_deposit_once() {
    let setup = evm_setup(Backend::Sqlite).await;
    let nulls = || setup.rpc.stats.null_receipts.load(std::sync::atomic::Ordering::SeqCst);
    backfill_until_withheld(&setup, "receipts", nulls).await;
    eprintln!("receipt lists withheld by the backend behind: {}", nulls());
    assert!(nulls() > 0, "the backend behind answered eth_getBlockReceipts with null");
}

/// Sends 40 deposits, confirmed on the real node while the newest are still
/// beyond the backend behind, then backfills them through the lagging URL,
/// reading blocks as `reads` says, until `withheld` counts an answer the
/// backend behind withheld (a coin toss per request decides; each backfill
/// is idempotent). Each backfill finds exactly the deposits.
async fn backfill_until_withheld(setup: &EvmSetup, reads: &str, withheld: impl Fn() -> u32) {
    let mut expected = Vec::new();
    for i in 1..=40 {
        expected.push(evm_deposit(&setup.anvil, &setup.token, i).await);
    }
    setup.anvil.mine(3).await;
    let to = setup.anvil.head().await - 3;
    let mut watcher = evm_watcher_reading(setup, reads).await;
    for _ in 0..10 {
        let report = backfill_through_lag(&mut watcher, to).await;
        let found = settled(&setup.db.store, CHAIN, expected.len(), Duration::from_secs(5)).await;
        assert_exact(&found, &expected, &format!("backfill reading {reads}"));
        assert_eq!(report.deposits_found, expected.len());
        if withheld() > 0 {
            break;
        }
    }
}

/// One backfill through the lagging URL, retried while the head it reads
/// comes from the backend behind (`to` is not confirmed there) or a read fails.
async fn backfill_through_lag(
    watcher: &mut EvmWatcher,
    to: u64,
) -> custody_indexer::deposits::watcher::BackfillReport {
    for _ in 0..50 {
        match watcher.backfill(0, Some(to), &|_, _| {}).await {
            Ok(done) => return done,
            Err(WatchError::AboveConfirmed { .. }) => {}
            Err(error) if error.is_retryable() => {}
            Err(error) => panic!("backfill: {error}"),
        }
    }
    panic!("no backfill completed in 50 attempts");
}

#[tokio::test]
async fn complete_log_answers_cost_no_extra_request() {
    // A backend 0 blocks behind: every answer is complete.
    let anvil = Anvil::start().await;
    let db = TestDb::new(Backend::Sqlite).await;
    let (outsider, alice) = (anvil.accounts[0], anvil.accounts[1]);
    add_account(&db.store, "alice", &alice.to_string()).await;
    let token_address = anvil.deploy_token("TUSD").await;
    let token = anvil.token(token_address);
    token.mint(outsider, U256::from(1_000_000_000u64)).from(outsider).mined().await;
    for i in 1..=20u64 {
        token.transfer(alice, U256::from(i)).from(outsider).mined().await;
    }
    anvil.mine(5).await;
    let rpc = lagging::start(anvil.url(), Family::Evm, 0).await;
    let config = chain_config(
        std::slice::from_ref(&rpc.url),
        Some(&token_address.to_checksum(None)),
        "max_block_range = 4",
    );
    let mut watcher = EvmWatcher::connect(config, db.store.clone()).await.unwrap();
    let head = anvil.head().await;
    watcher.backfill(0, Some(head - 3), &|_, _| {}).await.unwrap();
    assert_eq!(db.store.deposits_on_chain(CHAIN).await.unwrap().len(), 20);
    let by_hash = rpc.stats.logs_by_hash.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(by_hash, 0, "blocks read again by hash although every answer was complete");
}

/// An address registered late, from block (slot) 0: its gap is scanned in the
/// background through the lagging URL, and exactly its deposits are found.
#[tokio::test]
async fn a_late_registration_gap_scanned_through_a_lagging_backend_misses_nothing() {
    use custody_indexer::{deposits::coverage, store::WatchFrom};

    let setup = evm_setup(Backend::Sqlite).await;
    let carol = setup.anvil.accounts[3];
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(evm_watcher(&setup).await.run(shutdown.clone()));
    let mut expected = Vec::new();
    for i in 1..=12u64 {
        let (hash, symbol) = if i.is_multiple_of(2) {
            let wei = U256::from(i) * U256::from(ETH);
            (setup.anvil.send_eth(setup.anvil.accounts[0], carol, wei).await, "ETH")
        } else {
            let transfer =
                setup.token.transfer(carol, U256::from(i * 1_000_000)).from(setup.anvil.accounts[0]);
            (transfer.mined().await.transaction_hash, "TUSD")
        };
        expected.push((hash.to_string(), "carol".to_string(), symbol.to_string(), i.to_string()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    common::add_account_from(&setup.db.store, CHAIN, "carol", &carol.to_string(), WatchFrom::Block(0)).await;
    let token = setup.token_address.to_checksum(None);
    let config = chain_config(std::slice::from_ref(&setup.rpc.url), Some(&token), "max_block_range = 4");
    let gaps = tokio::spawn(coverage::fill_gaps(
        EvmWatcher::history(config, setup.db.store.clone()),
        shutdown.clone(),
    ));
    for _ in 0..20 {
        setup.anvil.mine(1).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let found = settled(&setup.db.store, CHAIN, expected.len(), Duration::from_secs(60)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    gaps.await.unwrap();
    assert_exact(&found, &expected, "gap");
    assert_eq!(setup.db.store.coverage(CHAIN).await.unwrap().catching_up, 0);
}
