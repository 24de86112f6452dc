//! Provider quorum on the local Solana network: beside an honest URL, a
//! provider that answers another blockhash for the deposit's slot keeps it
//! `PENDING` with a dispute listed (which URL answered what), never
//! `CONFIRMED`; while it answers nothing, nothing new is confirmed and
//! `health` names it; once it tells the truth, every real deposit is
//! `CONFIRMED` and the dispute says so.

use crate::common;

use std::path::Path;

use common::{
    Backend, TestDb,
    solana::{SOL, SolanaNode, transfer_sol},
    solana_forging::{self, FORGED_BLOCKHASH},
};
use custody_indexer::{
    chain::Chain,
    config::ChainConfig,
    deposits::{quorum::Outcome, resource::DepositStatus},
    solana::SolanaWatcher,
    store::Store,
};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_signer::Signer;

use super::solana_watcher::{add_wallet, catch_up};

const CHAIN: Chain = Chain::SolanaDevnet;

fn chain_config(node: &SolanaNode, urls: &[&str]) -> ChainConfig {
    let urls: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    let text = format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [{}]\nconfirmation = \"finalized\"\n\
         confirm_quorum = 2\npoll_interval_ms = 100\nmax_block_range = 200\nstart_block = {}\n\
         strategy = \"blocks\"\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash,
        urls.join(", "),
        node.first_slot,
    );
    ChainConfig::from_toml(&text, Path::new("solana-quorum.toml"), &|_| None).unwrap()
}

async fn states(store: &Store) -> Vec<(String, DepositStatus)> {
    let mut states: Vec<_> =
        store.deposits_on_chain(CHAIN).await.unwrap().into_iter().map(|d| (d.amount, d.status)).collect();
    states.sort_by(|a, b| a.0.cmp(&b.0));
    states
}

/// Steps until the watcher read past the slot of `signature` and that slot
/// is finalized, then once more so the quorum step has asked about it.
async fn settled_past(watcher: &mut SolanaWatcher, node: &SolanaNode, signature: &str) {
    node.wait_finalized(node.slot_of(signature).await).await;
    catch_up(watcher, node).await;
    watcher.tick().await.expect("a step");
}

async fn waits(store: &Store) -> Vec<String> {
    let conditions = store.conditions().await.unwrap();
    conditions.into_iter().filter(|c| c.kind == "quorum_waiting").map(|c| c.message).collect()
}

#[tokio::test]
async fn a_provider_answering_another_blockhash_confirms_nothing_and_is_listed() {
    use DepositStatus::{Confirmed, Pending};
    let node = SolanaNode::start().await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new();
    let liar = solana_forging::start(node.url.clone()).await;
    let db = TestDb::new(Backend::Sqlite).await;
    let store = &db.store;
    add_wallet(store, "alice", &alice.pubkey()).await;
    // The honest URL first: the scan reads from it, and records the real blockhash.
    let config = chain_config(&node, &[&node.url, &liar.url]);
    let mut watcher = SolanaWatcher::connect(config, store.clone()).await.expect("watcher connects");

    // The liar answers another blockhash for every block: the deposit waits, disputed.
    liar.lie(true);
    let first = node.send(&[transfer_sol(&outsider.pubkey(), &alice.pubkey(), SOL)], &outsider, &[]).await;
    settled_past(&mut watcher, &node, &first).await;
    watcher.tick().await.unwrap();
    assert_eq!(
        states(store).await,
        vec![("1".to_string(), Pending)],
        "never confirmed on one provider's word"
    );
    let disputes = store.disputes(Some(CHAIN), true, 10).await.unwrap();
    assert_eq!(disputes.len(), 1, "{disputes:?}");
    let dispute = &disputes[0];
    assert_eq!((dispute.transaction_hash.as_str(), dispute.outcome), (first.as_str(), Outcome::Open));
    assert_eq!(dispute.address, alice.pubkey().to_string());
    assert_eq!(dispute.block_number, node.slot_of(&first).await);
    let answered: Vec<(&str, &str)> =
        dispute.answers.iter().map(|a| (a.url.as_str(), a.answered.as_str())).collect();
    let forged = format!("another block at that height ({FORGED_BLOCKHASH})");
    assert_eq!(
        answered,
        vec![(node.url.as_str(), "the block with the deposit"), (liar.url.as_str(), forged.as_str())],
        "which URL answered what"
    );
    assert!(waits(store).await.is_empty(), "a URL that answers is not missing");

    // The liar says nothing: a new deposit waits too, and health names it.
    liar.silence(true);
    let second =
        node.send(&[transfer_sol(&outsider.pubkey(), &alice.pubkey(), 2 * SOL)], &outsider, &[]).await;
    settled_past(&mut watcher, &node, &second).await;
    let pending = vec![("1".to_string(), Pending), ("2".to_string(), Pending)];
    assert_eq!(states(store).await, pending, "never confirmed on fewer than two providers");
    let said = waits(store).await;
    assert_eq!(said.len(), 1, "health says which URL is missing: {said:?}");
    assert!(said[0].contains(&liar.url) && !said[0].contains(&node.url), "{said:?}");
    assert_eq!(store.disputes(Some(CHAIN), false, 10).await.unwrap().len(), 1, "silence is no dispute");

    // It tells the truth again: both deposits are confirmed, the dispute closes.
    liar.silence(false);
    liar.lie(false);
    watcher.tick().await.unwrap();
    let confirmed = vec![("1".to_string(), Confirmed), ("2".to_string(), Confirmed)];
    assert_eq!(states(store).await, confirmed);
    assert!(waits(store).await.is_empty(), "nothing waits any more");
    let disputes = store.disputes(Some(CHAIN), false, 10).await.unwrap();
    assert_eq!(disputes.len(), 1, "{disputes:?}");
    assert_eq!(disputes[0].outcome, Outcome::Confirmed);
    let finalized = node.slot(CommitmentConfig::finalized()).await;
    assert!(disputes[0].block_number <= finalized);
}
