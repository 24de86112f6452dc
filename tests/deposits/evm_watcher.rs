//! The EVM watcher against a real anvil: what counts as a deposit, the
//! confirmation policy, reorgs, traces, RPC failover and backfill.

use crate::common;

use std::{sync::atomic::Ordering::SeqCst, time::Duration};

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
};
use common::{
    Anvil, Backend, CHAIN, TestDb, add_account, anvil::Mined, catch_up, chain_config, db::BACKENDS,
    eventually,
};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::identity::change::Change;
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountStatus, AccountType},
    deposits::resource::{Deposit, DepositStatus, SourceType},
    evm::{EvmWatcher, Tick, WatchError},
    identity::Event,
    store::{NewAccount, Store},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const ETH: u64 = 1_000_000_000_000_000_000;

pub(crate) async fn watcher(anvil: &Anvil, store: &Store, token: Option<Address>, extra: &str) -> EvmWatcher {
    watcher_at(&anvil.url(), store, token, extra).await
}

/// A watcher of the test chain reading the node at `url` (a proxy, say).
async fn watcher_at(url: &str, store: &Store, token: Option<Address>, extra: &str) -> EvmWatcher {
    let token = token.map(|t| t.to_checksum(None));
    let config = chain_config(&[url.to_string()], token.as_deref(), extra);
    EvmWatcher::connect(config, store.clone()).await.expect("watcher connects")
}

/// The amounts of the chain's deposits, in order.
async fn sorted_amounts(store: &Store) -> Vec<String> {
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    let mut amounts: Vec<String> = deposits.iter().map(|d| d.amount.to_string()).collect();
    amounts.sort();
    amounts
}

/// A fresh anvil and store with `alice` (dev account 1) watched; dev
/// account 0 is the outsider that funds everything.
pub(crate) struct Setup {
    pub(crate) anvil: Anvil,
    pub(crate) db: TestDb,
    pub(crate) outsider: Address,
    pub(crate) alice: Address,
}

pub(crate) async fn setup(backend: Backend) -> Setup {
    let anvil = Anvil::start().await;
    let db = TestDb::new(backend).await;
    let (outsider, alice) = (anvil.accounts[0], anvil.accounts[1]);
    add_account(&db.store, "alice", &alice.to_string()).await;
    Setup { anvil, db, outsider, alice }
}

fn summary(deposits: &[Deposit]) -> Vec<(String, String, String, SourceType, Option<String>)> {
    let mut out: Vec<_> = deposits
        .iter()
        .map(|d| {
            (
                d.account_id.clone(),
                d.currency_symbol.clone(),
                d.amount.clone(),
                d.source_type,
                d.source_account_id.clone(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn deposits_are_detected_pending_then_confirmed_on_both_stores() {
    for backend in BACKENDS {
        detects_exactly_the_deposits(backend, "transactions").await;
    }
}

#[tokio::test]
async fn blocks_read_by_their_receipts_yield_the_same_deposits() {
    detects_exactly_the_deposits(Backend::Sqlite, "receipts").await;
}

async fn detects_exactly_the_deposits(backend: Backend, reads: &str) {
    let anvil = Anvil::start().await;
    let db = TestDb::new(backend).await;
    let [outsider, alice, bob, carol] =
        [anvil.accounts[0], anvil.accounts[1], anvil.accounts[2], anvil.accounts[3]];
    add_account(&db.store, "alice", &alice.to_string()).await;
    add_account(&db.store, "bob", &bob.to_string()).await;

    let token_address = anvil.deploy_token("TUSD").await;
    let spam_address = anvil.deploy_token("SPAM").await;
    let (token, spam) = (anvil.token(token_address), anvil.token(spam_address));
    token.mint(outsider, U256::from(100_000_000u64)).from(outsider).mined().await;
    spam.mint(outsider, U256::from(100_000_000u64)).from(outsider).mined().await;
    let reads = format!("block_reads = {reads:?}");
    let mut watcher = watcher(&anvil, &db.store, Some(token_address), &reads).await;

    // Native, from outside: ON_CHAIN.
    anvil.send_eth(outsider, alice, U256::from(ETH + 1)).await;
    // Token, from outside; then several Transfer logs in one transaction.
    token.transfer(alice, U256::from(2_500_000u64)).from(outsider).mined().await;
    token
        .batchTransfer(
            vec![alice, bob, carol],
            vec![U256::from(1u64), U256::from(3_000_000u64), U256::from(7u64)],
        )
        .from(outsider)
        .mined()
        .await;
    // Nothing: an unlisted token, a zero-value transfer, a reverted transfer,
    // a zero-value native transaction, and outgoing transfers to outsiders.
    spam.transfer(alice, U256::from(5u64)).from(outsider).mined().await;
    token.transfer(alice, U256::ZERO).from(outsider).mined().await;
    let reverted =
        token.transferThenRevert(alice, U256::from(9u64)).from(outsider).gas(200_000).mined().await;
    assert!(!reverted.status());
    anvil.send_eth(outsider, alice, U256::ZERO).await;
    anvil.send_eth(alice, carol, U256::from(ETH)).await;
    token.transfer(carol, U256::from(1u64)).from(alice).mined().await;
    // Account to account: ACCOUNT with the sender's account id.
    anvil.send_eth(alice, bob, U256::from(42u64)).await;
    token.transfer(bob, U256::from(1_000_000u64)).from(alice).mined().await;

    catch_up(&mut watcher).await;
    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    let on_chain = SourceType::OnChain;
    let from_alice = (SourceType::Account, Some("alice".to_string()));
    let expected = vec![
        ("alice".into(), "ETH".into(), "1.000000000000000001".into(), on_chain, None),
        ("alice".into(), "TUSD".into(), "0.000001".into(), on_chain, None),
        ("alice".into(), "TUSD".into(), "2.5".into(), on_chain, None),
        ("bob".into(), "ETH".into(), "0.000000000000000042".into(), from_alice.0, from_alice.1.clone()),
        ("bob".into(), "TUSD".into(), "1".into(), from_alice.0, from_alice.1.clone()),
        ("bob".into(), "TUSD".into(), "3".into(), on_chain, None),
    ];
    assert_eq!(summary(&deposits), expected, "{backend:?}, {reads}");
    let head = anvil.head().await;
    // Depth 3: only deposits with 3 blocks on top are CONFIRMED already.
    for d in &deposits {
        let block = anvil
            .provider
            .get_transaction_receipt(d.transaction_hash.parse().unwrap())
            .await
            .unwrap()
            .unwrap()
            .block_number
            .unwrap();
        let expected = if block + 3 <= head { DepositStatus::Confirmed } else { DepositStatus::Pending };
        assert_eq!(d.status, expected, "deposit in block {block} at head {head}");
        assert_eq!(d.destination_chain, CHAIN);
        assert_eq!(d.dedup_key.len(), 36);
    }
    assert!(deposits.iter().any(|d| d.status == DepositStatus::Pending));

    anvil.mine(3).await;
    catch_up(&mut watcher).await;
    let confirmed = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert!(
        confirmed.iter().all(
            |d| d.status == DepositStatus::Confirmed && d.confirmed_at.is_some_and(|t| t.timestamp() > 0)
        )
    );
    let ids = |ds: &[Deposit]| ds.iter().map(|d| d.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&confirmed), ids(&deposits), "confirmation keeps ids");

    // Backfilling the range the live watcher covered adds and changes nothing.
    let report = watcher.backfill(0, None, &|_, _| {}).await.unwrap();
    assert_eq!(report.deposits_found, 6);
    assert_eq!(report.deposits_changed, 0);
    assert_eq!(db.store.deposits_on_chain(CHAIN).await.unwrap(), confirmed);
}

#[tokio::test]
async fn a_reorg_fails_dropped_deposits_and_keeps_reincluded_ones() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    let mut watcher = watcher(&anvil, &db.store, None, "dropped_after_blocks = 4").await;

    let kept = anvil.send_eth(outsider, alice, U256::from(7u64)).await;
    let dropped = anvil.send_eth(outsider, alice, U256::from(9u64)).await;
    catch_up(&mut watcher).await;
    let before = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|d| d.status == DepositStatus::Pending));

    // Replace both blocks; only `kept` is included again, in the new block.
    let raw = anvil.raw_transaction(kept).await;
    anvil.reorg(2, vec![(raw, 0)]).await;
    let tick = watcher.tick().await.unwrap();
    assert!(matches!(tick, Tick::Reorged { .. }), "{tick:?}");
    catch_up(&mut watcher).await;

    let after = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(after.len(), 2, "no deposit is duplicated");
    let find = |hash: alloy::primitives::B256| {
        after.iter().find(|d| d.transaction_hash == hash.to_string()).unwrap()
    };
    let (kept_after, dropped_after) = (find(kept), find(dropped));
    assert_eq!(kept_after.id, before.iter().find(|d| d.transaction_hash == kept.to_string()).unwrap().id);
    assert_eq!(kept_after.status, DepositStatus::Pending);
    // The dropped one waits `dropped_after_blocks`: a node behind the reorg
    // may not know the transaction, which may yet reappear.
    assert_eq!(dropped_after.status, DepositStatus::Pending);
    assert_eq!(db.store.reorg_count(CHAIN).await.unwrap(), 1);

    anvil.mine(4).await;
    catch_up(&mut watcher).await;
    let end = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(end.iter().find(|d| d.id == kept_after.id).unwrap().status, DepositStatus::Confirmed);
    assert_eq!(end.iter().find(|d| d.id == dropped_after.id).unwrap().status, DepositStatus::Failed);
}

#[tokio::test]
async fn internal_transfers_are_found_with_traces_only() {
    let anvil = Anvil::start().await;
    let (outsider, alice) = (anvil.accounts[0], anvil.accounts[1]);
    let forwarder = anvil.forwarder(anvil.deploy_forwarder().await);
    forwarder.forward(alice).from(outsider).value(U256::from(11u64)).mined().await;
    let failed =
        forwarder.forwardThenRevert(alice).from(outsider).value(U256::from(13u64)).gas(200_000).mined().await;
    assert!(!failed.status());
    // A native transfer to a contract that refuses it reverts: nothing.
    let refused = TransactionRequest::default()
        .with_from(outsider)
        .with_to(*forwarder.address())
        .with_value(U256::from(17u64))
        .with_gas_limit(100_000);
    let receipt = anvil.provider.send_transaction(refused).await.unwrap().get_receipt().await.unwrap();
    assert!(!receipt.status());

    // The forwarder is itself a watched account: the value sent to it is a
    // plain deposit; what it passes on to alice only a trace shows.
    let to_vault = ("vault".to_string(), "0.000000000000000011".to_string(), SourceType::OnChain);
    let to_alice = ("alice".to_string(), "0.000000000000000011".to_string(), SourceType::Account);
    let cases = [
        (false, "transactions", vec![to_vault.clone()]),
        (true, "transactions", vec![to_alice.clone(), to_vault.clone()]),
        (true, "receipts", vec![to_alice, to_vault]),
    ];
    for (traces, reads, expected) in cases {
        let db = TestDb::new(Backend::Sqlite).await;
        add_account(&db.store, "alice", &alice.to_string()).await;
        add_account(&db.store, "vault", &forwarder.address().to_string()).await;
        let extra = format!("traces = {traces}\nblock_reads = {reads:?}");
        let mut watcher = watcher(&anvil, &db.store, None, &extra).await;
        catch_up(&mut watcher).await;
        let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
        let mut found: Vec<_> =
            deposits.iter().map(|d| (d.account_id.clone(), d.amount.clone(), d.source_type)).collect();
        found.sort();
        assert_eq!(found, expected, "traces = {traces}, {reads}");
        if traces {
            let internal = deposits.iter().find(|d| d.account_id == "alice").unwrap();
            assert_eq!(internal.source_address, forwarder.address().to_checksum(None));
            assert_eq!(internal.source_account_id.as_deref(), Some("vault"));
        }
    }
}

#[tokio::test]
async fn a_dead_first_rpc_url_fails_over_to_the_second() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    anvil.send_eth(outsider, alice, U256::from(5u64)).await;
    let dead = format!("http://127.0.0.1:{}/v2/SECRET", common::dead_port());
    let config = chain_config(&[dead, anvil.url()], None, "");
    let mut watcher = EvmWatcher::connect(config, db.store.clone()).await.unwrap();
    catch_up(&mut watcher).await;
    assert_eq!(db.store.deposits_on_chain(CHAIN).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_chain_id_mismatch_refuses_to_index() {
    let anvil = Anvil::start_with(&["--chain-id", "1"]).await;
    let db = TestDb::new(Backend::Sqlite).await;
    let config = chain_config(&[anvil.url()], None, "");
    let error = EvmWatcher::connect(config, db.store.clone()).await.err().expect("refused");
    assert!(matches!(error, WatchError::WrongChain { expected: 31337, actual: 1, .. }), "{error}");
    assert!(!error.is_retryable());
    assert!(db.store.chain_state(CHAIN).await.unwrap().is_none());
}

#[tokio::test]
async fn an_account_added_while_running_is_watched_without_restart() {
    let anvil = Anvil::start().await;
    let db = TestDb::new(Backend::Postgres).await;
    let (outsider, alice, bob) = (anvil.accounts[0], anvil.accounts[1], anvil.accounts[2]);
    add_account(&db.store, "alice", &alice.to_string()).await;
    let watcher = watcher(&anvil, &db.store, None, "").await;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));

    anvil.send_eth(outsider, alice, U256::from(1u64)).await;
    let store = db.store.clone();
    eventually(Duration::from_secs(20), "alice's deposit", || {
        let store = store.clone();
        async move { (store.deposits_on_chain(CHAIN).await.unwrap().len() == 1).then_some(()) }
    })
    .await;
    add_account(&db.store, "bob", &bob.to_string()).await;
    anvil.send_eth(outsider, bob, U256::from(2u64)).await;
    eventually(Duration::from_secs(20), "bob's deposit", || {
        let store = store.clone();
        async move { (store.deposits_of_account("bob").await.unwrap().len() == 1).then_some(()) }
    })
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn new_heads_over_websocket_wake_the_watcher_before_the_poll_interval() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    // Polling every 10 minutes: only a newHeads notification can wake the watcher.
    let extra = format!("ws_url = \"{}\"\npoll_interval_ms = 600000", anvil.ws_url());
    let text = common::chain_toml(&[anvil.url()], None, "").replace("poll_interval_ms = 100\n", "") + &extra;
    let config =
        custody_indexer::config::ChainConfig::from_toml(&text, std::path::Path::new("ws.toml"), &|_| None)
            .unwrap();
    let watcher = EvmWatcher::connect(config, db.store.clone()).await.unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));
    // The first step, at start, has scanned to the head: what comes next
    // only a newHeads notification can find within the test.
    let head = anvil.head().await;
    let first = db.store.clone();
    eventually(Duration::from_secs(60), "the watcher's first step", || {
        let store = first.clone();
        async move { (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(()) }
    })
    .await;
    anvil.send_eth(outsider, alice, U256::from(3u64)).await;
    // Whenever the subscription is up, the next block's newHeads wakes the
    // watcher, which then scans through the deposit's block too.
    let (store, anvil) = (db.store.clone(), &anvil);
    eventually(Duration::from_secs(60), "a deposit found through newHeads", || {
        let store = store.clone();
        async move {
            anvil.mine(1).await;
            (store.deposits_on_chain(CHAIN).await.unwrap().len() == 1).then_some(())
        }
    })
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// Twelve transfers of a new token to `alice`, one a block, and a watcher
/// of them (`max_block_range = 50`) through a proxy that injects faults.
pub(crate) async fn token_transfers_through_a_proxy(setup: &Setup) -> (common::proxy::FaultyRpc, EvmWatcher) {
    let Setup { anvil, db, outsider, alice } = setup;
    let token = anvil.token(anvil.deploy_token("TUSD").await);
    token.mint(*outsider, U256::from(1_000u64)).from(*outsider).mined().await;
    for i in 1..=12u64 {
        token.transfer(*alice, U256::from(i)).from(*outsider).mined().await;
    }
    let rpc = common::proxy::start(anvil.url()).await;
    let watcher = watcher_at(&rpc.url, &db.store, Some(*token.address()), "max_block_range = 50").await;
    (rpc, watcher)
}

#[tokio::test]
async fn refused_log_ranges_are_narrowed_and_transient_errors_retried() {
    let setup = setup(Backend::Sqlite).await;
    let (rpc, mut watcher) = token_transfers_through_a_proxy(&setup).await;
    let Setup { anvil, db, outsider, alice } = setup;
    rpc.faults.max_log_range.store(4, SeqCst);
    // Rate limits and an unavailable node, then answers again.
    rpc.faults.status.store(429, SeqCst);
    rpc.faults.fail_next.store(2, SeqCst);
    catch_up(&mut watcher).await;
    rpc.faults.status.store(503, SeqCst);
    rpc.faults.fail_next.store(2, SeqCst);
    anvil.send_eth(outsider, alice, U256::from(1u64)).await;
    catch_up(&mut watcher).await;

    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(deposits.iter().filter(|d| d.currency_symbol == "TUSD").count(), 12);
    assert_eq!(deposits.iter().filter(|d| d.currency_symbol == "ETH").count(), 1);
    assert!(rpc.faults.refused.load(SeqCst) >= 1, "the range was refused");
    assert_eq!(rpc.faults.failed.load(SeqCst), 4, "every injected failure was met");
    let ranges = rpc.faults.log_ranges.lock().unwrap().clone();
    assert!(ranges.iter().all(|span| *span <= 4), "{ranges:?}");
}

#[tokio::test]
async fn rate_limited_log_reads_are_retried_without_narrowing_the_range() {
    let setup = setup(Backend::Sqlite).await;
    let (rpc, mut watcher) = token_transfers_through_a_proxy(&setup).await;
    // Infura's rate limit: its "exceeded" is also in the range refusals'
    // wording, yet the range must not be halved for it.
    let limited = ("eth_getLogs".to_string(), -32005, "project ID request rate exceeded".to_string(), 2);
    rpc.faults.method_errors.lock().unwrap().push(limited);
    catch_up(&mut watcher).await;
    let deposits = setup.db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(deposits.iter().filter(|d| d.currency_symbol == "TUSD").count(), 12);
    assert_eq!(rpc.faults.method_errors.lock().unwrap()[0].3, 0, "the rate limits were answered");
    let ranges = rpc.faults.log_ranges.lock().unwrap().clone();
    assert_eq!(ranges.len(), 1, "the whole range read by one eth_getLogs once the limit passed: {ranges:?}");
}

#[tokio::test]
async fn a_receipt_from_another_fork_never_decides_a_deposit() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    let rpc = common::proxy::start(anvil.url()).await;
    let mut watcher = watcher_at(&rpc.url, &db.store, None, "").await;
    for i in 1..=2u64 {
        anvil.send_eth(outsider, alice, U256::from(i)).await;
    }
    // A backend on another fork, where both transactions were mined in
    // another block and reverted, answers their receipts first: taken as
    // they are, both deposits would be dropped as reverted.
    rpc.faults.forked_receipts.store(2, SeqCst);
    catch_up(&mut watcher).await;
    assert_eq!(rpc.faults.forked_receipts.load(SeqCst), 0, "the forked receipts were answered");
    assert_eq!(sorted_amounts(&db.store).await, ["0.000000000000000001", "0.000000000000000002"]);
}

#[tokio::test]
async fn a_block_answered_without_its_body_never_hides_a_deposit() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    let rpc = common::proxy::start(anvil.url()).await;
    for (i, reads) in ["transactions", "receipts"].into_iter().enumerate() {
        let mut watcher = watcher_at(&rpc.url, &db.store, None, &format!("block_reads = \"{reads}\"")).await;
        anvil.send_eth(outsider, alice, U256::from(i as u64 + 1)).await;
        // A node that has the deposit's block header but not yet its body
        // answers it with no transactions, twice: taken as it is, the block
        // would be scanned as empty and the deposit never found.
        rpc.faults.bodiless_blocks.store(2, SeqCst);
        rpc.faults.calls.lock().unwrap().clear();
        catch_up(&mut watcher).await;
        assert_eq!(rpc.faults.bodiless_blocks.load(SeqCst), 0, "{reads}: the bodiless blocks were answered");
        // Nor are the receipts asked of a block taken without its body.
        let receipts_asked = asked(&rpc).iter().filter(|m| *m == "eth_getBlockReceipts").count();
        assert_eq!(receipts_asked, i, "{reads}");
    }
    assert_eq!(sorted_amounts(&db.store).await, ["0.000000000000000001", "0.000000000000000002"]);
}

/// The methods the node was asked, in order.
fn asked(rpc: &common::proxy::FaultyRpc) -> Vec<String> {
    rpc.faults.calls.lock().unwrap().iter().map(|(_, method)| method.clone()).collect()
}

#[tokio::test]
async fn blocks_read_by_receipts_survive_lying_answers_and_a_node_refusing_the_method() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    let token = anvil.token(anvil.deploy_token("TUSD").await);
    token.mint(outsider, U256::from(1_000u64)).from(outsider).mined().await;
    let rpc = common::proxy::start(anvil.url()).await;
    let token_address = token.address().to_checksum(None);
    let reads = "block_reads = \"receipts\"";
    let config = chain_config(std::slice::from_ref(&rpc.url), Some(&token_address), reads);
    let mut watcher = EvmWatcher::connect(config, db.store.clone()).await.unwrap();
    for i in 1..=3u64 {
        anvil.send_eth(outsider, alice, U256::from(i)).await;
        token.transfer(alice, U256::from(i)).from(outsider).mined().await;
    }

    // Backends behind: an empty receipt list for a block that holds
    // transactions, an error for a block hash it lacks (EIP-234, in a
    // batch), then transactions they have not seen. Asked again, nothing is
    // lost, and no block is read with its transactions.
    let faults = &rpc.faults;
    let unknown = json!({"error": {"code": -32000, "message": "unknown block"}});
    faults.replaced.lock().unwrap().push(("eth_getBlockReceipts".into(), json!({"result": []}), 1));
    faults.replaced.lock().unwrap().push(("eth_getBlockReceipts".into(), unknown, 1));
    faults.nulled.lock().unwrap().push(("eth_getTransactionByHash".into(), 2));
    catch_up(&mut watcher).await;
    let native = |ds: &[Deposit]| ds.iter().filter(|d| d.currency_symbol == "ETH").count();
    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!((native(&deposits), deposits.len()), (3, 6));
    let left: Vec<u32> = faults.replaced.lock().unwrap().iter().map(|r| r.2).collect();
    assert_eq!(left, [0, 0], "the empty receipt list and the error were answered");
    assert_eq!(faults.nulled.lock().unwrap()[0].1, 0, "the unknown transactions were answered");
    let methods = asked(&rpc);
    assert!(methods.iter().any(|m| m == "eth_getBlockReceipts"), "{methods:?}");
    assert!(!methods.iter().any(|m| m == "eth_getBlockByNumber(full)"), "a block read with its transactions");

    // Nodes that fail the method: each step reads its blocks with their
    // transactions, and nothing is missed. One failing it otherwise (an
    // error no retry cures) is asked again next step; one that does
    // not serve it never again.
    let refusal = "the method eth_getBlockReceipts does not exist/is not available";
    let phases = [
        (json!({"error": {"code": -32000, "message": "receipts length mismatch"}}), true),
        (json!({"error": {"code": -32601, "message": refusal}}), false),
    ];
    for (i, (answer, asked_again)) in (0u64..).zip(phases) {
        *faults.replaced.lock().unwrap() = vec![("eth_getBlockReceipts".into(), answer, u32::MAX)];
        anvil.send_eth(outsider, alice, U256::from(10 + 2 * i)).await;
        catch_up(&mut watcher).await;
        faults.calls.lock().unwrap().clear();
        anvil.send_eth(outsider, alice, U256::from(11 + 2 * i)).await;
        catch_up(&mut watcher).await;
        assert_eq!(native(&db.store.deposits_on_chain(CHAIN).await.unwrap()), 5 + 2 * i as usize);
        let methods = asked(&rpc);
        assert!(methods.iter().any(|m| m == "eth_getBlockByNumber(full)"), "{methods:?}");
        let again = methods.iter().any(|m| m == "eth_getBlockReceipts");
        assert_eq!(again, asked_again, "phase {i}: {methods:?}");
    }
}

#[tokio::test]
async fn only_wrong_receipt_answers_end_reading_blocks_by_their_receipts() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    let rpc = common::proxy::start(anvil.url()).await;
    let mut watcher = watcher_at(&rpc.url, &db.store, None, "block_reads = \"receipts\"").await;
    let faults = &rpc.faults;
    let mut sent = 0u64;
    // For 11 steps in a row, a backend behind that has not seen the
    // deposits' transactions (its receipts being right), then a node that
    // fails `eth_getBlockReceipts`: only the second ends reading blocks by
    // their receipts.
    let mismatch = json!({"error": {"code": -32000, "message": "receipts length mismatch"}});
    let phases = [
        ("eth_getTransactionByHash", json!({"result": null}), true),
        ("eth_getBlockReceipts", mismatch, false),
    ];
    for (i, (method, answer, by_receipts_after)) in phases.into_iter().enumerate() {
        *faults.replaced.lock().unwrap() = vec![(method.into(), answer, u32::MAX)];
        for _ in 0..11 {
            sent += 1;
            anvil.send_eth(outsider, alice, U256::from(sent)).await;
            catch_up(&mut watcher).await;
        }
        faults.replaced.lock().unwrap().clear();
        faults.calls.lock().unwrap().clear();
        sent += 1;
        anvil.send_eth(outsider, alice, U256::from(sent)).await;
        catch_up(&mut watcher).await;
        let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
        assert_eq!(deposits.len() as u64, sent, "phase {i}: every step found its deposit");
        let methods = asked(&rpc);
        let by_receipts = methods.iter().any(|m| m == "eth_getBlockReceipts");
        assert_eq!(by_receipts, by_receipts_after, "phase {i}: {methods:?}");
        assert_eq!(
            methods.iter().any(|m| m == "eth_getBlockByNumber(full)"),
            !by_receipts_after,
            "phase {i}"
        );
    }
}

#[tokio::test]
async fn the_finalized_policy_waits_for_the_finalized_block() {
    // anvil reports head - 64 as finalized.
    let Setup { anvil, db, outsider, alice } = setup(Backend::Postgres).await;
    let mut watcher = watcher(&anvil, &db.store, None, "confirmation = \"finalized\"").await;
    let tx = anvil.send_eth(outsider, alice, U256::from(1u64)).await;
    let block = anvil.provider.get_transaction_receipt(tx).await.unwrap().unwrap().block_number.unwrap();
    anvil.mine(block + 63 - anvil.head().await).await;
    catch_up(&mut watcher).await;
    let status = || async { db.store.deposits_on_chain(CHAIN).await.unwrap()[0].status };
    assert_eq!(status().await, DepositStatus::Pending, "63 blocks on top: not finalized yet");
    anvil.mine(1).await;
    catch_up(&mut watcher).await;
    assert_eq!(status().await, DepositStatus::Confirmed);
}

#[tokio::test]
async fn a_reorg_below_a_confirmed_deposit_leaves_it_confirmed() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Sqlite).await;
    let mut watcher = watcher(&anvil, &db.store, None, "").await;
    anvil.mine(2).await;
    anvil.send_eth(outsider, alice, U256::from(1u64)).await;
    anvil.mine(3).await;
    catch_up(&mut watcher).await;
    let confirmed = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(confirmed[0].status, DepositStatus::Confirmed);

    // Deeper than the policy's 3 blocks: the deposit's block is replaced.
    anvil.reorg(4, vec![]).await;
    catch_up(&mut watcher).await;
    assert_eq!(db.store.deposits_on_chain(CHAIN).await.unwrap(), confirmed, "CONFIRMED is never rewritten");
    assert_eq!(db.store.reorg_count(CHAIN).await.unwrap(), 1);
}

#[tokio::test]
async fn deposits_to_frozen_and_closed_accounts_are_recorded() {
    let anvil = Anvil::start().await;
    let db = TestDb::new(Backend::Sqlite).await;
    let outsider = anvil.accounts[0];
    // Accounts follow their identities: suspended (FROZEN) and terminated (CLOSED).
    let unsent = |_| unreachable!("no transfers");
    for (i, (event, status)) in
        [(Event::Suspended, AccountStatus::Frozen), (Event::Terminated, AccountStatus::Closed)]
            .into_iter()
            .enumerate()
    {
        let address = anvil.accounts[i + 1];
        let identity = format!("identity-{status}");
        common::identity(&db.store, "default", &identity).await;
        accounts::add_account(
            &db.store,
            NewAccount {
                watch_from: Default::default(),
                id: format!("{status}"),
                organization: "default".into(),
                identity_id: identity.clone(),
                kind: AccountType::Omnibus,
                request_id: None,
                addresses: vec![AccountAddress { chains: vec![CHAIN], address: address.to_string() }],
            },
        )
        .await
        .unwrap();
        let change = Change {
            organization: "default",
            identity_id: &identity,
            event,
            actor: "operator:test",
            reason: None,
            decider: None,
        };
        lifecycle::change(&db.store, &change, &unsent).await.unwrap();
        assert_eq!(db.store.account(&format!("{status}")).await.unwrap().status, status);
        anvil.send_eth(outsider, address, U256::from(5u64)).await;
    }
    let mut watcher = watcher(&anvil, &db.store, None, "").await;
    catch_up(&mut watcher).await;
    let accounts: Vec<String> =
        db.store.deposits_on_chain(CHAIN).await.unwrap().into_iter().map(|d| d.account_id).collect();
    assert_eq!(accounts, ["FROZEN", "CLOSED"]);
}

#[tokio::test]
async fn two_instances_on_one_postgres_record_each_deposit_once() {
    let Setup { anvil, db, outsider, alice } = setup(Backend::Postgres).await;
    let mut sent = Vec::new();
    for i in 0..40u64 {
        sent.push(anvil.send_eth(outsider, alice, U256::from(100 + i)).await);
    }
    let shutdown = CancellationToken::new();
    let mut instances = Vec::new();
    for _ in 0..2 {
        let watcher = watcher(&anvil, &db.store, None, "max_block_range = 3").await;
        instances.push(tokio::spawn(watcher.run(shutdown.clone())));
    }
    let head = anvil.head().await;
    let store = db.store.clone();
    eventually(Duration::from_secs(60), "both instances to index the chain", || {
        let store = store.clone();
        async move { (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(()) }
    })
    .await;
    shutdown.cancel();
    for instance in instances {
        instance.await.unwrap().unwrap();
    }
    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    let mut found: Vec<String> = deposits.iter().map(|d| d.transaction_hash.clone()).collect();
    found.sort();
    let mut expected: Vec<String> = sent.iter().map(|h| h.to_string()).collect();
    expected.sort();
    assert_eq!(found, expected);
}
