//! `reconcile` after the platform sent from two accounts: each account's
//! ledger (its deposit, the sponsor's gas top-up, the transfer's amount and
//! fee) equals its balances on chain, so it exits 0. Then an account's key
//! used outside the platform (the address sends a token itself): an
//! unexplained debit, reported with its block and the token's log, never
//! credited or hidden, however often it is reconciled. The sponsor's wallet
//! is reconciled beside them: funded from outside, then robbed, and a
//! funding row written with plain SQL does not hide the theft.

use crate::common;

use std::time::Duration;

use alloy::{primitives::U256, providers::Provider};
use common::{CHAIN, anvil::Mined, db::Backend, eventually, transfers::Setup};
use serde_json::Value;
use sqlx::Connection;

fn reconcile(s: &Setup, args: &[&str]) -> (i32, String, String) {
    let out = s.env.output(&[&["reconcile", "--chain", CHAIN.as_str()][..], args].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    (out.status.code().unwrap(), text, String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test]
async fn the_platforms_own_sends_reconcile_and_a_debit_outside_it_is_found() {
    let s = Setup::new(Backend::Sqlite, "").await;
    let (alice, _bob, _run, store) = s.two_accounts_sent().await;
    // Every deposit confirmed, the chain indexed past the transfers.
    s.anvil.mine(5).await;
    let head = s.anvil.head().await;
    eventually(Duration::from_secs(60), "the deposits CONFIRMED", || async {
        let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
        let indexed = store.chain_state(CHAIN).await.unwrap()?.next_block;
        (deposits.iter().all(|d| d.status.as_str() == "CONFIRMED") && indexed > head).then_some(())
    })
    .await;

    let (code, text, err) = reconcile(&s, &[]);
    assert_eq!(code, 0, "{text}{err}");
    // alice, bob and the omnibus wallet, in ETH, TUSD and USDC.
    assert!(text.lines().last().unwrap().ends_with("addresses: 0 differ"), "{text}");
    let (_, json, _) = reconcile(&s, &["--json", "--account", "alice"]);
    let lines: Vec<Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let eth = lines.iter().find(|l| l["asset"] == "ETH").unwrap();
    let tusd = lines.iter().find(|l| l["asset"] == "TUSD").unwrap();
    assert_ne!(eth["onchain"], "0", "the top-up's leftover is explained: {eth}");
    assert_eq!((&tusd["onchain"], &tusd["ledger"]), (&Value::from("9"), &Value::from("9")), "{tusd}");

    // alice's key signs outside the platform: 2 TUSD leave unseen by the
    // sender, and nothing credits them back.
    let provider = &s.anvil.provider;
    provider.raw_request::<_, Value>("anvil_impersonateAccount".into(), (alice,)).await.unwrap();
    let receipt = s.anvil.token(s.tusd).transfer(s.outside, U256::from(2_000_000)).from(alice).mined().await;
    let debit = receipt.block_number.unwrap();
    s.anvil.mine(5).await;
    let head = s.anvil.head().await;
    eventually(Duration::from_secs(60), "the chain indexed past the debit", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(())
    })
    .await;
    for _ in 0..2 {
        let (code, json, err) = reconcile(&s, &["--json", "--account", "alice", "--asset", "TUSD"]);
        assert_eq!(code, 1, "{json}{err}");
        let line: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!((&line["onchain"], &line["ledger"]), (&Value::from("7"), &Value::from("9")), "{line}");
        assert_eq!(line["difference"], "-2", "{line}");
        assert_eq!(line["divergent_block"], debit, "{line}");
        let moved = &line["movements"][0];
        assert_eq!(
            (&moved["direction"], &moved["how"], &moved["amount"]),
            (&"out".into(), &"token_log".into(), &"2".into())
        );
        assert_eq!(moved["transaction_hash"], receipt.transaction_hash.to_string(), "{line}");
    }
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    assert!(
        deposits.iter().all(|d| d.transaction_hash != receipt.transaction_hash.to_string()),
        "never credited"
    );
    the_sponsor_is_reconciled_as_a_platform_wallet(&s, &store).await;
}

/// The sponsor's wallet, a platform wallet: gas money an operator sends it
/// from outside is located and recorded as its funding, so it agrees; its
/// key used outside the platform is an unexplained debit, never hidden.
async fn the_sponsor_is_reconciled_as_a_platform_wallet(s: &Setup, store: &custody_indexer::store::Store) {
    let sponsor = s.sponsor.to_string();
    let indexed_past = |what: &'static str| async move {
        s.anvil.mine(5).await;
        let head = s.anvil.head().await;
        eventually(Duration::from_secs(60), what, || async {
            (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(())
        })
        .await;
    };
    let line = |args: &[&str]| {
        let (code, json, err) =
            reconcile(s, &[&["--json", "--address", &sponsor, "--asset", "ETH"][..], args].concat());
        let line: Value =
            serde_json::from_str(json.lines().next().unwrap_or_else(|| panic!("{err}"))).unwrap();
        (code, line)
    };
    let funded = s.anvil.send_eth(s.anvil.accounts[0], s.sponsor, U256::from(10u64.pow(18))).await;
    indexed_past("the chain indexed past the funding").await;
    let (code, funding) = line(&[]);
    assert_eq!(code, 0, "funding from outside is recorded, not a difference: {funding}");
    assert_eq!((&funding["wallet"], &funding["account_id"]), (&"sponsor".into(), &Value::Null), "{funding}");
    assert_eq!(funding["difference"], "0", "{funding}");
    let moved = &funding["movements"][0];
    assert_eq!((&moved["direction"], &moved["amount"]), (&"in".into(), &"1".into()), "{funding}");
    assert_eq!(moved["transaction_hash"], funded.to_string(), "{funding}");
    let (code, again) = line(&[]);
    assert_eq!((code, &again["movements"]), (0, &serde_json::json!([])), "recorded once: {again}");

    // The sponsor's key signs outside the platform: 0.25 ETH and the fee leave.
    let provider = &s.anvil.provider;
    provider.raw_request::<_, Value>("anvil_impersonateAccount".into(), (s.sponsor,)).await.unwrap();
    let quarter = U256::from(25u64 * 10u64.pow(16));
    let stolen = s.anvil.send_eth(s.sponsor, s.outside, quarter).await;
    let receipt = provider.get_transaction_receipt(stolen).await.unwrap().unwrap();
    let fee = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    indexed_past("the chain indexed past the debit").await;
    let lost = custody_indexer::amount::Amount::from_raw(quarter + fee, 18).to_string();
    // A database owner writes funding that would explain the theft: a row
    // without its audit entry explains nothing.
    let mut sql = sqlx::AnyConnection::connect(&s.env.database_url).await.unwrap();
    sqlx::query(
        "INSERT INTO wallet_funding (chain, tx_hash, position, address, asset, amount_raw, block_number, recorded_at)
         VALUES ($1, $2, 'native', $3, 'ETH', $4, $5, 0)",
    )
    .bind(CHAIN.as_str())
    .bind(format!("{:#x}", alloy::primitives::B256::repeat_byte(7)))
    .bind(&sponsor)
    .bind((quarter + fee).to_string())
    .bind(receipt.block_number.unwrap() as i64)
    .execute(&mut sql)
    .await
    .unwrap();
    for _ in 0..2 {
        let (code, line) = line(&[]);
        assert_eq!(code, 1, "{line}");
        assert_eq!(line["difference"], format!("-{lost}"), "{line}");
        assert_eq!(line["divergent_block"], receipt.block_number.unwrap(), "{line}");
        let moved = &line["movements"][0];
        assert_eq!(
            (&moved["direction"], &moved["how"], &moved["amount"]),
            (&"out".into(), &"top_level".into(), &"0.25".into())
        );
        assert_eq!(moved["transaction_hash"], stolen.to_string(), "{line}");
    }
}
