//! A Solana transfer's settlement on a quorum of providers
//! (`confirm_quorum = 2`) on the local network: while the second URL
//! answers another blockhash for the transaction's slot, a transfer that
//! landed and is finalized stays `SUBMITTED` past its window, never
//! expired nor signed again; once the URL tells the truth, it is
//! `CONFIRMED` with its one transaction, and the money moved once.

use crate::common;

use std::time::Duration;

use common::{
    solana::{SOL, SolanaNode},
    solana_forging,
};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_signer::Signer;

use super::solana_transfers::{Setup, mnemonic};

#[tokio::test]
async fn a_solana_transfer_waits_for_providers_that_agree_on_its_block() {
    let node = SolanaNode::start().await;
    let liar = solana_forging::start(node.url.clone()).await;
    let quorum = "confirm_quorum = 2";
    let s =
        Setup::on(node, "window_secs = 3", false, mnemonic(), std::slice::from_ref(&liar.url), quorum).await;
    liar.lie(true);
    let outside = Keypair::new().pubkey();
    let answer = s.post("alice", "0.1", "SOL", outside.to_string()).await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    let id = answer.body["id"].as_str().unwrap().to_string();
    s.until(&id, "SUBMITTED").await;

    // It lands and is finalized, and its window passes.
    let store = s.env.store().await;
    let signature = common::eventually(Duration::from_secs(60), "a finalized transaction", || async {
        let sent = store.transfer_transactions(&id).await.unwrap();
        let signature = sent.first()?.hash.parse().ok()?;
        let statuses = s.node.rpc.get_signature_statuses(&[signature]).await.ok()?.value;
        let finalized = statuses[0].as_ref()?.satisfies_commitment(CommitmentConfig::finalized());
        finalized.then_some(signature)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let waiting = s.get(&format!("/v2/crypto/transfers/{id}")).await;
    assert_eq!(waiting["status"], "SUBMITTED", "one provider's word settles nothing: {waiting}");
    let sent = store.transfer_transactions(&id).await.unwrap();
    assert_eq!(sent.len(), 1, "never expired nor signed again: {sent:?}");
    let moved = s.node.rpc.get_balance_with_commitment(&outside, CommitmentConfig::finalized()).await;
    assert_eq!(moved.unwrap().value, SOL / 10, "it landed");

    liar.lie(false);
    let done = s.until(&id, "CONFIRMED").await;
    assert_eq!(done["transaction_hash"].as_str(), Some(signature.to_string().as_str()), "{done}");
    assert_eq!(store.transfer_transactions(&id).await.unwrap().len(), 1);
    let moved = s.node.rpc.get_balance_with_commitment(&outside, CommitmentConfig::finalized()).await;
    assert_eq!(moved.unwrap().value, SOL / 10, "moved once");
}
