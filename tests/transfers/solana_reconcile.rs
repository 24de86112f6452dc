//! `reconcile` on a real local Solana network: alice's lamports and TUSD
//! read at a finalized slot agree with the ledger after a deposit and two
//! sponsored transfers from her (the sponsor paid every fee); then her key
//! signs a transfer outside the platform: an unexplained debit, the slot it
//! happened in and its transaction named, never hidden, and `--repair` is
//! refused on Solana.

use crate::common;

use std::time::Duration;

use common::solana::SOL;
use custody_indexer::keys::{KeyRef, MnemonicSigner, Signer};
use serde_json::Value;
use solana_keypair::Keypair;
use solana_signer::Signer as _;

use super::solana_transfers::{CHAIN, MNEMONIC, Setup, airdrop};

/// `reconcile --account alice --json`: its exit code and lines, once
/// alice's watch caught up (her lines are skipped until then).
async fn reconciled(s: &Setup) -> (i32, Vec<Value>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.env.output(&["reconcile", "--chain", CHAIN.as_str(), "--account", "alice", "--json"]);
        let text = String::from_utf8(out.stdout).unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if lines.len() == 2 {
            return (out.status.code().unwrap(), lines);
        }
        assert!(std::time::Instant::now() < deadline, "alice never reconciled: {text}{err}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn of<'a>(lines: &'a [Value], asset: &str) -> &'a Value {
    lines.iter().find(|l| l["asset"] == asset).unwrap()
}

#[tokio::test]
async fn sol_and_tokens_reconcile_at_a_finalized_slot_and_a_debit_outside_is_named() {
    let s = Setup::new("", false).await;
    let (code, first) = reconciled(&s).await;
    assert_eq!(code, 0, "{first:?}");
    let sol = of(&first, "SOL");
    assert_eq!((&sol["baseline"], &sol["onchain"]), (&"first_reconciliation".into(), &"1".into()), "{sol}");
    assert_eq!(of(&first, "TUSD")["onchain"], "100");

    // A deposit, and two transfers the sponsor pays for.
    airdrop(&s.node, &s.alice, 2 * SOL).await;
    let outside = Keypair::new().pubkey();
    for (amount, symbol) in [("5", "TUSD"), ("0.25", "SOL")] {
        let answer = s.post("alice", amount, symbol, outside.to_string()).await;
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        s.until(answer.body["id"].as_str().unwrap(), "CONFIRMED").await;
    }
    let (code, after) = reconciled(&s).await;
    assert_eq!(code, 0, "the deposit and the transfers explain it: {after:?}");
    let (sol, tusd) = (of(&after, "SOL"), of(&after, "TUSD"));
    assert_eq!((&sol["onchain"], &sol["ledger"]), (&"2.75".into(), &"2.75".into()), "{sol}");
    assert_eq!((&tusd["onchain"], &tusd["ledger"]), (&"95".into(), &"95".into()), "{tusd}");
    assert!(sol["at_block"].as_u64().unwrap() > first[0]["at_block"].as_u64().unwrap());

    // alice's own key signs a transfer the platform never made: she pays
    // 0.1 SOL and the fee.
    let signer = MnemonicSigner::from_phrase(MNEMONIC).unwrap();
    let index = (0..20)
        .find(|i| signer.solana_address(KeyRef::Account(*i)).unwrap() == s.alice.to_string())
        .expect("alice's key");
    let transfer = solana_system_interface::instruction::transfer(&s.alice, &outside, SOL / 10);
    let blockhash = s.node.rpc.get_latest_blockhash().await.unwrap();
    let message = solana_message::Message::new_with_blockhash(&[transfer], Some(&s.alice), &blockhash);
    let mut tx = solana_transaction::Transaction::new_unsigned(message);
    let signature = signer.sign_solana(KeyRef::Account(index), tx.message_data()).await.unwrap();
    tx.signatures[0] = signature.into();
    let stolen = s.node.rpc.send_and_confirm_transaction(&tx).await.unwrap().to_string();
    let slot = s.node.slot_of(&stolen).await;
    s.node.wait_finalized(slot).await;
    let encoding = solana_transaction_status_client_types::UiTransactionEncoding::Json;
    let fee = s
        .node
        .rpc
        .get_transaction(&stolen.parse().unwrap(), encoding)
        .await
        .unwrap()
        .transaction
        .meta
        .unwrap()
        .fee;
    let lost = custody_indexer::amount::Amount::from_raw(alloy::primitives::U256::from(SOL / 10 + fee), 9)
        .to_string();
    for _ in 0..2 {
        let (code, lines) = reconciled(&s).await;
        assert_eq!(code, 1, "{lines:?}");
        let sol = of(&lines, "SOL");
        assert_eq!(sol["difference"], format!("-{lost}"), "0.1 SOL and the fee: {sol}");
        assert_eq!(sol["divergent_block"], slot, "{sol}");
        let moved = &sol["movements"][0];
        assert_eq!((&moved["direction"], &moved["amount"]), (&"out".into(), &lost.clone().into()), "{sol}");
        assert_eq!(
            (&moved["transaction_hash"], &moved["how"]),
            (&stolen.clone().into(), &"balance_change".into())
        );
        assert_eq!(of(&lines, "TUSD")["difference"], "0");
    }
    let out = s.env.output(&["reconcile", "--chain", CHAIN.as_str(), "--repair"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repair is for EVM chains"));
}
