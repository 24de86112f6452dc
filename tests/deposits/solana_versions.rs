//! Transaction versions on a real local network: legacy, version 0 (lookup
//! tables) and version 1 (SIMD-0385) side by side, found exactly by both
//! scanning strategies; a Token-2022 transfer fee credited net; lamports
//! paid out of token accounts (`CloseAccount`); and a version the node will
//! not serve holding the cursor, counted and reported.

use crate::common;

use std::{path::Path, time::Duration};

use common::{
    Backend, TestDb,
    solana::{
        SOL, SolanaNode, TOKEN, TOKEN_2022, ata, close_account, create_ata, mint_to, sync_native,
        transfer_checked, transfer_sol, unwrap_lamports,
    },
};
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    chain::Chain,
    config::{ChainConfig, Strategy},
    deposits::resource::SourceType,
    deposits::watcher::WatchError,
    evm::Tick,
    solana::SolanaWatcher,
    store::{NewAccount, Store, WatchFrom},
};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::versioned::TransactionVersion;
use tokio_util::sync::CancellationToken;

const CHAIN: Chain = Chain::SolanaDevnet;
const NATIVE_MINT: Pubkey = Pubkey::from_str_const("So11111111111111111111111111111111111111112");

/// A listed mint: symbol, mint, decimals, token program.
type Listed<'a> = (&'a str, Pubkey, u8, &'a str);

fn chain_config(url: &str, node: &SolanaNode, strategy: &str, assets: &[Listed<'_>]) -> ChainConfig {
    let (genesis_hash, first_slot) = (&node.genesis_hash, node.first_slot);
    let mut text = format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{genesis_hash}\"\nrpc_urls = [\"{url}\"]\n\
         confirmation = \"finalized\"\npoll_interval_ms = 100\nmax_block_range = 200\nstart_block = {first_slot}\n\
         strategy = \"{strategy}\"\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n"
    );
    for (symbol, mint, decimals, program) in assets {
        text.push_str(&format!(
            "[[assets]]\nsymbol = \"{symbol}\"\ncontract_address = \"{mint}\"\ndecimals = {decimals}\n\
             token_program = \"{program}\"\n"
        ));
    }
    ChainConfig::from_toml(&text, Path::new("solana-versions.toml"), &|_| None).unwrap()
}

async fn add_wallet(store: &Store, id: &str, wallet: &Pubkey, first_slot: u64) {
    let addresses = vec![AccountAddress { chains: vec![CHAIN], address: wallet.to_string() }];
    let account = NewAccount {
        // Watched from the first slot: the transfers precede registration.
        watch_from: WatchFrom::Block(first_slot),
        id: id.into(),
        organization: "default".into(),
        identity_id: format!("identity-{id}"),
        kind: AccountType::Segregated,
        request_id: None,
        addresses,
    };
    common::identity(store, "default", &format!("identity-{id}")).await;
    accounts::add_account(store, account).await.unwrap();
}

/// Steps until the watcher has read everything up to the confirmed slot,
/// retrying what a node answers before it serves a new transaction.
async fn catch_up(watcher: &mut SolanaWatcher, node: &SolanaNode) {
    let target = node.slot(CommitmentConfig::confirmed()).await;
    let blocks = watcher.config().strategy == Strategy::Blocks;
    for _ in 0..500 {
        let done = match watcher.tick().await {
            Ok(Tick::Scanned { to, caught_up, .. }) => caught_up && to >= target,
            Ok(Tick::Idle { .. }) => !blocks,
            Ok(Tick::Reorged { .. }) => false,
            Err(error) if error.is_retryable() => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                false
            }
            Err(error) => panic!("tick: {error}"),
        };
        if done {
            return;
        }
    }
    panic!("watcher did not catch up to slot {target}");
}

type Row = (String, String, String, SourceType, Option<String>);

async fn found(store: &Store) -> Vec<Row> {
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    let mut rows: Vec<Row> = deposits
        .into_iter()
        .map(|d| (d.account_id, d.currency_symbol, d.amount, d.source_type, d.source_account_id))
        .collect();
    rows.sort();
    rows
}

fn on_chain(account: &str, symbol: &str, amount: &str) -> Row {
    (account.into(), symbol.into(), amount.into(), SourceType::OnChain, None)
}

/// A mint of `program` with `owner`'s token account holding 1,000 tokens.
async fn funded_mint(node: &SolanaNode, owner: &Keypair, program: &str, decimals: u8) -> Pubkey {
    let mint = node.create_mint(owner, program, decimals).await;
    fund(node, owner, &mint, program).await;
    mint
}

async fn fund(node: &SolanaNode, owner: &Keypair, mint: &Pubkey, program: &str) {
    let o = owner.pubkey();
    let create = create_ata(&o, &o, mint, program);
    node.send(&[create, mint_to(program, mint, &ata(&o, mint, program), &o, 1_000 * SOL)], owner, &[]).await;
}

#[tokio::test]
async fn legacy_version_0_and_version_1_deposits_are_found_exactly_by_both_strategies() {
    let node = SolanaNode::start().await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new();
    let bob = Keypair::new().pubkey();
    let (o, a) = (outsider.pubkey(), alice.pubkey());
    let usd = funded_mint(&node, &outsider, TOKEN, 6).await;
    let fee_mint = node.create_fee_mint(&outsider, 6, 100, u64::MAX).await;
    fund(&node, &outsider, &fee_mint, TOKEN_2022).await;
    let rent_mint = node.create_mint(&outsider, TOKEN, 0).await;

    // Legacy and version 0, as before.
    node.send(&[transfer_sol(&o, &a, 3 * SOL / 2)], &outsider, &[]).await;
    let table = node.lookup_table(&outsider, vec![bob]).await;
    node.send_v0(&[transfer_sol(&o, &bob, SOL / 4)], &outsider, &[table]).await;
    // Version 1 with a priority fee: SOL, and SPL creating alice's account.
    let v1 = node.send_v1(&[transfer_sol(&o, &a, 3 * SOL / 4)], &outsider, &[], 5_000).await;
    assert_eq!(node.version_of(&v1).await, Some(TransactionVersion::Number(1)), "served as version 1");
    let usd_to_alice =
        transfer_checked(TOKEN, &ata(&o, &usd, TOKEN), &usd, &ata(&a, &usd, TOKEN), &o, 2_500_000, 6);
    node.send_v1(&[create_ata(&o, &a, &usd, TOKEN), usd_to_alice], &outsider, &[], 1).await;
    // Version 1, Token-2022 with a 1% transfer fee: 1 sent, 0.99 received.
    let fee_to_bob = transfer_checked(
        TOKEN_2022,
        &ata(&o, &fee_mint, TOKEN_2022),
        &fee_mint,
        &ata(&bob, &fee_mint, TOKEN_2022),
        &o,
        1_000_000,
        6,
    );
    node.send_v1(&[create_ata(&o, &bob, &fee_mint, TOKEN_2022), fee_to_bob], &outsider, &[], 0).await;
    let received = node.rpc.get_token_account_balance(&ata(&bob, &fee_mint, TOKEN_2022)).await.unwrap();
    assert_eq!(received.amount, "990000", "the mint withheld its fee");
    // The outsider closes its own (empty) token account into alice's wallet:
    // its rent is a deposit from the outsider.
    node.send(&[create_ata(&o, &o, &rent_mint, TOKEN)], &outsider, &[]).await;
    let rent = node.rpc.get_balance(&ata(&o, &rent_mint, TOKEN)).await.unwrap();
    node.send_v1(&[close_account(TOKEN, &ata(&o, &rent_mint, TOKEN), &a, &o)], &outsider, &[], 0).await;
    // The outsider wraps 0.5 SOL and unwraps it into bob's wallet: a deposit.
    let wrapped = ata(&o, &NATIVE_MINT, TOKEN);
    let wrap = [
        create_ata(&o, &o, &NATIVE_MINT, TOKEN),
        transfer_sol(&o, &wrapped, SOL / 2),
        sync_native(TOKEN, &wrapped),
    ];
    node.send(&wrap, &outsider, &[]).await;
    node.send_v1(&[unwrap_lamports(TOKEN, &wrapped, &bob, &o)], &outsider, &[], 0).await;

    // Nothing: a failed version-1 transfer, alice closing her own token
    // account into her wallet, and an outgoing version-1 transfer.
    let too_much =
        transfer_checked(TOKEN, &ata(&o, &usd, TOKEN), &usd, &ata(&a, &usd, TOKEN), &o, u64::MAX, 6);
    node.send_v1_failing(&[too_much], &outsider).await;
    node.send_v1(&[create_ata(&a, &a, &rent_mint, TOKEN)], &alice, &[], 0).await;
    node.send_v1(&[close_account(TOKEN, &ata(&a, &rent_mint, TOKEN), &a, &a)], &alice, &[], 0).await;
    node.send_v1(&[transfer_sol(&a, &o, SOL / 10)], &alice, &[], 0).await;
    // Account to account in version 1: alice pays bob.
    node.send_v1(&[transfer_sol(&a, &bob, SOL / 5)], &alice, &[], 7).await;

    let rent = custody_indexer::amount::Amount::from_raw(alloy::primitives::U256::from(rent), 9).to_string();
    let mut expected = vec![
        on_chain("alice", "SOL", "1.5"),
        on_chain("alice", "SOL", "0.75"),
        on_chain("alice", "TUSD", "2.5"),
        on_chain("alice", "SOL", &rent),
        on_chain("bob", "SOL", "0.25"),
        on_chain("bob", "SOL", "0.5"),
        on_chain("bob", "FEE", "0.99"),
        ("bob".into(), "SOL".into(), "0.2".into(), SourceType::Account, Some("alice".into())),
    ];
    expected.sort();
    let assets = [("TUSD", usd, 6, TOKEN), ("FEE", fee_mint, 6, TOKEN_2022)];
    for (strategy, backend) in [("blocks", Backend::Sqlite), ("signatures", Backend::Postgres)] {
        let db = TestDb::new(backend).await;
        add_wallet(&db.store, "alice", &a, node.first_slot).await;
        add_wallet(&db.store, "bob", &bob, node.first_slot).await;
        let config = chain_config(&node.url, &node, strategy, &assets);
        let mut watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
        catch_up(&mut watcher, &node).await;
        assert_eq!(found(&db.store).await, expected, "{strategy}");
    }
}

/// A watcher of alice's wallet reading the node through a fault proxy.
struct Refusing {
    node: SolanaNode,
    outsider: Keypair,
    alice: Pubkey,
    db: TestDb,
    rpc: common::proxy::FaultyRpc,
    watcher: SolanaWatcher,
}

impl Refusing {
    async fn start(strategy: &str, backend: Backend) -> Self {
        let node = SolanaNode::start().await;
        let outsider = node.funded(10 * SOL).await;
        let alice = Keypair::new().pubkey();
        let db = TestDb::new(backend).await;
        add_wallet(&db.store, "alice", &alice, node.first_slot).await;
        let rpc = common::proxy::start(node.url.clone()).await;
        let config = chain_config(&rpc.url, &node, strategy, &[]);
        let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
        Self { node, outsider, alice, db, rpc, watcher }
    }
}

/// A node answering `-32015` (a transaction newer than the declared
/// version) for every block: the watcher names the slot, keeps its cursor,
/// counts the failure and reports it, and finds the deposit once served.
#[tokio::test]
async fn a_slot_the_node_will_not_serve_holds_the_cursor_and_is_reported() {
    let Refusing { node, outsider, alice, db, rpc, mut watcher } =
        Refusing::start("blocks", Backend::Sqlite).await;
    catch_up(&mut watcher, &node).await;
    let before = db.store.chain_state(CHAIN).await.unwrap().unwrap().next_block;

    node.send_v1(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[], 0).await;
    let refusal = "Transaction version (2) is not supported by the requesting client. Please try the \
                   request again with the following configuration parameter: \"maxSupportedTransactionVersion\": 2";
    rpc.faults.method_errors.lock().unwrap().push(("getBlock".into(), -32015, refusal.into(), 10_000));
    let error = watcher.tick().await.unwrap_err();
    let WatchError::UnsupportedVersion { unreadable, .. } = &error else { panic!("{error}") };
    let slot = unreadable.slot.expect("the slot is named");
    assert!(slot >= before, "{error}");
    assert!(error.to_string().contains(&format!("slot {slot}")), "{error}");
    assert!(error.to_string().contains("cursor stays"), "{error}");
    assert_eq!((error.kind(), error.is_retryable()), ("unsupported_version", true));
    assert_eq!(db.store.chain_state(CHAIN).await.unwrap().unwrap().next_block, before, "cursor kept");
    assert!(db.store.deposits_on_chain(CHAIN).await.unwrap().is_empty());

    // Following the chain, it retries, and the health report says why.
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));
    common::eventually(Duration::from_secs(30), "the failure in the health report", || async {
        let health = db.store.chain_health().await.unwrap();
        let chain = health.into_iter().find(|h| h.chain == CHAIN)?;
        (chain.last_error_kind.as_deref() == Some("unsupported_version")).then_some(())
    })
    .await;
    assert!(db.store.deposits_on_chain(CHAIN).await.unwrap().is_empty(), "nothing skipped past it");

    // Served again (a node that reads the version took over): found.
    rpc.faults.method_errors.lock().unwrap().clear();
    common::eventually(Duration::from_secs(60), "the deposit", || async {
        let rows = found(&db.store).await;
        (rows == vec![on_chain("alice", "SOL", "1")]).then_some(())
    })
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// The signatures strategy: `getTransaction` refused with `-32015` names the
/// signature and its slot, and the address's cursor stays before it.
#[tokio::test]
async fn a_transaction_the_node_will_not_serve_is_named_by_signature_and_slot() {
    let Refusing { node, outsider, alice, db, rpc, mut watcher } =
        Refusing::start("signatures", Backend::Postgres).await;

    let signature = node.send_v1(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[], 0).await;
    let slot = node.slot_of(&signature).await;
    let refusal = "Transaction version (2) is not supported by the requesting client.";
    rpc.faults.method_errors.lock().unwrap().push(("getTransaction".into(), -32015, refusal.into(), 10_000));
    // A node may list a new signature a moment after confirming it.
    let mut refused = None;
    for _ in 0..150 {
        match watcher.tick().await {
            Err(error @ WatchError::UnsupportedVersion { .. }) => {
                refused = Some(error);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let error = refused.expect("the refusal");
    let WatchError::UnsupportedVersion { unreadable, .. } = &error else { unreachable!() };
    assert_eq!((unreadable.slot, unreadable.signature.as_deref()), (Some(slot), Some(signature.as_str())));
    assert!(error.to_string().contains(&signature), "{error}");
    assert!(db.store.address_cursor(CHAIN, &alice.to_string()).await.unwrap().is_none(), "cursor kept");
    assert!(db.store.deposits_on_chain(CHAIN).await.unwrap().is_empty());

    rpc.faults.method_errors.lock().unwrap().clear();
    catch_up(&mut watcher, &node).await;
    assert_eq!(found(&db.store).await, vec![on_chain("alice", "SOL", "1")]);
}
