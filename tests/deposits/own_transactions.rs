//! The platform's own operational transactions (gas top-ups, cancellations,
//! nonce fillers) are never customer deposits: not in the API, not as
//! `deposit_v2` events. Told apart by the hashes the sender recorded, never
//! by sender: plain ether from the sponsor's wallet is still a deposit.
//! Operators see them with `deposits platform` and in the log.

use crate::common;

use std::time::Duration;

use alloy::{primitives::U256, providers::Provider};
use common::{
    Backend, TestDb,
    anvil::Mined,
    db::BACKENDS,
    eventually,
    transfers::{ETH, Setup},
};
use custody_indexer::deposits::commit;
use custody_indexer::transfers::hold;
use custody_indexer::{
    amount::Amount,
    chain::Chain,
    deposits::resource::{Detected, OwnKind, Position},
    store::{
        BlockRef, Created, CursorMove, Lineage, NewTransfer, ScanCommit, SentTransaction, Store, TxRole,
    },
    transfers::{Route, fillers::record_filler, record::record},
};
use serde_json::Value;

const EVM: Chain = Chain::EthereumTestnet;
const ALICE: &str = "0x1111111111111111111111111111111111111111";
const SPONSOR: &str = "0x3333333333333333333333333333333333333333";
const OUTSIDE: &str = "0x4242424242424242424242424242424242424242";

fn hash(tag: u8) -> String {
    format!("0x{tag:064x}")
}

/// Ether into alice's address by transaction `tag`, in block `block`.
fn ether(tag: u8, from: &str, block: u64, wei: u64) -> Detected {
    Detected {
        chain: EVM,
        tx_hash: hash(tag),
        position: Position::Native,
        block_number: block,
        block_hash: format!("0xb{block}"),
        block_time_ms: (1_700_000_000 + block) * 1000,
        account_id: "alice".into(),
        account_address: ALICE.into(),
        source_address: from.into(),
        source_account_id: None,
        currency_symbol: "ETH".into(),
        amount: Amount::from_raw(U256::from(wei), 18),
    }
}

fn backfill(deposits: Vec<Detected>) -> ScanCommit {
    let (from, to) = (deposits[0].block_number, deposits[0].block_number);
    ScanCommit {
        chain: EVM,
        from,
        to,
        head: to,
        blocks: vec![BlockRef { number: to, hash: format!("0xb{to}"), parent_hash: "0xparent".into() }],
        deposits,
        confirmed_through: None,
        cursor: CursorMove::Backfill,
        keep_blocks: 100,
    }
}

/// An `ACCEPTED` top-up transfer of alice's; its id.
async fn alice_sending(store: &Store) -> String {
    let new = NewTransfer {
        organization: "default".into(),
        request_id: uuid::Uuid::new_v4().to_string(),
        account_id: "alice".into(),
        chain: EVM,
        source_address: ALICE.into(),
        destination_address: OUTSIDE.into(),
        currency_symbol: "ETH".into(),
        amount: Amount::from_raw(U256::from(1), 18),
        route: Route::TopUp,
        key_index: Some(1),
    };
    match hold::create(store, &new, U256::from(u64::MAX)).await.unwrap() {
        Created::New(transfer) => transfer.id,
        other => panic!("{other:?}"),
    }
}

/// A signed transaction as the sender records it before broadcast.
fn signed(tag: u8, role: TxRole, sender: &str, nonce: u64, wei: u64) -> SentTransaction {
    let now = custody_indexer::store::now_micros();
    common::sent(hash(tag), role, sender, nonce, U256::from(wei), 2_000_000_000, now)
}

/// The transaction hashes of the organization's `deposit_v2` events.
async fn announced(store: &Store) -> Vec<String> {
    let events = store.events_after("default", None, 1_000).await.unwrap();
    events
        .iter()
        .filter(|e| e.envelope["type"] == "deposit_v2")
        .map(|e| e.envelope["data"]["transaction_hash"].as_str().unwrap().to_string())
        .collect()
}

async fn stored_hashes(store: &Store) -> Vec<String> {
    store.deposits_on_chain(EVM).await.unwrap().into_iter().map(|d| d.transaction_hash).collect()
}

#[tokio::test]
async fn a_scan_keeps_recorded_own_transactions_apart_from_deposits() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        common::add_account_on(store, EVM, "alice", ALICE).await;
        // Ether from the sponsor's address before any of this: a deposit, and
        // once announced it stays one, even if a hash the sender records
        // later were the same.
        commit::commit_scan(store, &backfill(vec![ether(4, SPONSOR, 5, 4)])).await.unwrap();
        let topped_up = alice_sending(store).await;
        let top_up = signed(1, TxRole::TopUp, SPONSOR, 0, 1_000_000);
        record(store, (&topped_up, EVM), &top_up, Lineage::Start, None, None).await.unwrap();
        record_filler(store, EVM, ALICE, 0, &hash(2), "0x02", 0).await.unwrap();
        record_filler(store, EVM, ALICE, 1, &hash(4), "0x02", 0).await.unwrap();
        // A transfer cancelled at its nonce by a self-transfer.
        let cancelled = alice_sending(store).await;
        let original = signed(6, TxRole::Transfer, ALICE, 2, 0);
        record(store, (&cancelled, EVM), &original, Lineage::Start, None, None).await.unwrap();
        let cancel = signed(5, TxRole::Cancel, ALICE, 2, 0);
        let after = Lineage::After(&original.hash);
        record(store, (&cancelled, EVM), &cancel, after, None, None).await.unwrap();

        let scan = backfill(vec![
            ether(1, SPONSOR, 10, 1_000_000),
            ether(2, ALICE, 10, 7),
            // From the sponsor's address too, but no transaction the sender
            // recorded: a refund, say. A deposit.
            ether(3, SPONSOR, 10, 3),
            ether(4, SPONSOR, 10, 4),
            ether(5, ALICE, 10, 5),
        ]);
        commit::commit_scan(store, &scan).await.unwrap();
        assert_eq!(stored_hashes(store).await, [hash(3), hash(4)], "{backend:?}");
        let events = announced(store).await;
        assert!([1, 2, 5].iter().all(|&t| !events.contains(&hash(t))), "{backend:?}: {events:?}");
        assert!(events.contains(&hash(3)), "{backend:?}: {events:?}");

        let own = store.own_transfers(Some("alice")).await.unwrap();
        let seen: Vec<_> = own
            .iter()
            .map(|o| (o.transaction_hash.clone(), o.kind, o.amount.clone(), o.block_number))
            .collect();
        assert_eq!(
            seen,
            [
                (hash(5), OwnKind::Cancel, "0.000000000000000005".to_string(), 10),
                (hash(2), OwnKind::NonceFiller, "0.000000000000000007".to_string(), 10),
                (hash(1), OwnKind::TopUp, "0.000000000001".to_string(), 10),
            ],
            "{backend:?}"
        );
        assert_eq!(own[2].source_address, SPONSOR);
        assert_eq!(store.own_transfers(None).await.unwrap(), own);
        assert!(store.own_transfers(Some("bob")).await.unwrap().is_empty());

        // A replay, and a reorg that moves the top-up to block 11: one answer.
        let events = store.event_count().await.unwrap();
        assert!(commit::commit_scan(store, &scan).await.unwrap().is_empty(), "{backend:?}");
        commit::commit_scan(store, &backfill(vec![ether(1, SPONSOR, 11, 1_000_000)])).await.unwrap();
        assert_eq!(stored_hashes(store).await, [hash(3), hash(4)], "{backend:?}");
        assert_eq!(store.event_count().await.unwrap(), events, "{backend:?}");
        let own = store.own_transfers(Some("alice")).await.unwrap();
        assert_eq!(own.len(), 3, "{backend:?}");
        assert_eq!((own[0].transaction_hash.as_str(), own[0].block_number), (hash(1).as_str(), 11));
    }
}

#[tokio::test]
async fn a_gas_top_up_is_no_deposit_but_ether_from_the_sponsor_is() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let s = Setup::new(backend, "").await;
        let alice = s.create_account("alice", "SEGREGATED");
        let minter = s.anvil.accounts[5];
        let mint = s.anvil.token(s.tusd).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
        let mint = mint.transaction_hash.to_string();
        let mut run = s.start("run").await;

        // Alice holds no ether: the sponsor tops up her gas, then she sends.
        let id = s.transfer("alice", "5", "TUSD", s.outside).await;
        s.until(&id, "CONFIRMED", true).await;
        let store = s.env.store().await;
        let top_ups: Vec<SentTransaction> =
            s.included(&store, &id).await.into_iter().filter(|t| t.role == TxRole::TopUp).collect();
        assert_eq!(top_ups.len(), 1, "{backend:?}");
        let top_up = &top_ups[0];

        // Then plain ether from the sponsor's wallet, which the sender never
        // recorded: a deposit like any other.
        s.anvil.provider.raw_request::<_, ()>("anvil_impersonateAccount".into(), (s.sponsor,)).await.unwrap();
        let plain = s.anvil.send_eth(s.sponsor, alice, U256::from(ETH / 100)).await.to_string();
        let deposits = eventually(Duration::from_secs(60), "alice's deposit from the sponsor", || async {
            s.anvil.mine(1).await;
            let list = s.get("/v2/crypto/deposits?account_id=alice").await.body;
            let found = list["deposits"].as_array().unwrap().iter().any(|d| d["transaction_hash"] == plain);
            found.then_some(list)
        })
        .await;
        // Blocks are scanned in order: the top-up's block was scanned before.
        let deposits = deposits["deposits"].as_array().unwrap();
        let hashes: Vec<&str> = deposits.iter().map(|d| d["transaction_hash"].as_str().unwrap()).collect();
        // Newest first: the ether, then the tokens alice was minted.
        assert_eq!(hashes, [plain.as_str(), mint.as_str()], "{backend:?}: no deposit of the top-up");
        assert_eq!(deposits[0]["amount"], "0.01");
        assert_eq!(deposits[0]["currency_symbol"], "ETH");
        assert_eq!(deposits[0]["source_address"], s.sponsor.to_string());
        assert_eq!(deposits[0]["source_type"], "ON_CHAIN");
        assert_eq!(deposits[1]["currency_symbol"], "TUSD");
        let events = s.get("/v2/events?limit=100").await.body;
        let announced: Vec<&Value> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "deposit_v2")
            .map(|e| &e["data"]["transaction_hash"])
            .collect();
        assert!(!announced.iter().any(|h| **h == top_up.hash), "{backend:?}: {announced:?}");
        assert!(announced.iter().any(|h| **h == plain), "{backend:?}: {announced:?}");
        // What alice may spend is what her deposits credited: the sponsor's
        // gas money left at her address is neither.
        let balances = s.get("/v2/accounts/alice/balances").await.body;
        let eth = balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == "ETH").unwrap();
        assert_eq!(eth["available"], "0.01", "{balances}");

        // The operator sees the top-up.
        let listed: Value =
            serde_json::from_str(&s.cli(&["deposits", "platform", "--account-id", "alice", "--json"]))
                .unwrap();
        let listed = listed.as_array().unwrap();
        assert_eq!(listed.len(), 1, "{backend:?}: {listed:?}");
        assert_eq!(listed[0]["transaction_hash"], top_up.hash);
        assert_eq!(listed[0]["kind"], "TOP_UP");
        assert_eq!(listed[0]["source_address"], s.sponsor.to_string());
        assert_eq!(listed[0]["amount"], Amount::from_raw(top_up.value, 18).to_string());
        assert_eq!(listed[0]["block_number"], top_up.block_number.unwrap());
        run.kill().unwrap();
        run.wait().unwrap();
        let logged = std::fs::read_dir(s.env.dir.path()).unwrap().any(|entry| {
            let path = entry.unwrap().path();
            path.extension().is_some_and(|e| e == "log")
                && std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .any(|l| l.contains("recorded, not a deposit") && l.contains(&top_up.hash))
        });
        assert!(logged, "{backend:?}: the log names the top-up");
    }
}
