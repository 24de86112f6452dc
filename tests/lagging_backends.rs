//! The watchers through one load-balanced URL whose backends disagree: the
//! real node and a backend 12 blocks (Solana: 50 slots) behind, chosen at
//! random per request (tests/common/lagging.rs). Nothing may be missed,
//! recorded twice, or failed while it is final.

mod common;

use std::time::Duration;

use alloy::primitives::{Address, U256};
use common::{
    Anvil, Backend, CHAIN, TestDb, add_account,
    anvil::{Mined, TestToken::TestTokenInstance},
    chain_config,
    lagging::{self, Family, LaggingRpc},
    solana::{SOL, SolanaNode, transfer_sol},
};
use custody_indexer::{
    chain::Chain,
    config::ChainConfig,
    deposit::DepositStatus,
    evm::{EvmWatcher, WatchError},
    solana::SolanaWatcher,
    store::Store,
};
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::request::RpcRequest;
use solana_signer::Signer;
use tokio_util::sync::CancellationToken;

const ETH: u64 = 1_000_000_000_000_000_000;
const SOLANA: Chain = Chain::SolanaDevnet;

/// `(transaction, account, currency, amount)` of each deposit, sorted.
type Row = (String, String, String, String);

async fn rows(store: &Store, chain: Chain) -> Vec<Row> {
    let mut rows: Vec<Row> = store
        .deposits_on_chain(chain)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.transaction_hash, d.account_id, d.currency_symbol, d.amount))
        .collect();
    rows.sort();
    rows
}

/// Waits until the store holds `expected.len()` deposits, all `CONFIRMED`
/// (or the time is up), then returns what it holds.
async fn settled(store: &Store, chain: Chain, expected: usize, timeout: Duration) -> Vec<Row> {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        let deposits = store.deposits_on_chain(chain).await.unwrap();
        if deposits.len() >= expected && deposits.iter().all(|d| d.status == DepositStatus::Confirmed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    rows(store, chain).await
}

/// The store holds exactly the expected deposits: none missing, none twice.
fn assert_exact(found: &[Row], expected: &[Row], what: &str) {
    let missing: Vec<&Row> = expected.iter().filter(|r| !found.contains(r)).collect();
    let extra: Vec<&Row> = found.iter().filter(|r| !expected.contains(r)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "{what}: missing {missing:?}, unexpected {extra:?}");
    assert_eq!(found.len(), expected.len(), "{what}: a deposit recorded twice");
}

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
async fn backfill_through_lag(watcher: &mut EvmWatcher, to: u64) -> custody_indexer::watcher::BackfillReport {
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

fn solana_config(node: &SolanaNode, url: &str, strategy: &str, start: u64) -> ChainConfig {
    let text = format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{url}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 20\nstart_block = {start}\nstrategy = \"{strategy}\"\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash
    );
    ChainConfig::from_toml(&text, std::path::Path::new("solana-lagging.toml"), &|_| None).unwrap()
}

async fn add_wallet(store: &Store, id: &str, wallet: &Pubkey) {
    common::add_account_on(store, SOLANA, id, &wallet.to_string()).await;
}

#[tokio::test]
async fn solana_deposits_through_a_lagging_backend_are_found_once_and_never_failed_in_both_strategies() {
    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(100 * SOL).await;
    let (alice, bob) = (Keypair::new().pubkey(), Keypair::new().pubkey());
    let start = node.slot(CommitmentConfig::confirmed()).await;
    let shutdown = CancellationToken::new();
    let mut watchers = Vec::new();
    for (strategy, backend) in [("blocks", Backend::Sqlite), ("signatures", Backend::Postgres)] {
        let db = TestDb::new(backend).await;
        add_wallet(&db.store, "alice", &alice).await;
        add_wallet(&db.store, "bob", &bob).await;
        let config = solana_config(&node, &rpc.url, strategy, start);
        let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
        watchers.push((strategy, db, tokio::spawn(watcher.run(shutdown.clone()))));
    }

    let mut expected = Vec::new();
    for i in 1..=24u64 {
        let (to, account) = if i.is_multiple_of(2) { (alice, "alice") } else { (bob, "bob") };
        // i tenths of a SOL.
        let signature =
            node.send(&[transfer_sol(&outsider.pubkey(), &to, i * SOL / 10)], &outsider, &[]).await;
        let amount = if i % 10 == 0 { (i / 10).to_string() } else { format!("{}.{}", i / 10, i % 10) };
        expected.push((signature, account.to_string(), "SOL".to_string(), amount));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    node.wait_finalized(node.slot(CommitmentConfig::confirmed()).await).await;

    let mut results = Vec::new();
    for (strategy, db, _) in &watchers {
        let found = settled(&db.store, SOLANA, expected.len(), Duration::from_secs(90)).await;
        let deposits = db.store.deposits_on_chain(SOLANA).await.unwrap();
        let failed = deposits.iter().filter(|d| d.status == DepositStatus::Failed).count();
        results.push((*strategy, found, failed));
    }
    shutdown.cancel();
    for (_, _, running) in watchers {
        running.await.unwrap().unwrap();
    }
    for (strategy, found, failed) in results {
        assert_eq!(failed, 0, "{strategy}: a final deposit FAILED");
        assert_exact(&found, &expected, strategy);
    }
    assert!(
        rpc.stats.withheld.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the backend behind withheld answers"
    );
}

#[tokio::test]
async fn settlement_reads_get_blocks_in_pages_for_deposits_500_000_slots_apart() {
    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(10 * SOL).await;
    let alice = Keypair::new().pubkey();
    let first = node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let first_slot = node.slot_of(&first).await;
    // The network moves 600,000 slots on, as after a long outage.
    let warp = RpcRequest::Custom { method: "surfnet_timeTravel" };
    let _: Value = node.rpc.send(warp, json!([{ "absoluteSlot": first_slot + 600_000 }])).await.unwrap();
    let second = node.send(&[transfer_sol(&outsider.pubkey(), &alice, 2 * SOL)], &outsider, &[]).await;
    let second_slot = node.slot_of(&second).await;
    assert!(second_slot - first_slot > lagging::MAX_BLOCKS_RANGE, "{first_slot} → {second_slot}");
    node.wait_finalized(second_slot).await;

    // The first read of alice's signature history finds both deposits,
    // PENDING; settling them needs slots 600,000 apart judged.
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice).await;
    let config = solana_config(&node, &rpc.url, "signatures", node.first_slot);
    let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));
    let found = settled(&db.store, SOLANA, 2, Duration::from_secs(30)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let deposits = db.store.deposits_on_chain(SOLANA).await.unwrap();
    let statuses: Vec<_> = deposits.iter().map(|d| (d.amount.clone(), d.status)).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(statuses.iter().all(|(_, s)| *s == DepositStatus::Confirmed), "{statuses:?}");
    let widest = rpc.stats.widest_range.load(std::sync::atomic::Ordering::SeqCst);
    assert!(widest <= lagging::MAX_BLOCKS_RANGE, "asked for {widest} slots at once");
}

/// An address registered late, from block (slot) 0: its gap is scanned in the
/// background through the lagging URL, and exactly its deposits are found.
#[tokio::test]
async fn a_late_registration_gap_scanned_through_a_lagging_backend_misses_nothing() {
    use custody_indexer::{coverage, store::WatchFrom};

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

#[tokio::test]
async fn a_late_solana_registration_gap_scanned_through_a_lagging_backend_misses_nothing() {
    use custody_indexer::{coverage, store::WatchFrom};

    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(100 * SOL).await;
    let (alice, carol) = (Keypair::new().pubkey(), Keypair::new().pubkey());
    let db = TestDb::new(Backend::Postgres).await;
    add_wallet(&db.store, "alice", &alice).await;
    let config = solana_config(&node, &rpc.url, "blocks", node.first_slot);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        SolanaWatcher::connect(config.clone(), db.store.clone()).await.unwrap().run(shutdown.clone()),
    );
    let mut expected = Vec::new();
    for i in 1..=12u64 {
        let signature = node.send(&[transfer_sol(&outsider.pubkey(), &carol, i * SOL)], &outsider, &[]).await;
        expected.push((signature, "carol".to_string(), "SOL".to_string(), i.to_string()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    common::add_account_from(
        &db.store,
        SOLANA,
        "carol",
        &carol.to_string(),
        WatchFrom::Block(node.first_slot),
    )
    .await;
    // A deposit to alice, so that a live scan knows carol.
    node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    // Wide gap steps reach up to the finalized slot, where the backend
    // behind lists fewer blocks than were asked for.
    let mut wide = config.clone();
    wide.max_block_range = 10_000;
    let gaps =
        tokio::spawn(coverage::fill_gaps(SolanaWatcher::history(wide, db.store.clone()), shutdown.clone()));
    let found = eventually_rows(&db.store, "carol", expected.len()).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    gaps.await.unwrap();
    assert_exact(&found, &expected, "gap");
}

/// The rows of `account`'s deposits once there are `count` (or after a minute).
async fn eventually_rows(store: &Store, account: &str, count: usize) -> Vec<Row> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let rows: Vec<Row> = rows(store, SOLANA).await.into_iter().filter(|r| r.1 == account).collect();
        if rows.len() >= count || tokio::time::Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn solana_backfill_through_a_lagging_backend_finds_every_deposit_once() {
    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let db = TestDb::new(Backend::Postgres).await;
    add_wallet(&db.store, "alice", &alice).await;
    let mut expected = Vec::new();
    for i in 1..=20u64 {
        // i tenths of a SOL.
        let signature =
            node.send(&[transfer_sol(&outsider.pubkey(), &alice, i * SOL / 10)], &outsider, &[]).await;
        let amount = if i % 10 == 0 { (i / 10).to_string() } else { format!("{}.{}", i / 10, i % 10) };
        expected.push((signature, "alice".to_string(), "SOL".to_string(), amount));
    }
    let last = node.slot(CommitmentConfig::confirmed()).await;
    node.wait_finalized(last).await;
    // Finalized on the real node; the newest deposits are beyond the backend behind.
    let mut watcher =
        SolanaWatcher::connect(solana_config(&node, &rpc.url, "blocks", node.first_slot), db.store.clone())
            .await
            .unwrap();
    let mut done = None;
    for _ in 0..100 {
        match watcher.backfill_slots(node.first_slot, Some(last), &|_, _| {}).await {
            Ok(report) => {
                done = Some(report);
                break;
            }
            // The finalized slot came from the backend behind.
            Err(WatchError::AboveConfirmed { .. }) => {}
            Err(error) if error.is_retryable() => {}
            Err(error) => panic!("backfill: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = done.expect("a backfill completed");
    assert_eq!(report.deposits_found, expected.len());
    assert_exact(&rows(&db.store, SOLANA).await, &expected, "solana backfill");
    assert!(
        rpc.stats.withheld.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the backend behind withheld answers"
    );
}

/// Ten deposits to `alice`, one after the other; their rows.
async fn ten_deposits(node: &SolanaNode, outsider: &Keypair, alice: &Pubkey) -> Vec<Row> {
    let mut expected = Vec::new();
    for i in 1..=10u64 {
        // i tenths of a SOL.
        let signature =
            node.send(&[transfer_sol(&outsider.pubkey(), alice, i * SOL / 10)], outsider, &[]).await;
        let amount = if i % 10 == 0 { (i / 10).to_string() } else { format!("0.{i}") };
        expected.push((signature, "alice".to_string(), "SOL".to_string(), amount));
    }
    expected
}

#[tokio::test]
async fn solana_address_backfill_through_a_lagging_backend_reads_the_whole_history() {
    let node = SolanaNode::start().await;
    // A backend ten seconds behind: it lacks every deposit for a while.
    let rpc = lagging::start(node.url.clone(), Family::Solana, 200).await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice).await;
    let expected = ten_deposits(&node, &outsider, &alice).await;
    // `run` has seen the chain's head, past the deposits.
    let head = node.slot(CommitmentConfig::confirmed()).await;
    let seen = db.store.accounts_version().await.unwrap();
    db.store.start_cursor(SOLANA, head, head, seen).await.unwrap();
    let config = solana_config(&node, &rpc.url, "signatures", node.first_slot);
    let mut watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    // Each backfill's requests reach either backend at random; every one
    // reads all ten. Backfills go on until one was refused by the backend
    // behind (each has even odds of never asking it), 60 at most.
    let refusals = || rpc.stats.below_min_context.load(std::sync::atomic::Ordering::SeqCst);
    for round in 0..60 {
        if round >= 5 && refusals() > 0 {
            break;
        }
        let report = watcher.backfill_address(&alice.to_string(), None, None, &|_, _| {}).await.unwrap();
        assert_eq!(report.deposits_found, expected.len(), "a short history was taken for the whole");
    }
    assert_exact(&rows(&db.store, SOLANA).await, &expected, "address backfill");
    let refused = refusals();
    eprintln!("requests the backend behind refused (-32016): {refused}");
    assert!(refused > 0, "the backend behind was asked at the freshest slot");
}

// The proxy answers while the test waits for the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solana_block_range_backfill_through_a_lagging_backend_retries_and_exits_0() {
    use common::cli::Env;

    let node = SolanaNode::start().await;
    // 10 s behind: the backfills start well within the time the backend
    // behind still lacks `--to` at finalized, however slow the machine.
    let rpc = lagging::start(node.url.clone(), Family::Solana, 100).await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let expected = ten_deposits(&node, &outsider, &alice).await;
    let last = node.slot(CommitmentConfig::confirmed()).await;
    // Finalized on the real node, and confirmed on both backends: `--to`
    // is a slot every answer shows reached.
    node.wait_finalized(last + 20).await;
    let text = format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 20\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, rpc.url
    );
    let env = Env::with_chain_file(&text);
    env.add_account("alice", &alice.to_string(), SOLANA);
    let (from, to) = (node.first_slot.to_string(), last.to_string());
    let mut retried = false;
    for _ in 0..10 {
        let out = env.output(&["backfill", "--chain", SOLANA.as_str(), "--from", &from, "--to", &to]);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "backfill failed: {stderr}");
        assert!(stdout.contains("10 deposits found"), "{stdout}");
        if stderr.contains("backfill: an answer came from a node behind the chain; asking again") {
            retried = true;
            break;
        }
    }
    assert!(retried, "no backfill met the backend behind");
    assert_exact(&rows(&env.store().await, SOLANA).await, &expected, "block-range backfill");
}
