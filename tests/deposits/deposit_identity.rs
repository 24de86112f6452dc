//! A deposit's identity: a token transfer keeps its id and `dedup_key` when a
//! reorg re-includes its transaction elsewhere in the block, rows stored
//! before the key changed keep theirs through the upgrade, and a deposit
//! names the sender's account only within the receiver's organization.

use crate::common;

use std::collections::BTreeSet;

use alloy::{
    primitives::{Address, B256, U256},
    providers::Provider,
};
use common::{
    Anvil, Backend, CHAIN, TestDb, add_account, anvil::Mined, catch_up, chain_config, db::BACKENDS,
};
use custody_indexer::deposits::commit;
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    chain::Chain,
    deposits::resource::{Deposit, DepositStatus, Detected, Position, SourceType, TokenTransfer},
    evm::{EvmWatcher, Tick},
    store::{CursorMove, NewAccount, ScanCommit, Store},
};
use sqlx::AnyPool;

async fn watcher(anvil: &Anvil, store: &Store, token: Address) -> EvmWatcher {
    let config = chain_config(&[anvil.url()], Some(&token.to_checksum(None)), "");
    EvmWatcher::connect(config, store.clone()).await.expect("watcher connects")
}

/// Where a transaction is now: its block and the block-wide index of its first log.
async fn placed(anvil: &Anvil, tx: B256) -> (u64, u64) {
    let receipt = anvil.provider.get_transaction_receipt(tx).await.unwrap().unwrap();
    (receipt.block_number.unwrap(), receipt.inner.logs()[0].log_index.unwrap())
}

fn identities(deposits: &[Deposit]) -> BTreeSet<(String, String, String)> {
    deposits.iter().map(|d| (d.id.clone(), d.dedup_key.clone(), d.amount.clone())).collect()
}

#[tokio::test]
async fn a_token_transfer_reincluded_behind_other_logs_keeps_its_deposit() {
    for backend in BACKENDS {
        reincluded_token_transfer(backend).await;
    }
}

async fn reincluded_token_transfer(backend: Backend) {
    let anvil = Anvil::start().await;
    let db = TestDb::new(backend).await;
    let [outsider, alice, carol] = [anvil.accounts[0], anvil.accounts[1], anvil.accounts[3]];
    add_account(&db.store, "alice", &alice.to_string()).await;
    let token = anvil.token(anvil.deploy_token("TUSD").await);
    token.mint(outsider, U256::from(1_000_000u64)).from(outsider).mined().await;
    let mut watcher = watcher(&anvil, &db.store, *token.address()).await;

    // Another transaction's log, then (next block) two identical transfers
    // to alice around one to an outsider: two deposits, one transaction.
    let other = token.transfer(carol, U256::from(9u64)).from(outsider).mined().await.transaction_hash;
    let amounts = vec![U256::from(5u64), U256::from(1u64), U256::from(5u64)];
    let batch = token.batchTransfer(vec![alice, carol, alice], amounts).from(outsider).mined().await;
    let deposit_tx = batch.transaction_hash;
    catch_up(&mut watcher).await;
    let before = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(before.len(), 2, "{backend:?}");
    assert!(before.iter().all(|d| d.status == DepositStatus::Pending && d.amount == "0.000005"));
    let (old_block, old_index) = placed(&anvil, deposit_tx).await;

    // Both blocks replaced; both transactions re-included in the first new
    // block, the other one first: the transfer's logs move behind its log.
    let raw = vec![(anvil.raw_transaction(other).await, 0), (anvil.raw_transaction(deposit_tx).await, 0)];
    anvil.reorg(2, raw).await;
    let (new_block, new_index) = placed(&anvil, deposit_tx).await;
    assert_ne!(new_block, old_block, "the transaction is in another block");
    assert_ne!(new_index, old_index, "its logs are at other block-wide indexes");
    let tick = watcher.tick().await.unwrap();
    assert!(matches!(tick, Tick::Reorged { .. }), "{tick:?}");
    catch_up(&mut watcher).await;

    let after = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(identities(&after), identities(&before), "the same deposits, same ids and dedup keys");
    assert!(after.iter().all(|d| d.status == DepositStatus::Pending));
    assert!(db.store.orphans(CHAIN).await.unwrap().is_empty(), "both were seen again in the new block");

    anvil.mine(3).await;
    catch_up(&mut watcher).await;
    let end = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(identities(&end), identities(&before));
    assert!(end.iter().all(|d| d.status == DepositStatus::Confirmed), "confirmed in the new block");
    // The outbox tells the same story: for each deposit its first event
    // (PENDING, id = dedup_key) and then CONFIRMED, nothing for any other id.
    let events = db.store.events_after("default", None, 100).await.unwrap();
    let ids: BTreeSet<String> =
        events.iter().map(|e| e.envelope["data"]["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids, end.iter().map(|d| d.id.clone()).collect());
    assert_eq!(events.len(), 4);
    for d in &end {
        let first = events.iter().find(|e| e.envelope["data"]["id"] == d.id.as_str()).unwrap();
        assert_eq!(first.id(), d.dedup_key);
    }
}

async fn add_to(store: &Store, organization: &str, id: &str, address: &str, chain: Chain) {
    common::identity(store, organization, &format!("identity-{id}")).await;
    accounts::add_account(
        store,
        NewAccount {
            watch_from: Default::default(),
            id: id.into(),
            organization: organization.into(),
            identity_id: format!("identity-{id}"),
            kind: AccountType::Segregated,
            request_id: None,
            addresses: vec![AccountAddress { chains: vec![chain], address: address.into() }],
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_deposit_names_the_senders_account_only_within_its_organization() {
    let anvil = Anvil::start().await;
    let db = TestDb::new(Backend::Postgres).await;
    let [outsider, alice, bob, carol] =
        [anvil.accounts[0], anvil.accounts[1], anvil.accounts[2], anvil.accounts[3]];
    custody_indexer::operators::tenants::create_bare_organization(&db.store, "other", None).await.unwrap();
    add_to(&db.store, "default", "alice", &alice.to_string(), CHAIN).await;
    add_to(&db.store, "other", "bob", &bob.to_string(), CHAIN).await;
    add_to(&db.store, "default", "carol", &carol.to_string(), CHAIN).await;
    let token = anvil.token(anvil.deploy_token("TUSD").await);
    token.mint(alice, U256::from(1_000u64)).from(outsider).mined().await;
    token.mint(bob, U256::from(1_000u64)).from(outsider).mined().await;
    let mut watcher = watcher(&anvil, &db.store, *token.address()).await;

    anvil.send_eth(alice, bob, U256::from(11u64)).await;
    token.transfer(bob, U256::from(12u64)).from(alice).mined().await;
    token.transfer(alice, U256::from(13u64)).from(bob).mined().await;
    anvil.send_eth(alice, carol, U256::from(14u64)).await;
    token.transfer(carol, U256::from(15u64)).from(alice).mined().await;
    catch_up(&mut watcher).await;

    let mut found: Vec<_> = db
        .store
        .deposits_on_chain(CHAIN)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.account_id, d.amount, d.source_type, d.source_account_id))
        .collect();
    found.sort();
    let wei = |n: u64| format!("0.0000000000000000{n}");
    let micro = |n: u64| format!("0.0000{n}");
    let from_alice = (SourceType::Account, Some("alice".to_string()));
    let minted = "0.001".to_string();
    let expected = vec![
        ("alice".to_string(), micro(13), SourceType::OnChain, None),
        ("alice".to_string(), minted.clone(), SourceType::OnChain, None),
        ("bob".to_string(), wei(11), SourceType::OnChain, None),
        ("bob".to_string(), micro(12), SourceType::OnChain, None),
        ("bob".to_string(), minted, SourceType::OnChain, None),
        ("carol".to_string(), wei(14), from_alice.0, from_alice.1.clone()),
        ("carol".to_string(), micro(15), from_alice.0, from_alice.1),
    ];
    assert_eq!(found, expected);
    // Nor does bob's organization learn it through its events.
    let events = db.store.events_after("other", None, 100).await.unwrap();
    assert!(!events.is_empty());
    for event in events {
        let data = &event.envelope["data"];
        assert_eq!(data["source_type"], "ON_CHAIN");
        assert!(data.get("source_account_id").is_none(), "{data}");
    }
}

const SOLANA: Chain = Chain::SolanaDevnet;

fn solana_deposit(tx: &str, account: &str, source: Option<&str>, lamports: u64) -> Detected {
    Detected {
        chain: SOLANA,
        tx_hash: tx.into(),
        position: Position::Lamports { wallet: format!("wallet-{account}") },
        block_number: 7,
        block_hash: "slot7".into(),
        block_time_ms: 1_700_000_000_000,
        account_id: account.into(),
        account_address: format!("wallet-{account}"),
        source_address: "sender".into(),
        source_account_id: source.map(String::from),
        currency_symbol: "SOL".into(),
        amount: Amount::from_raw(U256::from(lamports), 9),
    }
}

fn backfill(chain: Chain, deposits: Vec<Detected>) -> ScanCommit {
    ScanCommit {
        chain,
        from: 0,
        to: 20,
        head: 20,
        blocks: vec![],
        deposits,
        confirmed_through: None,
        cursor: CursorMove::Backfill,
        keep_blocks: 0,
    }
}

#[tokio::test]
async fn the_store_keeps_a_source_account_of_another_organization_out_on_every_chain() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        custody_indexer::operators::tenants::create_bare_organization(store, "other", None).await.unwrap();
        // Solana addresses: the rule is the store's, whatever decoded the deposit.
        let key = |n: u8| solana_address(n);
        add_to(store, "default", "alice", &key(1), SOLANA).await;
        add_to(store, "other", "bob", &key(2), SOLANA).await;
        add_to(store, "default", "carol", &key(3), SOLANA).await;
        let scan = backfill(
            SOLANA,
            vec![
                solana_deposit("sig-1", "bob", Some("alice"), 1),
                solana_deposit("sig-2", "carol", Some("alice"), 2),
                solana_deposit("sig-3", "alice", Some("nobody"), 3),
            ],
        );
        commit::commit_scan(store, &scan).await.unwrap();
        let mut found: Vec<_> = store
            .deposits_on_chain(SOLANA)
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.account_id, d.source_type, d.source_account_id))
            .collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                ("alice".into(), SourceType::OnChain, None),
                ("bob".into(), SourceType::OnChain, None),
                ("carol".into(), SourceType::Account, Some("alice".into())),
            ],
            "{backend:?}"
        );
    }
}

/// A valid base58 Solana address made of one repeated byte.
fn solana_address(byte: u8) -> String {
    bs58::encode([byte; 32]).into_string()
}

// ---- The upgrade: token positions stored under the old key. ----

const SENDER: &str = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";
const RECEIVER: &str = "0xdAC17F958D2ee523a2206206994597C13D831ec7";

/// A row exactly as the old decoder stored it.
struct OldRow<'a> {
    id: &'a str,
    tx: u8,
    position: &'a str,
    raw: u64,
    block: u64,
    status: &'a str,
    orphaned: Option<i64>,
    source_account: Option<&'a str>,
}

/// An account with one address, inserted as the store before identities did.
async fn add_old(url: &str, organization: &str, id: &str, address: &str, chain: Chain) {
    let pool = AnyPool::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO accounts (id, organization_id, identity_id, type, status, created_at)
         VALUES ($1, $2, $3, 'SEGREGATED', 'ACTIVE', 0)",
    )
    .bind(id)
    .bind(organization)
    .bind(format!("identity-{id}"))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE store_meta SET value = value + 1 WHERE key = 'accounts_version'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO account_addresses (chain, address, account_id, version, registered_at, watch_from, live_from,
             gap_next)
         VALUES ($1, $2, $3, (SELECT value FROM store_meta WHERE key = 'accounts_version'), 0, 0, 0, 0)",
    )
    .bind(chain.as_str())
        .bind(address)
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

async fn insert_old(url: &str, row: OldRow<'_>) {
    let pool = AnyPool::connect(url).await.unwrap();
    let symbol = if row.position == "native" { "ETH" } else { "USDC" };
    sqlx::query(
        "INSERT INTO deposits (id, dedup_key, chain, tx_hash, position, account_id, account_address,
            source_address, source_type, source_account_id, currency_symbol, amount_raw, decimals, status,
            block_number, block_hash, orphaned_at_block, created_at, confirmed_at, updated_at, announced_status)
         VALUES ($1, $2, $3, $4, $5, 'alice', $6, $7, $8, $9, $10, $11, 6, $12, $13, $14, $15, 0, NULL, 0, $12)",
    )
    .bind(row.id)
    .bind(format!("key-{}", row.id))
    .bind(CHAIN.as_str())
    .bind(format!("0x{:064x}", row.tx))
    .bind(row.position)
    .bind(RECEIVER)
    .bind(SENDER)
    .bind(if row.source_account.is_some() { "ACCOUNT" } else { "ON_CHAIN" })
    .bind(row.source_account)
    .bind(symbol)
    .bind(row.raw.to_string())
    .bind(row.status)
    .bind(row.block as i64)
    .bind(format!("0xb{}", row.block))
    .bind(row.orphaned)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

/// A token deposit as the decoder now reports it.
fn decoded(tx: u8, raw: u64, occurrence: u32, block: u64) -> Detected {
    Detected {
        chain: CHAIN,
        tx_hash: format!("0x{tx:064x}"),
        position: Position::Log(TokenTransfer::new("USDC", SENDER, RECEIVER, &raw.to_string(), occurrence)),
        block_number: block,
        block_hash: format!("0xb{block}"),
        block_time_ms: 0,
        account_id: "alice".into(),
        account_address: RECEIVER.into(),
        source_address: SENDER.into(),
        source_account_id: None,
        currency_symbol: "USDC".into(),
        amount: Amount::from_raw(U256::from(raw), 6),
    }
}

#[tokio::test]
async fn token_deposits_stored_before_the_upgrade_keep_their_identity() {
    for backend in BACKENDS {
        // The store before the migration that changed the token key.
        let db = TestDb::migrated_before(backend, 8).await;
        let store = &db.store;
        custody_indexer::operators::tenants::create_bare_organization(store, "other", None).await.unwrap();
        // Accounts as they were registered before identities existed.
        add_old(&db.url, "default", "alice", RECEIVER, CHAIN).await;
        add_old(&db.url, "default", "sam", SENDER, Chain::EthereumMainnet).await;
        add_old(&db.url, "other", "bob", &Address::repeat_byte(0xbb).to_string(), CHAIN).await;
        let row = |id, tx, position, raw| OldRow {
            id,
            tx,
            position,
            raw,
            block: 10,
            status: "CONFIRMED",
            orphaned: None,
            source_account: None,
        };
        // Transaction 1: two identical transfers (log 7 before log 3 in
        // insertion, not in log order), another amount, and its native value.
        insert_old(&db.url, row("t1-b", 1, "log:7", 5)).await;
        insert_old(&db.url, row("t1-a", 1, "log:3", 5)).await;
        insert_old(&db.url, row("t1-c", 1, "log:5", 6)).await;
        insert_old(&db.url, row("t1-n", 1, "native", 4)).await;
        // Transaction 2 was stored twice by a reorg under the old key: the row
        // of the replaced block FAILED, the live one is in block 11.
        let failed = OldRow { status: "FAILED", orphaned: Some(10), ..row("t2-old", 2, "log:0", 8) };
        insert_old(&db.url, failed).await;
        insert_old(&db.url, OldRow { status: "PENDING", block: 11, ..row("t2-live", 2, "log:4", 8) }).await;
        // Sender accounts of the receiver's organization and of another one.
        insert_old(&db.url, OldRow { source_account: Some("sam"), ..row("t3", 3, "log:1", 9) }).await;
        insert_old(&db.url, OldRow { source_account: Some("bob"), ..row("t4", 4, "log:1", 9) }).await;

        store.migrate().await.unwrap();
        // The labels the upgrade gave the identities are sealed when the key is first given.
        let store = &common::db::unlocked(store).await;
        let stored = store.deposits_on_chain(CHAIN).await.unwrap();
        assert_eq!(stored.len(), 8, "{backend:?}");
        // Each account's identity was created by the upgrade, active.
        let bobs = store.identity("other", "identity-bob").await.unwrap();
        assert_eq!((bobs.status.as_str(), bobs.account_ids.as_slice()), ("ACTIVE", &["bob".to_string()][..]));
        assert!(
            store.identity("default", "identity-bob").await.is_err(),
            "identities stay in their organization"
        );

        // A backfill after the upgrade decodes the same transfers: it finds
        // every row, adds none and changes none.
        let scan = backfill(
            CHAIN,
            vec![
                decoded(1, 5, 0, 10),
                decoded(1, 5, 1, 10),
                decoded(1, 6, 0, 10),
                Detected { position: Position::Native, ..decoded(1, 4, 0, 10) },
                decoded(2, 8, 0, 11),
                decoded(3, 9, 0, 10),
                decoded(4, 9, 0, 10),
            ],
        );
        let changed = commit::commit_scan(store, &scan).await.unwrap();
        assert!(changed.is_empty(), "{backend:?}: {changed:?}");
        assert_eq!(store.deposits_on_chain(CHAIN).await.unwrap(), stored);
        let t2: Vec<_> =
            stored.iter().filter(|d| d.id.starts_with("t2")).map(|d| (&*d.id, d.status)).collect();
        assert_eq!(t2, vec![("t2-old", DepositStatus::Failed), ("t2-live", DepositStatus::Pending)]);

        // The upgrade also stopped naming another organization's account.
        let source = |id: &str| {
            let d = stored.iter().find(|d| d.id == id).unwrap();
            (d.source_type, d.source_account_id.clone())
        };
        assert_eq!(source("t3"), (SourceType::Account, Some("sam".into())));
        assert_eq!(source("t4"), (SourceType::OnChain, None));
    }
}

// ---- The upgrade: long positions stored before they were compact. ----

/// A transfer of one of the platform's own transactions, as stored before.
async fn insert_own_old(url: &str, tx: u8, position: &str) {
    let pool = AnyPool::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO own_transfers (chain, tx_hash, position, kind, account_id, account_address, source_address,
            currency_symbol, amount_raw, decimals, block_number, block_hash, created_at, recorded_at)
         VALUES ($1, $2, $3, 'TOP_UP', 'alice', $4, $5, 'USDC', '7', 6, 10, '0xb10', 0, 0)",
    )
    .bind(CHAIN.as_str())
    .bind(format!("0x{tx:064x}"))
    .bind(position)
    .bind(RECEIVER)
    .bind(SENDER)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

/// A PENDING deposit of transaction 1 in block 10, as stored before.
fn pending<'a>(id: &'a str, position: &'a str, raw: u64) -> OldRow<'a> {
    OldRow { id, tx: 1, position, raw, block: 10, status: "PENDING", orphaned: None, source_account: None }
}

async fn stored_positions(url: &str, table: &str) -> BTreeSet<String> {
    let pool = AnyPool::connect(url).await.unwrap();
    let sql = format!("SELECT position FROM {table}");
    let positions = sqlx::query_scalar(&sql).fetch_all(&pool).await.unwrap();
    pool.close().await;
    positions.into_iter().collect()
}

#[tokio::test]
async fn long_positions_stored_before_the_upgrade_are_compacted_and_found_again() {
    for backend in BACKENDS {
        let db = TestDb::migrated_before(backend, 30).await;
        let store = &common::db::unlocked(&db.store).await;
        add_to(store, "default", "alice", RECEIVER, CHAIN).await;
        let transfers = [decoded(1, 5, 0, 10), decoded(1, 5, 1, 10), decoded(1, 6, 0, 10)];
        for (i, d) in transfers.iter().enumerate() {
            let (id, raw, position) = (format!("t{i}"), d.amount.raw().to::<u64>(), d.position.to_string());
            assert!(position.starts_with("log:USDC:0x"), "the readable form: {position}");
            insert_old(&db.url, pending(&id, &position, raw)).await;
        }
        let native = Detected { position: Position::Native, ..decoded(1, 4, 0, 10) };
        insert_old(&db.url, pending("tn", "native", 4)).await;
        insert_own_old(&db.url, 9, &decoded(9, 7, 0, 10).position.to_string()).await;

        // On PostgreSQL, two instances opening the upgraded store at once:
        // one rewrites, the other waits and finds it done. (One process
        // migrates a SQLite file.)
        if backend == Backend::Postgres {
            let (a, b) = tokio::join!(Store::open(&db.url), Store::open(&db.url));
            let _ = (a.unwrap(), b.unwrap());
        } else {
            store.migrate().await.unwrap();
        }
        let mut compact: BTreeSet<String> = transfers.iter().map(|d| d.position.key()).collect();
        assert!(compact.iter().all(|p| p.len() == 26), "{compact:?}");
        compact.insert("native".into());
        assert_eq!(stored_positions(&db.url, "deposits").await, compact, "{backend:?}");
        let own = BTreeSet::from([decoded(9, 7, 0, 10).position.key()]);
        assert_eq!(stored_positions(&db.url, "own_transfers").await, own, "{backend:?}");

        // A second open changes nothing, and a backfill of the same
        // transfers finds every row: none added, none changed.
        store.migrate().await.unwrap();
        let stored = store.deposits_on_chain(CHAIN).await.unwrap();
        assert_eq!(stored.len(), 4);
        let mut rescan = transfers.to_vec();
        rescan.push(native);
        let changed = commit::commit_scan(store, &backfill(CHAIN, rescan)).await.unwrap();
        assert!(changed.is_empty(), "{backend:?}: {changed:?}");
        assert_eq!(store.deposits_on_chain(CHAIN).await.unwrap(), stored);
    }
}

#[tokio::test]
async fn a_colliding_compact_position_never_moves_another_transfers_deposit() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        add_to(store, "default", "alice", RECEIVER, CHAIN).await;
        // A stored deposit of 6 whose key is that of a transfer of 5: what a
        // 128-bit collision of two transfers' positions would store.
        let key = decoded(1, 5, 0, 10).position.key();
        insert_old(&db.url, pending("t", &key, 6)).await;
        let stored = store.deposits_on_chain(CHAIN).await.unwrap();

        // The transfer of 5 seen in another block updates nothing.
        let changed = commit::commit_scan(store, &backfill(CHAIN, vec![decoded(1, 5, 0, 12)])).await.unwrap();
        assert!(changed.is_empty(), "{backend:?}: {changed:?}");
        assert_eq!(store.deposits_on_chain(CHAIN).await.unwrap(), stored, "{backend:?}");
        let pool = AnyPool::connect(&db.url).await.unwrap();
        let block: String =
            sqlx::query_scalar("SELECT block_hash FROM deposits").fetch_one(&pool).await.unwrap();
        assert_eq!(block, "0xb10", "{backend:?}: the deposit stays in its block");
        pool.close().await;
    }
}
