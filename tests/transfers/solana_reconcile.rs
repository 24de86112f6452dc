//! `reconcile` on a real local Solana network: alice's lamports and TUSD
//! read at a finalized slot agree with the ledger after a deposit and two
//! sponsored transfers from her (the sponsor paid every fee); then her key
//! signs a transfer outside the platform: an unexplained debit, the slot it
//! happened in and its transaction named, never hidden, and `--repair` is
//! refused on Solana. `run` reconciles in the background meanwhile: no
//! alarm for the platform's own transfers, one for the debit outside it.
//! The sponsor is reconciled beside her: every fee and rent it paid
//! explained, its funding from outside recorded once, and its own key used
//! outside the platform alarmed.

use crate::common;

use std::time::Duration;

use common::{
    eventually,
    solana::{SOL, SolanaNode},
};
use custody_indexer::keys::{KeyRef, MnemonicSigner, Signer};
use serde_json::Value;
use solana_keypair::Keypair;
use solana_signer::Signer as _;

use super::solana_transfers::{CHAIN, MNEMONIC, Setup, airdrop, mnemonic};

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

/// The background passes' alarms in the audit log: each one's target
/// (its reason is sealed, as every audit entry's).
async fn alarms(s: &Setup) -> Vec<(String, String)> {
    let store = s.env.store().await;
    let entries = store.audit_entries(0, None, 1000).await.unwrap();
    let alarms = entries.into_iter().filter(|e| e.action == "reconcile.unexplained_debit");
    alarms.map(|e| (e.target_id, e.actor)).collect()
}

/// Waits for a background pass that ended after `after` (micros), and
/// returns how many lines it compared and how many differ.
async fn pass_after(s: &Setup, after: i64) -> (u64, u64) {
    let store = s.env.store().await;
    eventually(Duration::from_secs(90), "a background pass", || async {
        let runs = store.reconcile_runs(Some(CHAIN)).await.unwrap();
        let run = runs.into_iter().next().filter(|r| r.at_micros > after)?;
        Some((run.lines, run.differ))
    })
    .await
}

fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64
}

#[tokio::test]
async fn sol_and_tokens_reconcile_at_a_finalized_slot_and_a_debit_outside_is_named() {
    let every = "reconcile_every_secs = 2";
    let s = Setup::on(SolanaNode::start().await, "", false, mnemonic(), &[], every).await;
    // `run` records alice's baselines as her watch starts.
    let store = s.env.store().await;
    eventually(Duration::from_secs(90), "alice's baselines recorded by run", || async {
        let alice = s.alice.to_string();
        let sol = store.reconcile_baseline(CHAIN, &alice, "SOL").await.unwrap();
        let tusd = store.reconcile_baseline(CHAIN, &alice, "TUSD").await.unwrap();
        sol.zip(tusd)
    })
    .await;
    let (code, first) = reconciled(&s).await;
    assert_eq!(code, 0, "{first:?}");
    let sol = of(&first, "SOL");
    assert_eq!((&sol["baseline"], &sol["onchain"]), (&"recorded".into(), &"1".into()), "{sol}");
    assert_eq!(of(&first, "TUSD")["baseline"], "recorded");
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
    // `run`'s passes saw the same: nothing differs, nothing was alarmed.
    let (lines, differ) = pass_after(&s, now_micros()).await;
    assert_eq!((lines >= 2, differ), (true, 0), "the background pass agrees");
    assert_eq!(alarms(&s).await, vec![], "the platform's own transfers are no alarm");

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
    // `run` alarmed it once, naming the address, the slot and the transaction.
    let seen = eventually(Duration::from_secs(90), "the background alarm", || async {
        let alarms = alarms(&s).await;
        (!alarms.is_empty()).then_some(alarms)
    })
    .await;
    pass_after(&s, now_micros()).await;
    assert_eq!(alarms(&s).await.len(), 1, "alarmed once: {seen:?}");
    let target = format!("{}:{}:SOL:{slot}", CHAIN.as_str(), s.alice);
    assert_eq!(seen[0], (target, "system".to_string()), "by the service, naming the address and the slot");
    let runs = s.env.store().await.reconcile_runs(Some(CHAIN)).await.unwrap();
    let kept = runs[0].detail.to_string();
    assert!(
        runs[0].differ >= 1 && kept.contains(&stolen) && kept.contains(&lost),
        "the pass names it: {kept}"
    );
    let out = s.env.output(&["reconcile", "--chain", CHAIN.as_str(), "--repair"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repair is for EVM chains"));

    the_sponsor_is_reconciled_as_a_platform_wallet(&s, &signer).await;
}

/// The sponsor's line of `reconcile --chain … --json` once it is settled.
async fn sponsor_line(s: &Setup) -> Value {
    eventually(Duration::from_secs(90), "the sponsor's line", || async {
        let out = s.env.output(&["reconcile", "--chain", CHAIN.as_str(), "--asset", "SOL", "--json"]);
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        lines.into_iter().find(|l| l["wallet"] == "sponsor")
    })
    .await
}

/// The sponsor paid every fee above and the rent of `outside`'s token
/// account: its ledger explains it. Funded from outside, the funding is
/// recorded once with its audit entry and the line agrees; its key used
/// outside the platform is an unexplained debit of the wallet, alarmed.
async fn the_sponsor_is_reconciled_as_a_platform_wallet(s: &Setup, signer: &MnemonicSigner) {
    let line = sponsor_line(s).await;
    assert_eq!(
        (&line["account_id"], &line["address"]),
        (&Value::Null, &s.sponsor.to_string().into()),
        "{line}"
    );
    assert_eq!(line["difference"], "0", "every fee and rent it paid is in its ledger: {line}");

    let funder = s.node.funded(10 * SOL).await;
    let funded = s
        .node
        .send(&[common::solana::transfer_sol(&funder.pubkey(), &s.sponsor, 3 * SOL)], &funder, &[])
        .await;
    s.node.wait_finalized(s.node.slot_of(&funded).await).await;
    let line = eventually(Duration::from_secs(90), "the funding explained", || async {
        let line = sponsor_line(s).await;
        (line["at_block"].as_u64()? >= s.node.slot_of(&funded).await).then_some(line)
    })
    .await;
    assert_eq!(line["difference"], "0", "the funding is recorded and counted: {line}");
    let store = s.env.store().await;
    let entries = store.audit_entries(0, None, 1000).await.unwrap();
    let funding: Vec<_> = entries.iter().filter(|e| e.action == "reconcile.wallet_funded").collect();
    assert_eq!(funding.len(), 1, "once: {:?}", funding.iter().map(|e| &e.target_id).collect::<Vec<_>>());
    assert!(funding[0].target_id.contains(&funded) && funding[0].target_id.contains(":SOL:3000000000:"));

    // The sponsor's own key pays 0.5 SOL out, outside the platform.
    let outside = Keypair::new().pubkey();
    let transfer = solana_system_interface::instruction::transfer(&s.sponsor, &outside, SOL / 2);
    let blockhash = s.node.rpc.get_latest_blockhash().await.unwrap();
    let message = solana_message::Message::new_with_blockhash(&[transfer], Some(&s.sponsor), &blockhash);
    let mut tx = solana_transaction::Transaction::new_unsigned(message);
    tx.signatures[0] = signer.sign_solana(KeyRef::Sponsor, tx.message_data()).await.unwrap().into();
    let stolen = s.node.rpc.send_and_confirm_transaction(&tx).await.unwrap().to_string();
    let slot = s.node.slot_of(&stolen).await;
    s.node.wait_finalized(slot).await;
    let line = eventually(Duration::from_secs(90), "the debit reconciled", || async {
        let line = sponsor_line(s).await;
        (line["at_block"].as_u64()? >= slot).then_some(line)
    })
    .await;
    assert!(line["difference"].as_str().unwrap().starts_with("-0.50000"), "0.5 SOL and the fee: {line}");
    assert_eq!(line["divergent_block"], slot, "{line}");
    assert_eq!(line["movements"][0]["transaction_hash"], stolen, "{line}");
    let target = format!("{}:{}:SOL:{slot}", CHAIN.as_str(), s.sponsor);
    eventually(Duration::from_secs(90), "the sponsor's alarm", || async {
        alarms(s).await.iter().any(|(t, actor)| *t == target && actor == "system").then_some(())
    })
    .await;
}
