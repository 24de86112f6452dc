//! The binary on Solana: a killed `run` restarts with the exact deposit set,
//! and both backfills (slots, an address's signatures) are idempotent.

use crate::common;

use std::{collections::BTreeSet, time::Duration};

use common::{
    cli::{Env, terminate},
    eventually,
    solana::{SOL, SolanaNode, transfer_sol},
};
use custody_indexer::{chain::Chain, deposits::resource::DepositStatus};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;

const CHAIN: Chain = Chain::SolanaDevnet;

fn chain_file(node: &SolanaNode, extra: &str) -> String {
    chain_file_via(node, &node.url, extra)
}

fn chain_file_via(node: &SolanaNode, url: &str, extra: &str) -> String {
    format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nstart_block = {}\n{extra}\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, url, node.first_slot
    )
}

/// `count` SOL transfers to `to`, sent without waiting between them; returns
/// their signatures and the highest slot holding one, once all are confirmed.
async fn send_many(node: &SolanaNode, to: &Pubkey, count: u64) -> (BTreeSet<String>, u64) {
    let payer = node.funded(100 * SOL).await;
    let mut blockhash = node.rpc.get_latest_blockhash().await.unwrap();
    let mut signatures = Vec::new();
    for i in 0..count {
        // Blockhashes expire after 150 slots: take a fresh one now and then.
        if i % 25 == 0 {
            blockhash = node.rpc.get_latest_blockhash().await.unwrap();
        }
        let ix = transfer_sol(&payer.pubkey(), to, SOL / 100 + i);
        let tx = Transaction::new_signed_with_payer(&[ix], Some(&payer.pubkey()), &[&payer], blockhash);
        signatures.push(node.rpc.send_transaction(&tx).await.unwrap());
    }
    let mut last = 0;
    for chunk in signatures.chunks(100) {
        let slot = eventually(Duration::from_secs(60), "transfers to confirm", || async {
            let statuses = node.rpc.get_signature_statuses(chunk).await.unwrap().value;
            let confirmed = statuses
                .iter()
                .map(|s| {
                    s.as_ref()
                        .filter(|s| s.satisfies_commitment(CommitmentConfig::confirmed()))
                        .map(|s| s.slot)
                })
                .collect::<Option<Vec<u64>>>()?;
            confirmed.into_iter().max()
        })
        .await;
        last = last.max(slot);
    }
    (signatures.iter().map(|s| s.to_string()).collect(), last)
}

#[tokio::test]
async fn a_killed_run_restarts_without_missing_or_duplicating_a_deposit() {
    let node = SolanaNode::start().await;
    let alice = Keypair::new().pubkey();
    let (sent, last) = send_many(&node, &alice, 150).await;
    let env = Env::with_chain_file(&chain_file(&node, "max_block_range = 1\nstrategy = \"blocks\""));
    env.add_account("alice", &alice.to_string(), CHAIN);
    let store = env.store().await;

    let mut run = env.spawn_run(CHAIN);
    eventually(Duration::from_secs(60), "the first deposits", || async {
        (store.deposits_on_chain(CHAIN).await.unwrap().len() >= 5).then_some(())
    })
    .await;
    run.kill().unwrap();
    run.wait().unwrap();
    let after_kill = store.deposits_on_chain(CHAIN).await.unwrap().len();
    assert!(after_kill < sent.len(), "the kill must land mid-scan (found {after_kill} of {})", sent.len());

    let mut run = env.spawn_run(CHAIN);
    eventually(Duration::from_secs(120), "the restarted run to catch up", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > last).then_some(())
    })
    .await;
    assert!(terminate(&mut run).success(), "SIGTERM stops run cleanly");
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    let found: BTreeSet<String> = deposits.iter().map(|d| d.transaction_hash.clone()).collect();
    assert_eq!(deposits.len(), sent.len(), "no duplicates");
    assert_eq!(found, sent, "nothing missed");
}

#[tokio::test]
async fn backfills_by_slots_and_by_address_are_idempotent() {
    let node = SolanaNode::start().await;
    let alice = Keypair::new().pubkey();
    let (sent, last) = send_many(&node, &alice, 30).await;
    node.wait_finalized(last).await;
    let env = Env::with_chain_file(&chain_file(&node, "max_block_range = 50"));
    env.add_account("alice", &alice.to_string(), CHAIN);

    // Beside a running indexer, which records the same deposits.
    let first = node.first_slot.to_string();
    let mut run = env.spawn_run(CHAIN);
    let slots = env.ok(&["backfill", "--chain", CHAIN.as_str(), "--from", &first]);
    assert!(slots.contains("30 deposits found"), "{slots}");
    let store = env.store().await;
    eventually(Duration::from_secs(60), "run to catch up", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > last).then_some(())
    })
    .await;
    assert!(terminate(&mut run).success());
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    assert!(deposits.iter().all(|d| d.status == DepositStatus::Confirmed));
    let found: BTreeSet<String> = deposits.iter().map(|d| d.transaction_hash.clone()).collect();
    assert_eq!(found, sent);

    let again = env.ok(&["backfill", "--chain", CHAIN.as_str(), "--from", &first, "--to", &last.to_string()]);
    assert!(again.contains("30 deposits found, 0 new or updated"), "{again}");
    let history = env.ok(&["backfill", "--chain", CHAIN.as_str(), "--address", &alice.to_string()]);
    assert!(history.contains("30 deposits found, 0 new or updated"), "{history}");
    assert_eq!(store.deposits_on_chain(CHAIN).await.unwrap(), deposits);

    let future = (last + 100_000).to_string();
    let above = env.output(&["backfill", "--chain", CHAIN.as_str(), "--from", &first, "--to", &future]);
    assert!(!above.status.success());
    assert!(String::from_utf8_lossy(&above.stderr).contains("above the confirmed height"));
    let both = env.output(&[
        "backfill",
        "--chain",
        CHAIN.as_str(),
        "--from",
        &first,
        "--address",
        &alice.to_string(),
    ]);
    assert!(!both.status.success(), "--from and --address exclude each other");
}

// The proxy answers while the test waits for the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_of_slots_a_pruned_node_no_longer_holds_fails_at_once_naming_its_first_slot() {
    let node = SolanaNode::start().await;
    let alice = Keypair::new().pubkey();
    let (_, last) = send_many(&node, &alice, 3).await;
    // A non-archive node whose ledger now starts after the deposits.
    let first_available = last + 1;
    let proxy = common::proxy::start(node.url.clone()).await;
    proxy.faults.pruned_below.store(first_available, std::sync::atomic::Ordering::SeqCst);
    node.wait_finalized(first_available + 5).await;
    let env = Env::with_chain_file(&chain_file_via(&node, &proxy.url, ""));
    env.add_account("alice", &alice.to_string(), CHAIN);

    let (from, to) = (node.first_slot.to_string(), (first_available + 5).to_string());
    let out = env.output(&["backfill", "--chain", CHAIN.as_str(), "--from", &from, "--to", &to]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let named = format!("slot {from} is below slot {first_available}, the first the RPC node still holds");
    assert!(stderr.contains(&named), "{stderr}");
    assert!(!stderr.contains("asking again"), "refused at once: {stderr}");
    assert!(env.store().await.deposits_on_chain(CHAIN).await.unwrap().is_empty());
}
