//! The Solana watcher against a real local network: SOL, SPL Token and
//! Token-2022 deposits, new and existing token accounts, version-0
//! transactions with lookup tables, what must produce nothing, both scanning
//! strategies, and `PENDING` → `CONFIRMED` at finalization.

use crate::common;

use std::path::Path;

use alloy::primitives::U256;
use common::{
    Backend, TestDb,
    solana::{SOL, SolanaNode, TOKEN, TOKEN_2022, ata, create_ata, mint_to, transfer_checked, transfer_sol},
};
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    assets::AssetType,
    chain::Chain,
    config::{ChainConfig, Chains},
    deposits::resource::{DepositStatus, SourceType},
    evm::Tick,
    solana::SolanaWatcher,
    store::{NewAccount, Store},
};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

const CHAIN: Chain = Chain::SolanaDevnet;

struct Mints {
    usd: Pubkey,
    t22: Pubkey,
    spam: Pubkey,
}

fn chain_config(node: &SolanaNode, mints: &Mints, strategy: &str) -> ChainConfig {
    let text = format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 200\nstart_block = {}\nstrategy = \"{strategy}\"\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n\
         [[assets]]\nsymbol = \"TUSD\"\ncontract_address = \"{}\"\ndecimals = 6\ntoken_program = \"{TOKEN}\"\n\
         [[assets]]\nsymbol = \"T22\"\ncontract_address = \"{}\"\ndecimals = 9\ntoken_program = \"{TOKEN_2022}\"\n",
        node.genesis_hash, node.url, node.first_slot, mints.usd, mints.t22
    );
    ChainConfig::from_toml(&text, Path::new("solana-test.toml"), &|_| None).unwrap()
}

pub(crate) async fn add_wallet(store: &Store, id: &str, wallet: &Pubkey) {
    common::identity(store, "default", &format!("identity-{id}")).await;
    accounts::add_account(
        store,
        NewAccount {
            watch_from: Default::default(),
            id: id.into(),
            organization: "default".into(),
            identity_id: format!("identity-{id}"),
            kind: AccountType::Segregated,
            request_id: None,
            addresses: vec![AccountAddress { chains: vec![CHAIN], address: wallet.to_string() }],
        },
    )
    .await
    .unwrap();
}

/// Set by scripts/solana-fidelity.sh when the tests run against Agave's test
/// validator, whose getTransaction answers only for finalized slots.
fn fidelity() -> bool {
    std::env::var_os("CUSTODY_INDEXER_FIDELITY").is_some()
}

/// Steps until the watcher has read everything up to the current confirmed
/// slot: for the blocks strategy, until its cursor passed that slot.
pub(crate) async fn catch_up(watcher: &mut SolanaWatcher, node: &SolanaNode) {
    let target = node.slot(CommitmentConfig::confirmed()).await;
    let blocks = watcher.config().strategy == custody_indexer::config::Strategy::Blocks;
    for _ in 0..500 {
        let tick = match watcher.tick().await {
            Ok(tick) => tick,
            // A transaction listed before the node serves it: the next step reads it.
            Err(error) if error.is_retryable() => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
            Err(error) => panic!("tick: {error}"),
        };
        let done = match tick {
            Tick::Scanned { to, caught_up, .. } => caught_up && to >= target,
            Tick::Idle { .. } => !blocks,
            Tick::Reorged { .. } => false,
        };
        if done {
            return;
        }
    }
    panic!("watcher did not catch up to slot {target}");
}

type Row = (String, String, String, SourceType, Option<String>);

async fn found(store: &Store) -> Vec<Row> {
    let mut rows: Vec<Row> = store
        .deposits_on_chain(CHAIN)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.account_id, d.currency_symbol, d.amount, d.source_type, d.source_account_id))
        .collect();
    rows.sort();
    rows
}

/// Makes every kind of transfer the watcher must judge; returns the
/// deposits it must find.
async fn make_transfers(node: &SolanaNode, alice: &Keypair, bob: &Pubkey) -> (Mints, u64) {
    let outsider = node.funded(100 * SOL).await;
    let o = outsider.pubkey();
    let a = alice.pubkey();
    let usd = node.create_mint(&outsider, TOKEN, 6).await;
    let t22 = node.create_mint(&outsider, TOKEN_2022, 9).await;
    let spam = node.create_mint(&outsider, TOKEN, 6).await;
    let mints = Mints { usd, t22, spam };
    for (mint, program) in [(usd, TOKEN), (t22, TOKEN_2022), (spam, TOKEN)] {
        let create = create_ata(&o, &o, &mint, program);
        node.send(
            &[create, mint_to(program, &mint, &ata(&o, &mint, program), &o, 1_000 * SOL)],
            &outsider,
            &[],
        )
        .await;
    }

    // SOL from outside, to alice (who holds nothing yet).
    node.send(&[transfer_sol(&o, &a, 3 * SOL / 2)], &outsider, &[]).await;
    // SPL: a transfer that creates alice's token account, then one into it.
    let to_alice =
        |amount| transfer_checked(TOKEN, &ata(&o, &usd, TOKEN), &usd, &ata(&a, &usd, TOKEN), &o, amount, 6);
    node.send(&[create_ata(&o, &a, &usd, TOKEN), to_alice(2_500_000)], &outsider, &[]).await;
    node.send(&[to_alice(1_000_000)], &outsider, &[]).await;
    // Token-2022, creating the account in the same transaction.
    let t22_to_alice = transfer_checked(
        TOKEN_2022,
        &ata(&o, &t22, TOKEN_2022),
        &t22,
        &ata(&a, &t22, TOKEN_2022),
        &o,
        10_000_000,
        9,
    );
    node.send(&[create_ata(&o, &a, &t22, TOKEN_2022), t22_to_alice], &outsider, &[]).await;
    // Version 0: bob's address comes from a lookup table.
    let table = node.lookup_table(&outsider, vec![*bob]).await;
    node.send_v0(&[transfer_sol(&o, bob, SOL / 4)], &outsider, &[table]).await;

    // Nothing: a failed transfer, an unlisted mint, outgoing transfers.
    node.send_failing(
        &[transfer_checked(TOKEN, &ata(&o, &usd, TOKEN), &usd, &ata(&a, &usd, TOKEN), &o, u64::MAX, 6)],
        &outsider,
    )
    .await;
    let spam_to_alice =
        transfer_checked(TOKEN, &ata(&o, &spam, TOKEN), &spam, &ata(&a, &spam, TOKEN), &o, 5, 6);
    node.send(&[create_ata(&o, &a, &spam, TOKEN), spam_to_alice], &outsider, &[]).await;
    node.send(&[transfer_sol(&a, &o, SOL / 10)], alice, &[]).await;
    // Account to account: alice pays bob.
    node.send(&[transfer_sol(&a, bob, SOL / 5)], alice, &[]).await;
    let last = node.slot(CommitmentConfig::confirmed()).await;
    (mints, last)
}

fn expected() -> Vec<Row> {
    let on_chain = |account: &str, symbol: &str, amount: &str| {
        (account.to_string(), symbol.to_string(), amount.to_string(), SourceType::OnChain, None)
    };
    let mut rows = vec![
        on_chain("alice", "SOL", "1.5"),
        on_chain("alice", "T22", "0.01"),
        on_chain("alice", "TUSD", "1"),
        on_chain("alice", "TUSD", "2.5"),
        on_chain("bob", "SOL", "0.25"),
        ("bob".into(), "SOL".into(), "0.2".into(), SourceType::Account, Some("alice".into())),
    ];
    rows.sort();
    rows
}

#[tokio::test]
async fn both_strategies_find_exactly_the_deposits_and_confirm_them_when_final() {
    let node = SolanaNode::start().await;
    let alice = Keypair::new();
    let bob = Keypair::new().pubkey();
    let (mints, last) = make_transfers(&node, &alice, &bob).await;
    let _ = &mints.spam;

    let mut expected = expected();
    for (strategy, backend, fresh_lamports) in
        [("blocks", Backend::Sqlite, 7), ("signatures", Backend::Postgres, 9)]
    {
        let db = TestDb::new(backend).await;
        add_wallet(&db.store, "alice", &alice.pubkey()).await;
        add_wallet(&db.store, "bob", &bob).await;
        let mut watcher =
            SolanaWatcher::connect(chain_config(&node, &mints, strategy), db.store.clone()).await.unwrap();
        catch_up(&mut watcher, &node).await;
        assert_eq!(found(&db.store).await, expected, "{strategy}");

        // Seen at `confirmed`, a fresh deposit is PENDING until its slot is final.
        let payer = node.funded(SOL).await;
        node.send(&[transfer_sol(&payer.pubkey(), &bob, fresh_lamports)], &payer, &[]).await;
        let amount = format!("0.00000000{fresh_lamports}");
        // A node may list a new signature a moment after confirming it.
        let mut fresh = None;
        for _ in 0..100 {
            catch_up(&mut watcher, &node).await;
            let deposits = db.store.deposits_of_account("bob").await.unwrap();
            fresh = deposits.into_iter().find(|d| d.amount == amount);
            if fresh.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let fresh = fresh.expect("the fresh deposit");
        if !(fidelity() && strategy == "signatures") {
            assert_eq!(fresh.status, DepositStatus::Pending, "{strategy}");
            assert_eq!(fresh.confirmed_at, None);
        }
        let last = node.slot(CommitmentConfig::confirmed()).await.max(last);

        node.wait_finalized(last).await;
        catch_up(&mut watcher, &node).await;
        let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
        assert!(
            deposits
                .iter()
                .all(|d| d.status == DepositStatus::Confirmed
                    && d.confirmed_at.is_some_and(|t| t.timestamp() > 0)),
            "{strategy}: {deposits:?}"
        );
        expected.push(("bob".into(), "SOL".into(), amount, SourceType::OnChain, None));
        expected.sort();
        assert_eq!(found(&db.store).await, expected, "{strategy}: confirmation adds nothing");

        // Each deposit announced itself PENDING, then CONFIRMED, in commit order.
        let events = db.store.events_after("default", None, 100).await.unwrap();
        let mut by_deposit: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for event in &events {
            let data = &event.envelope["data"];
            by_deposit
                .entry(data["id"].as_str().unwrap().into())
                .or_default()
                .push(data["status"].as_str().unwrap().into());
        }
        assert_eq!(by_deposit.len(), expected.len(), "{strategy}");
        assert!(by_deposit.values().all(|s| s == &["PENDING", "CONFIRMED"]), "{strategy}: {by_deposit:?}");
    }
}

#[tokio::test]
async fn unavailable_slots_and_rate_limits_never_move_the_cursor_past_unread_slots() {
    let node = SolanaNode::start().await;
    let outsider = node.funded(10 * SOL).await;
    let alice = Keypair::new().pubkey();
    let mints = Mints {
        usd: node.create_mint(&outsider, TOKEN, 6).await,
        t22: Pubkey::new_unique(),
        spam: Pubkey::new_unique(),
    };
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice).await;

    let rpc = common::proxy::start(node.url.clone()).await;
    let mut config = chain_config(&node, &mints, "blocks");
    config.rpc_urls = vec![custody_indexer::redact::RpcUrl::parse(&rpc.url).unwrap()];
    let mut watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    catch_up(&mut watcher, &node).await;
    let before = db.store.chain_state(CHAIN).await.unwrap().unwrap().next_block;

    node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let missing = "Slot was skipped, or missing in long-term storage".to_string();
    rpc.faults.method_errors.lock().unwrap().push(("getBlock".into(), -32009, missing, 1_000));
    let error = watcher.tick().await.unwrap_err();
    assert!(
        matches!(error, custody_indexer::deposits::watcher::WatchError::SlotUnavailable { .. }),
        "{error}"
    );
    assert!(error.is_retryable());
    assert!(error.to_string().contains("cursor stays"), "{error}");
    assert_eq!(
        db.store.chain_state(CHAIN).await.unwrap().unwrap().next_block,
        before,
        "the cursor did not move"
    );
    assert!(db.store.deposits_on_chain(CHAIN).await.unwrap().is_empty());

    // The node recovers; rate limits on the way are retried.
    rpc.faults.method_errors.lock().unwrap().clear();
    rpc.faults.status.store(429, std::sync::atomic::Ordering::SeqCst);
    rpc.faults.fail_next.store(2, std::sync::atomic::Ordering::SeqCst);
    catch_up(&mut watcher, &node).await;
    assert_eq!(
        found(&db.store).await,
        vec![("alice".into(), "SOL".into(), "1".into(), SourceType::OnChain, None)]
    );
}

/// A local network, a funded outsider, `alice` watched, and a blocks
/// watcher reaching the node through a fault proxy.
struct Watched {
    node: SolanaNode,
    outsider: Keypair,
    alice: Pubkey,
    db: TestDb,
    rpc: common::proxy::FaultyRpc,
    watcher: SolanaWatcher,
}

impl Watched {
    async fn through_proxy(backend: Backend) -> Self {
        let node = SolanaNode::start().await;
        let outsider = node.funded(10 * SOL).await;
        let alice = Keypair::new().pubkey();
        let mints =
            Mints { usd: Pubkey::new_unique(), t22: Pubkey::new_unique(), spam: Pubkey::new_unique() };
        let db = TestDb::new(backend).await;
        add_wallet(&db.store, "alice", &alice).await;
        let rpc = common::proxy::start(node.url.clone()).await;
        let mut config = chain_config(&node, &mints, "blocks");
        config.rpc_urls = vec![custody_indexer::redact::RpcUrl::parse(&rpc.url).unwrap()];
        let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
        Self { node, outsider, alice, db, rpc, watcher }
    }
}

#[tokio::test]
async fn a_deposit_whose_slot_never_becomes_final_fails() {
    let Watched { node, outsider, alice, db, rpc, mut watcher } =
        Watched::through_proxy(Backend::Postgres).await;

    let kept = node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let kept_slot = node.slot_of(&kept).await;
    while node.slot(CommitmentConfig::confirmed()).await <= kept_slot {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lost = node.send(&[transfer_sol(&outsider.pubkey(), &alice, 2 * SOL)], &outsider, &[]).await;
    let lost_slot = node.slot_of(&lost).await;
    assert_ne!(kept_slot, lost_slot);
    // The cluster "skips" the second transfer's slot: finalized blocks leave it out.
    rpc.faults.skipped_slots.lock().unwrap().push(lost_slot);
    catch_up(&mut watcher, &node).await;
    node.wait_finalized(node.slot(CommitmentConfig::confirmed()).await).await;
    catch_up(&mut watcher, &node).await;

    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    let status = |tx: &str| deposits.iter().find(|d| d.transaction_hash == tx).unwrap().status;
    assert_eq!(status(&kept), DepositStatus::Confirmed);
    assert_eq!(status(&lost), DepositStatus::Failed);
}

#[tokio::test]
async fn a_hole_in_the_nodes_ledger_fails_no_deposit() {
    let Watched { node, outsider, alice, db, rpc, mut watcher } =
        Watched::through_proxy(Backend::Sqlite).await;

    // The node lists finalized blocks on both sides of the deposit's slot
    // but not the slot itself, as after a restore from a snapshot: it reads
    // as a skip, yet the transaction has a status.
    let deposit = node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let slot = node.slot_of(&deposit).await;
    rpc.faults.ledger_holes.lock().unwrap().push(slot);
    catch_up(&mut watcher, &node).await;
    node.wait_finalized(node.slot(CommitmentConfig::confirmed()).await).await;
    catch_up(&mut watcher, &node).await;
    let status = || async { db.store.deposits_on_chain(CHAIN).await.unwrap()[0].status };
    assert_eq!(status().await, DepositStatus::Pending, "a hole proves nothing");

    // A node whose ledger holds the slot settles it.
    rpc.faults.ledger_holes.lock().unwrap().clear();
    catch_up(&mut watcher, &node).await;
    assert_eq!(status().await, DepositStatus::Confirmed);
}

#[tokio::test]
async fn a_node_of_another_cluster_is_refused() {
    let node = SolanaNode::start().await;
    let db = TestDb::new(Backend::Sqlite).await;
    let mints = Mints { usd: Pubkey::new_unique(), t22: Pubkey::new_unique(), spam: Pubkey::new_unique() };
    let mut config = chain_config(&node, &mints, "blocks");
    config.genesis_hash = Some("5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d".into());
    let error = SolanaWatcher::connect(config, db.store.clone()).await.err().expect("refused");
    assert!(matches!(error, custody_indexer::deposits::watcher::WatchError::WrongCluster { .. }), "{error}");
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn balances_are_read_from_the_cluster() {
    let node = SolanaNode::start().await;
    let alice = Keypair::new();
    let bob = Keypair::new().pubkey();
    let (mints, _) = make_transfers(&node, &alice, &bob).await;
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice.pubkey()).await;
    let account = db.store.account("alice").await.unwrap();

    let mut chains = Chains::default();
    chains.insert(chain_config(&node, &mints, "blocks"));
    let reader = custody_indexer::family::balance_reader(chains);
    let lamports = node.rpc.get_balance(&alice.pubkey()).await.unwrap();
    let balances = reader.balances(&account, None, |_, _| U256::ZERO).await.unwrap();
    let rows: Vec<(&str, &str, &str, AssetType)> = balances
        .iter()
        .map(|b| (b.symbol.as_str(), b.total.as_str(), b.available.as_str(), b.kind))
        .collect();
    let sol = Amount::from_raw(U256::from(lamports), 9).to_string();
    assert_eq!(
        rows,
        [
            ("SOL", sol.as_str(), sol.as_str(), AssetType::Base),
            ("TUSD", "3.5", "3.5", AssetType::SplToken),
            ("T22", "0.01", "0.01", AssetType::SplToken),
        ],
        "the unlisted mint is not a balance"
    );
    assert!(balances.iter().all(|b| b.chain == CHAIN));
    assert_eq!(balances[1].contract_address, mints.usd.to_string());

    // What transfers in flight hold is not available.
    let held = |_: Chain, symbol: &str| if symbol == "TUSD" { U256::from(500_000u64) } else { U256::ZERO };
    let balances = reader.balances(&account, Some(CHAIN), held).await.unwrap();
    assert_eq!((balances[1].total.as_str(), balances[1].available.as_str()), ("3.5", "3"));
    assert!(reader.balances(&account, Some(Chain::SolanaMainnet), held).await.unwrap().is_empty());
}

/// A proxy whose node's ledger starts at `first_available`, as a
/// non-archive node's does, and a config reading through it.
async fn pruned_at(node: &SolanaNode, first_available: u64) -> (common::proxy::FaultyRpc, ChainConfig) {
    let rpc = common::proxy::start(node.url.clone()).await;
    rpc.faults.pruned_below.store(first_available, std::sync::atomic::Ordering::SeqCst);
    let mints = Mints { usd: Pubkey::new_unique(), t22: Pubkey::new_unique(), spam: Pubkey::new_unique() };
    let mut config = chain_config(node, &mints, "blocks");
    config.rpc_urls = vec![custody_indexer::redact::RpcUrl::parse(&rpc.url).unwrap()];
    config.max_block_range = 20;
    (rpc, config)
}

#[tokio::test]
async fn a_live_watcher_on_a_pruned_node_keeps_its_cursor_below_the_unread_slots_and_warns() {
    let node = SolanaNode::start().await;
    let start = node.slot(CommitmentConfig::confirmed()).await;
    let first_available = start + 40;
    let (_rpc, mut config) = pruned_at(&node, first_available).await;
    // The watcher resumes at `start`, as after an outage longer than the
    // node keeps its ledger.
    config.start_block = Some(start);
    while node.slot(CommitmentConfig::confirmed()).await < first_available + 20 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &Keypair::new().pubkey()).await;
    let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));
    // The step fails, is recorded for the health report and logged at warn
    // level, and is retried.
    let health = common::eventually(std::time::Duration::from_secs(30), "the failure recorded", || async {
        let health = db.store.chain_health().await.unwrap();
        health.into_iter().find(|h| h.chain == CHAIN && h.last_error.is_some())
    })
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert_eq!(health.last_error_kind.as_deref(), Some("pruned"));
    let error = health.last_error.unwrap();
    assert!(
        error.contains(&format!("below slot {first_available}, the first the RPC node still holds")),
        "{error}"
    );
    let state = db.store.chain_state(CHAIN).await.unwrap().unwrap();
    assert_eq!(state.next_block, start, "the cursor stays before the slots the node no longer holds");
}

#[tokio::test]
async fn a_pruned_listing_is_not_vouched_for_by_another_backends_first_available_block() {
    let node = SolanaNode::start().await;
    let outsider = node.funded(10 * SOL).await;
    let alice = Keypair::new().pubkey();
    // Slots below the deposit's that the archive backend holds.
    node.wait_finalized(node.first_slot + 20).await;
    let signature = node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let slot = node.slot_of(&signature).await;
    let first_available = slot + 10;
    node.wait_finalized(first_available + 20).await;
    // One URL: the backend that lists blocks keeps its ledger from
    // `first_available`, an archive one answers `getFirstAvailableBlock`.
    let (rpc, config) = pruned_at(&node, first_available).await;
    rpc.faults.archive_first_available.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(node.rpc.get_first_available_block().await.unwrap() < slot);
    let db = TestDb::new(Backend::Postgres).await;
    add_wallet(&db.store, "alice", &alice).await;
    let mut watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    let error = watcher
        .backfill_slots(slot - 5, Some(first_available + 10), &|_, _| {})
        .await
        .expect_err("no answer lists the deposit's slot: the backfill must not complete");
    assert!(error.to_string().contains(&format!("no answer covers slot {}", slot - 5)), "{error}");
    assert!(db.store.deposits_on_chain(CHAIN).await.unwrap().is_empty());
}

#[tokio::test]
async fn more_than_100_skipped_slots_below_a_backfill_range_do_not_stall_it() {
    let node = SolanaNode::start().await;
    let outsider = node.funded(10 * SOL).await;
    let alice = Keypair::new().pubkey();
    // Far enough above the ledger's first slot for 150 slots below it.
    while node.slot(CommitmentConfig::confirmed()).await < node.first_slot + 200 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let signature = node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let slot = node.slot_of(&signature).await;
    node.wait_finalized(slot + 5).await;
    // A full-history node on which the cluster skipped the 150 slots below
    // the deposit's.
    let (rpc, config) = pruned_at(&node, 0).await;
    rpc.faults.skipped_slots.lock().unwrap().extend(slot - 150..slot);
    let db = TestDb::new(Backend::Postgres).await;
    add_wallet(&db.store, "alice", &alice).await;
    let mut watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    let report =
        watcher.backfill_slots(slot, Some(slot + 5), &|_, _| {}).await.expect("the backfill completes");
    assert_eq!((report.from, report.to, report.deposits_found), (slot, slot + 5, 1));
    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(deposits.iter().map(|d| d.transaction_hash.clone()).collect::<Vec<_>>(), vec![signature]);
}
