//! Reconciling many Solana wallets on the local network: each wallet's
//! baseline is recorded as its watch starts, at the slot the balance was
//! read at (a wallet funded just before counts that money once, not again
//! as a deposit), and 105 wallets' lamports are read a hundred to a
//! `getMultipleAccounts`, no `getBalance`; every line agrees with the
//! deposits the watcher confirmed after the baselines.

use crate::common;

use std::{
    path::Path,
    sync::atomic::{AtomicBool, Ordering::SeqCst},
    time::{Duration, Instant},
};

use common::{
    Backend, TestDb, proxy,
    solana::{SOL, SolanaNode, transfer_sol},
};
use custody_indexer::{
    chain::Chain,
    config::ChainConfig,
    deposits::resource::DepositStatus,
    reconcile::{Baseline, baselines, evm::Ask, solana},
    solana::{SolanaWatcher, rpc::SolanaRpc},
};
use solana_keypair::Keypair;
use solana_signer::Signer;

use super::solana_watcher::{add_wallet, catch_up};

const CHAIN: Chain = Chain::SolanaDevnet;
const WALLETS: usize = 105;

fn chain_config(node: &SolanaNode, url: &str) -> ChainConfig {
    let text = format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{url}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 200\nstart_block = {}\n\
         strategy = \"blocks\"\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, node.first_slot,
    );
    ChainConfig::from_toml(&text, Path::new("solana-batched.toml"), &|_| None).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baselines_are_recorded_at_the_watch_start_and_lamports_read_a_hundred_at_once() {
    // 200 ms slots: a watch start stays within the slots a baseline is
    // recorded for while the test funds and waits.
    let node = SolanaNode::start_with_slot_time(200).await;
    let outsider = node.funded(100 * SOL).await;
    let counted = proxy::start(node.url.clone()).await;
    let db = TestDb::new(Backend::Sqlite).await;
    let store = &db.store;
    let wallets: Vec<Keypair> = (0..WALLETS).map(|_| Keypair::new()).collect();
    for (i, wallet) in wallets.iter().enumerate() {
        add_wallet(store, &format!("w{i}"), &wallet.pubkey()).await;
    }
    let config = chain_config(&node, &counted.url);
    let mut watcher = SolanaWatcher::connect(config.clone(), store.clone()).await.expect("watcher connects");
    let rpc = SolanaRpc::new(CHAIN, &config.rpc_urls);
    let first = wallets[0].pubkey();
    // Funded before its baseline is read: the baseline holds it.
    let early = node.send(&[transfer_sol(&outsider.pubkey(), &first, 2 * SOL)], &outsider, &[]).await;
    node.wait_finalized(node.slot_of(&early).await).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        catch_up(&mut watcher, &node).await;
        let watched = store.reconcile_watched(CHAIN).await.unwrap();
        if watched.iter().all(|w| !w.catching_up) {
            break;
        }
        assert!(Instant::now() < deadline, "every watch caught up: {watched:?}");
    }
    let recorded = baselines::record_new_solana(store, &rpc, &config).await.unwrap();
    assert_eq!(recorded, WALLETS, "one baseline a wallet (no mint listed)");
    let (anchor, source) = store.reconcile_baseline(CHAIN, &first.to_string(), "SOL").await.unwrap().unwrap();
    assert_eq!((anchor.balance.to::<u64>(), source), (2 * SOL, Baseline::Recorded));
    assert!(anchor.block >= node.slot_of(&early).await, "read after the funding: {anchor:?}");

    // Deposits after the baselines: the ledger counts them.
    let mut last = String::new();
    for (i, wallet) in wallets[1..5].iter().enumerate() {
        let lamports = (i as u64 + 1) * SOL;
        last =
            node.send(&[transfer_sol(&outsider.pubkey(), &wallet.pubkey(), lamports)], &outsider, &[]).await;
    }
    node.wait_finalized(node.slot_of(&last).await).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        catch_up(&mut watcher, &node).await;
        let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
        if deposits.iter().filter(|d| d.status == DepositStatus::Confirmed).count() == 5 {
            break;
        }
        assert!(Instant::now() < deadline, "five deposits CONFIRMED: {deposits:?}");
    }

    // The watcher goes on beside the reconciliation, which waits for it to
    // index past the slot the balances are at.
    counted.faults.calls.lock().unwrap().clear();
    let done = AtomicBool::new(false);
    let ticking = async {
        while !done.load(SeqCst) {
            let _ = watcher.tick().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let reconciled = async {
        let report = solana::reconcile(store, &rpc, &config, &Ask::default()).await;
        done.store(true, SeqCst);
        report
    };
    let (report, ()) = tokio::join!(reconciled, ticking);
    let report = report.unwrap();
    let methods: Vec<String> = counted.faults.calls.lock().unwrap().iter().map(|(_, m)| m.clone()).collect();
    let count = |method: &str| methods.iter().filter(|m| *m == method).count();
    assert_eq!((count("getMultipleAccounts"), count("getBalance")), (2, 0), "{methods:?}");
    assert!(report.failed.is_empty() && report.skipped.is_empty(), "{report:?}");
    assert_eq!(report.lines.len(), WALLETS);
    for line in &report.lines {
        assert_eq!((line.difference.as_str(), line.baseline), ("0", Baseline::Recorded), "{line:?}");
    }
    let line =
        |wallet: &Keypair| report.lines.iter().find(|l| l.address == wallet.pubkey().to_string()).unwrap();
    assert_eq!(
        (line(&wallets[0]).onchain.as_str(), line(&wallets[0]).ledger.as_str()),
        ("2", "2"),
        "counted once"
    );
    assert_eq!((line(&wallets[4]).onchain.as_str(), line(&wallets[4]).ledger.as_str()), ("4", "4"));
    assert_eq!(line(&wallets[9]).onchain, "0");
}
