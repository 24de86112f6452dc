//! The deposit store on both backends: accounts, idempotent scans, the
//! cursor's compare-and-set, reorg rewinds and orphan settlement, and the
//! events they announce.

use crate::common;

use alloy::primitives::U256;
use common::{Backend, TestDb, db::BACKENDS};
use custody_indexer::deposits::commit;
use custody_indexer::identity::change as lifecycle;
use custody_indexer::identity::change::Change;
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    chain::Chain,
    deposits::{
        quorum::{Dispute, Outcome, UrlAnswer},
        resource::{DepositStatus, Detected, Position, SourceType, TokenTransfer},
    },
    identity::{Event as IdentityEvent, State, Type},
    store::{
        BlockRef, CursorMove, NewAccount, NewIdentity, QuorumSettlement, Rewind, ScanCommit, Store,
        StoreError,
    },
};

const ALICE: &str = "0x1111111111111111111111111111111111111111";
const BOB: &str = "0x2222222222222222222222222222222222222222";
const CHAIN: Chain = Chain::BaseSepolia;

fn account(id: &str, address: &str, chains: Vec<Chain>) -> NewAccount {
    NewAccount {
        watch_from: Default::default(),
        id: id.into(),
        organization: "default".into(),
        identity_id: "identity".into(),
        kind: AccountType::Segregated,
        request_id: None,
        addresses: vec![AccountAddress { chains, address: address.into() }],
    }
}

fn detected(tx: u8, position: Position, block: u64, hash: &str, raw: u64) -> Detected {
    Detected {
        chain: CHAIN,
        tx_hash: format!("0x{tx:064x}"),
        position,
        block_number: block,
        block_hash: hash.into(),
        block_time_ms: (1_700_000_000 + block) * 1000,
        account_id: "alice".into(),
        account_address: ALICE.into(),
        source_address: BOB.into(),
        source_account_id: None,
        currency_symbol: "USDC".into(),
        amount: Amount::from_raw(U256::from(raw), 6),
    }
}

/// An open dispute about deposit `id`: one URL answered its block without it.
fn dispute(id: &str) -> Dispute {
    Dispute {
        deposit_id: id.into(),
        chain: CHAIN,
        account_id: "alice".into(),
        address: ALICE.into(),
        asset: "ETH".into(),
        transaction_hash: "0x00".into(),
        block_number: 22,
        block_hash: "0xa22".into(),
        answers: vec![UrlAnswer { url: "http://b.example/…".into(), answered: "absent".into() }],
        outcome: Outcome::Open,
        first_seen_at: String::new(),
        updated_at: String::new(),
    }
}

fn block(number: u64, hash: &str, parent: &str) -> BlockRef {
    BlockRef { number, hash: hash.into(), parent_hash: parent.into() }
}

fn scan(
    from: u64,
    to: u64,
    deposits: Vec<Detected>,
    blocks: Vec<BlockRef>,
    expected: Option<u64>,
) -> ScanCommit {
    ScanCommit {
        chain: CHAIN,
        from,
        to,
        head: to,
        blocks,
        deposits,
        confirmed_through: None,
        cursor: CursorMove::Live { expected, watch_version: 0 },
        keep_blocks: 100,
    }
}

async fn each_backend<F, Fut>(test: F)
where
    F: Fn(Store, Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        common::identity(&db.store, "default", "identity").await;
        test(db.store.clone(), backend).await;
    }
}

#[tokio::test]
async fn accounts_are_validated_normalised_and_unique_per_chain_address() {
    each_backend(|store, backend| async move {
        let version = store.accounts_version().await.unwrap();
        let lower = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48";
        let added =
            accounts::add_account(&store, account("a1", lower, vec![CHAIN, Chain::EthereumMainnet])).await.unwrap();
        assert_eq!(added.addresses.len(), 1, "{backend:?}");
        assert_eq!(added.addresses[0].address, "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48");
        assert_eq!(added.addresses[0].chains.len(), 2);
        assert!(store.accounts_version().await.unwrap() > version, "adding bumps the version");

        let taken = accounts::add_account(&store, account("a2", lower, vec![CHAIN])).await.unwrap_err();
        assert!(matches!(&taken, StoreError::Taken { key, .. } if key == &format!("address:{CHAIN}:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")), "{taken:?}");
        assert!(store.account("a2").await.is_err(), "a refused account leaves nothing behind");

        let duplicate = accounts::add_account(&store, account("a1", BOB, vec![CHAIN])).await.unwrap_err();
        assert!(matches!(&duplicate, StoreError::Taken { key, .. } if key == "account:a1"), "{duplicate:?}");
        let bad = accounts::add_account(&store, account("a3", "0x1234", vec![CHAIN])).await.unwrap_err();
        assert!(matches!(bad, StoreError::Invalid(_)), "{bad}");
        let wrong_family =
            accounts::add_account(&store, account("a4", BOB, vec![Chain::SolanaDevnet])).await.unwrap_err();
        assert!(matches!(wrong_family, StoreError::Invalid(_)));
        let mut stranger = account("a5", BOB, vec![CHAIN]);
        stranger.organization = "nobody".into();
        assert!(matches!(accounts::add_account(&store, stranger).await.unwrap_err(), StoreError::NotFound(_)));

        let watched = store.watched_addresses(CHAIN).await.unwrap();
        assert_eq!(
            watched,
            vec![("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48".to_string(), "a1".to_string())]
        );
        assert_eq!(store.accounts(None).await.unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn rescanning_a_range_never_duplicates_and_confirmation_is_terminal() {
    each_backend(|store, backend| async move {
        accounts::add_account(&store, account("alice", ALICE, vec![CHAIN])).await.unwrap();
        let deposits = vec![
            detected(1, Position::Native, 10, "0xb10", 5),
            detected(
                2,
                Position::Log(TokenTransfer::new("USDC", BOB, ALICE, "1500000", 0)),
                11,
                "0xb11",
                1_500_000,
            ),
            detected(2, Position::Log(TokenTransfer::new("USDC", BOB, ALICE, "2", 0)), 11, "0xb11", 2),
        ];
        let blocks = vec![block(10, "0xb10", "0xb09"), block(11, "0xb11", "0xb10")];
        let changed =
            commit::commit_scan(&store, &scan(10, 11, deposits.clone(), blocks.clone(), None)).await.unwrap();
        assert_eq!(changed.len(), 3, "{backend:?}");
        assert!(changed.iter().all(|(_, s)| *s == DepositStatus::Pending));

        // The same range again, as a backfill: nothing changes.
        let mut again = scan(10, 11, deposits.clone(), vec![], None);
        again.cursor = CursorMove::Backfill;
        assert!(commit::commit_scan(&store, &again).await.unwrap().is_empty());
        let listed = store.deposits_of_account("alice").await.unwrap();
        assert_eq!(listed.len(), 3);
        let usdc = listed.iter().find(|d| d.amount == "1.5").unwrap();
        assert_eq!(usdc.status, DepositStatus::Pending);
        assert_eq!(usdc.source_type, SourceType::OnChain);
        assert_eq!(usdc.confirmed_at, None, "null until confirmed");
        assert_eq!(usdc.created_at.timestamp(), 1_700_000_011);
        assert_eq!(store.deposit(&usdc.id).await.unwrap(), *usdc);

        // Confirmation through block 10 confirms only that block's deposit.
        let confirmed = commit::confirm_through(&store, CHAIN, 10).await.unwrap();
        assert_eq!(confirmed.len(), 1);
        let native = store.deposit(&confirmed[0].0).await.unwrap();
        assert_eq!((native.status, native.amount.as_str()), (DepositStatus::Confirmed, "0.000005"));
        assert!(native.confirmed_at.is_some_and(|t| t.timestamp() > 0));

        // A later scan claiming block 10 changed cannot touch a CONFIRMED deposit.
        let mut moved = deposits[0].clone();
        moved.block_hash = "0xother".into();
        let mut replay = scan(10, 10, vec![moved], vec![], None);
        replay.cursor = CursorMove::Backfill;
        assert!(commit::commit_scan(&store, &replay).await.unwrap().is_empty());
        assert_eq!(store.deposit(&native.id).await.unwrap(), native);
    })
    .await;
}

#[tokio::test]
async fn the_cursor_moves_only_from_where_the_scan_started() {
    each_backend(|store, _| async move {
        commit::commit_scan(&store, &scan(0, 4, vec![], vec![], None)).await.unwrap();
        assert_eq!(store.chain_state(CHAIN).await.unwrap().unwrap().next_block, 5);
        // A second instance that still believes the chain is new is refused.
        let stale = commit::commit_scan(&store, &scan(0, 4, vec![], vec![], None)).await.unwrap_err();
        assert!(matches!(stale, StoreError::Elsewhere(_)), "{stale:?}");
        // One that read an old cursor is refused, and writes none of its deposits.
        accounts::add_account(&store, account("alice", ALICE, vec![CHAIN])).await.unwrap();
        let late = scan(3, 6, vec![detected(9, Position::Native, 6, "0xb6", 1)], vec![], Some(3));
        assert!(matches!(commit::commit_scan(&store, &late).await.unwrap_err(), StoreError::Elsewhere(_)));
        assert!(store.deposits_of_account("alice").await.unwrap().is_empty());
        commit::commit_scan(&store, &scan(5, 6, vec![], vec![], Some(5))).await.unwrap();
        assert_eq!(store.chain_state(CHAIN).await.unwrap().unwrap().next_block, 7);
    })
    .await;
}

#[tokio::test]
async fn a_rewind_orphans_pending_deposits_which_reappear_or_fail() {
    each_backend(|store, backend| async move {
        accounts::add_account(&store, account("alice", ALICE, vec![CHAIN])).await.unwrap();
        let blocks =
            vec![block(20, "0xa20", "0xa19"), block(21, "0xa21", "0xa20"), block(22, "0xa22", "0xa21")];
        let deposits = vec![
            detected(1, Position::Native, 20, "0xa20", 1),
            detected(2, Position::Native, 21, "0xa21", 2),
            detected(3, Position::Native, 22, "0xa22", 3),
        ];
        let mut first = scan(20, 22, deposits.clone(), blocks, None);
        first.confirmed_through = Some(20);
        commit::commit_scan(&store, &first).await.unwrap();

        let outcome = commit::rewind(
            &store,
            Rewind { chain: CHAIN, common_ancestor: 20, expected_next: 23, scanned_height: 22 },
        )
        .await
        .unwrap();
        assert_eq!((outcome.orphaned, outcome.confirmed_affected), (2, 0), "{backend:?}");
        assert_eq!(store.chain_state(CHAIN).await.unwrap().unwrap().next_block, 21);
        assert_eq!(store.blocks_below(CHAIN, 100, 10).await.unwrap().len(), 1);
        assert_eq!(store.reorg_count(CHAIN).await.unwrap(), 1);
        let orphans = store.orphans(CHAIN).await.unwrap();
        assert_eq!(orphans.len(), 2);

        // Transaction 2 reappears in another block; transaction 3 does not.
        let mut back = deposits[1].clone();
        back.block_number = 22;
        back.block_hash = "0xc22".into();
        let rescan = scan(
            21,
            22,
            vec![back],
            vec![block(21, "0xc21", "0xa20"), block(22, "0xc22", "0xc21")],
            Some(21),
        );
        commit::commit_scan(&store, &rescan).await.unwrap();
        let orphans = store.orphans(CHAIN).await.unwrap();
        assert_eq!(orphans.len(), 1);
        assert_eq!(orphans[0].tx_hash, format!("0x{:064x}", 3));
        let ids: Vec<String> =
            store.deposits_on_chain(CHAIN).await.unwrap().iter().map(|d| d.id.clone()).collect();
        // The providers disputed both the orphan and the one that reappeared.
        let disputes: Vec<Dispute> = ids[1..].iter().map(|id| dispute(id)).collect();
        let settlement = QuorumSettlement { confirmed: vec![], failed: vec![], disputes };
        commit::settle_on_quorum(&store, &settlement).await.unwrap();
        assert_eq!(
            commit::fail_orphans(&store, &ids).await.unwrap(),
            vec![orphans[0].id.clone()],
            "only the orphan fails"
        );
        let outcomes: Vec<(String, &str)> = store
            .disputes(Some(CHAIN), false, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.deposit_id, d.outcome.as_str()))
            .collect();
        assert!(
            outcomes.contains(&(orphans[0].id.clone(), "REORGED")),
            "the orphan's dispute ends: {outcomes:?}"
        );
        assert_eq!(outcomes.iter().filter(|(_, o)| *o == "OPEN").count(), 1, "the other waits: {outcomes:?}");

        let all = store.deposits_on_chain(CHAIN).await.unwrap();
        let statuses: Vec<_> = all.iter().map(|d| (d.amount.as_str(), d.status)).collect();
        assert_eq!(
            statuses,
            vec![
                ("0.000001", DepositStatus::Confirmed),
                ("0.000002", DepositStatus::Pending),
                ("0.000003", DepositStatus::Failed)
            ]
        );

        // A rewind below a CONFIRMED deposit reports it and leaves it alone.
        let deep = commit::rewind(
            &store,
            Rewind { chain: CHAIN, common_ancestor: 19, expected_next: 23, scanned_height: 22 },
        )
        .await
        .unwrap();
        assert_eq!(deep.confirmed_affected, 1);
        assert_eq!(store.deposits_on_chain(CHAIN).await.unwrap()[0].status, DepositStatus::Confirmed);
    })
    .await;
}

#[tokio::test]
async fn settling_confirms_final_slots_and_fails_skipped_ones() {
    each_backend(|store, backend| async move {
        accounts::add_account(&store, account("alice", ALICE, vec![CHAIN])).await.unwrap();
        let mut backfill = scan(
            30,
            32,
            vec![
                detected(1, Position::Native, 30, "0xs30", 1),
                detected(2, Position::Native, 32, "0xs32", 2),
            ],
            vec![],
            None,
        );
        backfill.cursor = CursorMove::Backfill;
        commit::commit_scan(&store, &backfill).await.unwrap();
        let pending = store.pending_through(CHAIN, 31).await.unwrap();
        assert_eq!(pending.iter().map(|(_, slot, _)| *slot).collect::<Vec<_>>(), vec![30], "{backend:?}");
        assert_eq!(pending[0].2, format!("0x{:064x}", 1), "its transaction");
        let all: Vec<String> =
            store.pending_through(CHAIN, 100).await.unwrap().into_iter().map(|(id, _, _)| id).collect();
        let changed = commit::settle(&store, &all[..1], &all[1..]).await.unwrap();
        assert_eq!(changed.len(), 2);
        let statuses: Vec<_> =
            store.deposits_on_chain(CHAIN).await.unwrap().iter().map(|d| d.status).collect();
        assert_eq!(statuses, vec![DepositStatus::Confirmed, DepositStatus::Failed]);
        assert!(
            commit::settle(&store, &all, &[]).await.unwrap().is_empty(),
            "settled deposits stay as they are"
        );
    })
    .await;
}

/// The last event of each of alice's deposits carries the deposit exactly
/// as the store serves it.
async fn events_tell_what_is_stored(store: &Store, backend: Backend) {
    let events = store.events_after("default", None, 1_000).await.unwrap();
    let deposits = store.deposits_of_account("alice").await.unwrap();
    assert!(!deposits.is_empty());
    for deposit in deposits {
        let last = events.iter().rev().find(|e| e.envelope["data"]["id"] == deposit.id.as_str());
        let data = &last.unwrap_or_else(|| panic!("no event for {}", deposit.id)).envelope["data"];
        assert_eq!(*data, serde_json::to_value(&deposit).unwrap(), "{backend:?}");
    }
}

#[tokio::test]
async fn every_deposit_event_carries_the_deposit_as_stored() {
    const CAROL: &str = "0x3333333333333333333333333333333333333333";
    const DAVE: &str = "0x4444444444444444444444444444444444444444";
    each_backend(|store, backend| async move {
        accounts::add_account(&store, account("alice", ALICE, vec![CHAIN])).await.unwrap();
        accounts::add_account(&store, account("carol", CAROL, vec![CHAIN])).await.unwrap();
        custody_indexer::operators::tenants::create_bare_organization(&store, "other", None).await.unwrap();
        common::identity(&store, "other", "identity-dave").await;
        let mut dave = account("dave", DAVE, vec![CHAIN]);
        (dave.organization, dave.identity_id) = ("other".into(), "identity-dave".into());
        accounts::add_account(&store, dave).await.unwrap();
        // Confirmed as it is found; from a sender of the same organization;
        // from another organization's account, which alice may not see.
        let native = detected(1, Position::Native, 30, "0xd30", 7);
        let mut from_carol = detected(
            2,
            Position::Log(TokenTransfer::new("USDC", CAROL, ALICE, "2500000", 0)),
            31,
            "0xd31",
            2_500_000,
        );
        (from_carol.source_address, from_carol.source_account_id) = (CAROL.into(), Some("carol".into()));
        let mut from_dave =
            detected(3, Position::Log(TokenTransfer::new("USDC", DAVE, ALICE, "1", 0)), 31, "0xd31", 1);
        (from_dave.source_address, from_dave.source_account_id) = (DAVE.into(), Some("dave".into()));
        let blocks = vec![block(30, "0xd30", "0xd29"), block(31, "0xd31", "0xd30")];
        let mut first = scan(30, 31, vec![native, from_carol.clone(), from_dave], blocks, None);
        first.confirmed_through = Some(30);
        assert_eq!(commit::commit_scan(&store, &first).await.unwrap().len(), 3, "{backend:?}");
        let sources: Vec<_> = store
            .deposits_of_account("alice")
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.status, d.source_type, d.source_account_id))
            .collect();
        assert!(sources.contains(&(DepositStatus::Confirmed, SourceType::OnChain, None)));
        assert!(sources.contains(&(DepositStatus::Pending, SourceType::Account, Some("carol".into()))));
        assert!(sources.contains(&(DepositStatus::Pending, SourceType::OnChain, None)));
        events_tell_what_is_stored(&store, backend).await;

        // Block 31 is reorged away and its deposits fail; carol's transfer
        // comes back in another block: the row is updated, not inserted.
        let rewind = Rewind { chain: CHAIN, common_ancestor: 30, expected_next: 32, scanned_height: 31 };
        commit::rewind(&store, rewind).await.unwrap();
        let orphans: Vec<String> = store.orphans(CHAIN).await.unwrap().into_iter().map(|o| o.id).collect();
        assert_eq!(commit::fail_orphans(&store, &orphans).await.unwrap().len(), 2);
        events_tell_what_is_stored(&store, backend).await;
        (from_carol.block_number, from_carol.block_hash) = (32, "0xe32".into());
        let blocks = vec![block(31, "0xe31", "0xd30"), block(32, "0xe32", "0xe31")];
        let revived =
            commit::commit_scan(&store, &scan(31, 32, vec![from_carol], blocks, Some(31))).await.unwrap();
        assert_eq!(revived.len(), 1);
        assert_eq!(store.deposit(&revived[0].0).await.unwrap().status, DepositStatus::Pending);
        events_tell_what_is_stored(&store, backend).await;
    })
    .await;
}

/// The envelope of the last event of an identity labelled `label`, created
/// and then suspended, as the pull API serves it.
async fn identity_event_labelled(store: &Store, id: &str, label: &str) -> serde_json::Value {
    let new = NewIdentity {
        organization: "default".into(),
        id: id.into(),
        request_id: None,
        kind: Type::Individual,
        label: label.into(),
        state: State::Active { rfi: false },
        actor: "operator:test".into(),
    };
    custody_indexer::identity::register::create_identity(store, &new).await.unwrap();
    let suspend = Change {
        organization: "default",
        identity_id: id,
        event: IdentityEvent::Suspended,
        actor: "operator:test",
        reason: None,
        decider: None,
    };
    lifecycle::change(store, &suspend, &|_| unreachable!("no transfers")).await.unwrap();
    let events = store.events_after("default", None, 100).await.unwrap();
    events.last().unwrap().envelope.clone()
}

#[tokio::test]
async fn an_event_whose_payload_holds_a_nul_character_is_stored_and_served() {
    each_backend(|store, backend| async move {
        let envelope = identity_event_labelled(&store, "nul", "before\u{0}after").await;
        let served = serde_json::to_string(&envelope).unwrap();
        assert!(served.contains("before\\u0000after"), "the label, as given, {backend:?}: {served}");
    })
    .await;
}

#[tokio::test]
async fn an_event_payload_comes_back_exactly_whatever_characters_it_holds() {
    let label = "quote \" backslash \\ control \u{1} tab \t accent é emoji 🦀 </script>";
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        common::identity(&db.store, "default", "identity").await;
        let envelope = identity_event_labelled(&db.store, "characters", label).await;
        let served = envelope.pointer("/data/identity/label");
        assert_eq!(served.and_then(|l| l.as_str()), Some(label), "{backend:?}: {envelope}");
        // The stored text holds the label as the envelope was written: not
        // escaped twice, not unescaped, not re-encoded.
        let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
        let stored: String = sqlx::query_scalar("SELECT payload FROM events ORDER BY seq DESC LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        let written = serde_json::to_string(label).unwrap();
        assert!(stored.contains(&format!("\"label\":{written}")), "{backend:?}: {stored}");
        pool.close().await;
    }
}

#[tokio::test]
async fn a_deposit_alone_in_its_statement_is_stored_exactly_as_detected() {
    each_backend(|store, backend| async move {
        accounts::add_account(&store, account("alice", ALICE, vec![CHAIN])).await.unwrap();
        // One deposit alone in its statement, with an empty value and a
        // symbol outside ASCII: on PostgreSQL each column's array holds a
        // single value, the empty one included.
        let mut odd = detected(1, Position::Native, 40, "0xd40", 12_345);
        (odd.source_address, odd.currency_symbol) = (String::new(), "USD₮0".into());
        let first = scan(40, 40, vec![odd], vec![block(40, "0xd40", "0xd39")], None);
        let changed = commit::commit_scan(&store, &first).await.unwrap();
        let stored = store.deposit(&changed[0].0).await.unwrap();
        assert_eq!(
            (stored.source_address.as_str(), stored.currency_symbol.as_str(), stored.amount.as_str()),
            ("", "USD₮0", "0.012345"),
            "{backend:?}"
        );
        assert_eq!((stored.source_account_id, stored.status), (None, DepositStatus::Pending), "{backend:?}");
        events_tell_what_is_stored(&store, backend).await;
    })
    .await;
}

#[tokio::test]
async fn ids_holding_a_control_character_still_take_their_deposits_and_events() {
    each_backend(|store, backend| async move {
        // Account and identity ids are the operator's: nothing keeps a unit
        // separator (U+001F) or a record separator (U+001E) out of them.
        let id = "ali\u{1f}ce\u{1e}";
        accounts::add_account(&store, account(id, ALICE, vec![CHAIN])).await.unwrap();
        let mut deposits: Vec<Detected> =
            (1..=3).map(|tx| detected(tx, Position::Native, 50, "0xd50", u64::from(tx))).collect();
        deposits.iter_mut().for_each(|d| d.account_id = id.into());
        let commit = scan(50, 50, deposits, vec![block(50, "0xd50", "0xd49")], None);
        assert_eq!(commit::commit_scan(&store, &commit).await.unwrap().len(), 3, "{backend:?}");
        let stored = store.deposits_of_account(id).await.unwrap();
        assert_eq!(stored.len(), 3, "{backend:?}");
        assert!(stored.iter().all(|d| d.account_id == id), "{backend:?}");
        let events = store.events_after("default", None, 100).await.unwrap();
        let deposits: Vec<_> = events.iter().filter(|e| e.envelope["type"] == "deposit_v2").collect();
        assert_eq!(deposits.len(), 3, "{backend:?}");
        assert!(deposits.iter().all(|e| e.envelope["data"]["account_id"] == id), "{backend:?}");

        // An identity's events name it as their resource.
        let envelope = identity_event_labelled(&store, id, "separators").await;
        assert_eq!(envelope.pointer("/data/identity/id").and_then(|i| i.as_str()), Some(id), "{envelope}");
    })
    .await;
}
