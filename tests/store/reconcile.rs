//! Reconciliation's rows on both backends: which addresses are still
//! catching up, the lowest `PENDING` deposit's block, the ledger's terms of
//! an address (a confirmed deposit and a gas top-up received count, a
//! pending deposit does not; what it sent is read by the same queries and
//! checked on a real chain in the transfers tests), the first baseline kept
//! when two are recorded, and a checkpoint that only moves up.

use crate::common;

use alloy::primitives::U256;
use common::{TestDb, db::BACKENDS};
use custody_indexer::{
    chain::Chain,
    reconcile::{
        Anchor, Baseline, Term, TermKind,
        anchors::{record_baseline, record_checkpoint},
    },
};
use sqlx::AnyPool;

const CHAIN: Chain = Chain::EthereumTestnet;
const ALICE: &str = "0x1111111111111111111111111111111111111111";
const BOB: &str = "0x2222222222222222222222222222222222222222";

/// Rows as the watcher and the sender leave them, written directly.
const ROWS: &[&str] = &[
    "INSERT INTO accounts (id, organization_id, identity_id, type, status, created_at)
     VALUES ('alice', 'default', 'i', 'SEGREGATED', 'ACTIVE', 0), ('bob', 'default', 'i', 'SEGREGATED', 'ACTIVE', 0)",
    // alice is covered from block 5 on; bob's gap below 20 is still being scanned.
    "INSERT INTO account_addresses (chain, address, account_id, version, registered_at, watch_from, live_from, gap_next)
     VALUES ('ETHEREUM_TESTNET', '0x1111111111111111111111111111111111111111', 'alice', 1, 0, 5, 5, 5),
            ('ETHEREUM_TESTNET', '0x2222222222222222222222222222222222222222', 'bob', 2, 0, 3, 20, 10)",
    "INSERT INTO deposits (id, dedup_key, chain, tx_hash, position, account_id, account_address, source_address,
        source_type, currency_symbol, amount_raw, decimals, status, block_number, block_hash, created_at, updated_at)
     VALUES ('d1', 'k1', 'ETHEREUM_TESTNET', '0xd1', 'native', 'alice', '0x1111111111111111111111111111111111111111',
        '0x9', 'ON_CHAIN', 'ETH', '1000', 18, 'CONFIRMED', 6, '0xb6', 0, 0),
            ('d2', 'k2', 'ETHEREUM_TESTNET', '0xd2', 'native', 'alice', '0x1111111111111111111111111111111111111111',
        '0x9', 'ON_CHAIN', 'ETH', '7', 18, 'PENDING', 30, '0xb30', 0, 0)",
    "INSERT INTO own_transfers (chain, tx_hash, position, kind, account_id, account_address, source_address,
        currency_symbol, amount_raw, decimals, block_number, block_hash, created_at, recorded_at)
     VALUES ('ETHEREUM_TESTNET', '0xt1', 'native', 'TOP_UP', 'alice', '0x1111111111111111111111111111111111111111',
        '0x5', 'ETH', '300', 18, 8, '0xb8', 0, 0)",
];

#[tokio::test]
async fn the_rows_of_a_reconciliation_on_both_backends() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let pool = AnyPool::connect(&db.url).await.unwrap();
        for sql in ROWS {
            sqlx::query(sql).execute(&pool).await.unwrap_or_else(|e| panic!("{backend:?}: {e}: {sql}"));
        }
        pool.close().await;
        let store = &db.store;

        let watched = store.reconcile_watched(CHAIN).await.unwrap();
        let flags: Vec<(&str, Option<u64>, bool)> =
            watched.iter().map(|w| (w.account_id.as_str(), w.watch_from, w.catching_up)).collect();
        assert_eq!(flags, [("alice", Some(5), false), ("bob", Some(3), true)], "{backend:?}");
        let pending = |height| store.pending_addresses_through(CHAIN, height);
        assert_eq!(pending(30).await.unwrap(), [ALICE], "{backend:?}: alice's deposit at 30 is PENDING");
        assert!(pending(29).await.unwrap().is_empty(), "{backend:?}: nothing PENDING below it");

        let terms = store.ledger_terms(CHAIN, ALICE, "ETH").await.unwrap();
        let eth = |block: u64, amount: u64, kind: TermKind| Term {
            asset: "ETH".into(),
            block,
            amount: U256::from(amount),
            kind,
        };
        assert_eq!(terms, [eth(6, 1000, TermKind::Deposit), eth(8, 300, TermKind::Own)], "{backend:?}");
        assert!(store.ledger_terms(CHAIN, BOB, "ETH").await.unwrap().is_empty());

        // Two reconciliations racing keep the first baseline.
        let first = Anchor { block: 4, balance: U256::from(9) };
        let kept = record_baseline(store, CHAIN, ALICE, "ETH", first, Baseline::Archive).await.unwrap();
        assert_eq!(kept, (first, Baseline::Archive));
        let other = Anchor { block: 40, balance: U256::from(1) };
        let kept =
            record_baseline(store, CHAIN, ALICE, "ETH", other, Baseline::FirstReconciliation).await.unwrap();
        assert_eq!(kept, (first, Baseline::Archive), "{backend:?}");

        // A checkpoint only moves up.
        for (block, balance) in [(10, 5), (20, 6), (15, 7)] {
            let at = Anchor { block, balance: U256::from(balance) };
            record_checkpoint(store, CHAIN, ALICE, "ETH", at).await.unwrap();
        }
        let checkpoint = store.reconcile_checkpoint(CHAIN, ALICE, "ETH").await.unwrap();
        assert_eq!(checkpoint, Some(Anchor { block: 20, balance: U256::from(6) }), "{backend:?}");
        assert_eq!(store.reconcile_checkpoint(CHAIN, BOB, "ETH").await.unwrap(), None);
    }
}

/// A platform wallet's credits are the platform's transfers to its very
/// address: on Solana, whose base58 tells case apart, a customer's
/// withdrawal to a case-variant of it is another address's, never the
/// wallet's.
#[tokio::test]
async fn a_solana_wallets_credits_are_transfers_to_its_address_in_its_case() {
    use super::transfer_lineage::{BOB_SOL, SOLANA, accepted, record, sender_lease, signed, store};
    use custody_indexer::store::{Lineage, TxRole, TxState};
    use custody_indexer::transfers::transactions::update_transaction;
    for backend in BACKENDS {
        let db = store(backend).await;
        let s = &db.store;
        let id = accepted(s, SOLANA).await;
        let sent = signed(77, TxRole::Transfer, "Sp0nsor1111111111111111111111111111111111111", 0);
        record(s, &id, SOLANA, &sent, Lineage::Start).await.unwrap();
        let fenced = s.fenced(sender_lease(s, SOLANA).await);
        let fee = Some(U256::from(5u64));
        update_transaction(&fenced, &sent.hash, TxState::Mined, Some((7, "")), fee).await.unwrap();
        let credits = s.wallet_credit_terms(SOLANA, BOB_SOL, "SOL").await.unwrap();
        assert_eq!(credits.iter().map(|t| t.block).collect::<Vec<_>>(), [7], "{backend:?}: its own address");
        let swapped: String = BOB_SOL
            .chars()
            .map(|c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
            .collect();
        let variant = s.wallet_credit_terms(SOLANA, &swapped, "SOL").await.unwrap();
        assert_eq!(variant, Vec::<Term>::new(), "{backend:?}: a case-variant is another address");
    }
}
