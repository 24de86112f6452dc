//! The Solana watcher through one load-balanced URL whose backends disagree:
//! the real node and a backend some slots behind, chosen at random per
//! request (tests/common/lagging.rs). Nothing may be missed, recorded twice,
//! or failed while it is final, and no backfill reports what it did not read.

use crate::common;

use std::time::Duration;

use common::{
    Backend, TestDb,
    lagging::{self, Family, Row, assert_exact, rows, settled},
    solana::{SOL, SolanaNode, TOKEN, ata, create_ata, mint_to, transfer_checked, transfer_sol},
};
use custody_indexer::deposits::coverage;
use custody_indexer::{
    chain::Chain, config::ChainConfig, deposits::resource::DepositStatus, evm::WatchError,
    solana::SolanaWatcher, store::Store,
};
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::request::RpcRequest;
use solana_signer::Signer;
use tokio_util::sync::CancellationToken;

const SOLANA: Chain = Chain::SolanaDevnet;

fn solana_config(node: &SolanaNode, url: &str, strategy: &str, start: u64) -> ChainConfig {
    let text = format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{url}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 20\nstart_block = {start}\nstrategy = \"{strategy}\"\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash
    );
    ChainConfig::from_toml(&text, std::path::Path::new("solana-lagging.toml"), &|_| None).unwrap()
}

async fn add_wallet(store: &Store, id: &str, wallet: &Pubkey) {
    common::add_account_on(store, SOLANA, id, &wallet.to_string()).await;
}

#[tokio::test]
async fn solana_deposits_through_a_lagging_backend_are_found_once_and_never_failed_in_both_strategies() {
    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(100 * SOL).await;
    let (alice, bob) = (Keypair::new().pubkey(), Keypair::new().pubkey());
    let start = node.slot(CommitmentConfig::confirmed()).await;
    let shutdown = CancellationToken::new();
    let mut watchers = Vec::new();
    for (strategy, backend) in [("blocks", Backend::Sqlite), ("signatures", Backend::Postgres)] {
        let db = TestDb::new(backend).await;
        add_wallet(&db.store, "alice", &alice).await;
        add_wallet(&db.store, "bob", &bob).await;
        let config = solana_config(&node, &rpc.url, strategy, start);
        let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
        watchers.push((strategy, db, tokio::spawn(watcher.run(shutdown.clone()))));
    }

    let mut expected = Vec::new();
    for i in 1..=24u64 {
        let (to, account) = if i.is_multiple_of(2) { (alice, "alice") } else { (bob, "bob") };
        // i tenths of a SOL.
        let signature =
            node.send(&[transfer_sol(&outsider.pubkey(), &to, i * SOL / 10)], &outsider, &[]).await;
        let amount = if i % 10 == 0 { (i / 10).to_string() } else { format!("{}.{}", i / 10, i % 10) };
        expected.push((signature, account.to_string(), "SOL".to_string(), amount));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    node.wait_finalized(node.slot(CommitmentConfig::confirmed()).await).await;

    let mut results = Vec::new();
    for (strategy, db, _) in &watchers {
        let found = settled(&db.store, SOLANA, expected.len(), Duration::from_secs(90)).await;
        let deposits = db.store.deposits_on_chain(SOLANA).await.unwrap();
        let failed = deposits.iter().filter(|d| d.status == DepositStatus::Failed).count();
        results.push((*strategy, found, failed));
    }
    shutdown.cancel();
    for (_, _, running) in watchers {
        running.await.unwrap().unwrap();
    }
    for (strategy, found, failed) in results {
        assert_eq!(failed, 0, "{strategy}: a final deposit FAILED");
        assert_exact(&found, &expected, strategy);
    }
    assert!(
        rpc.stats.withheld.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the backend behind withheld answers"
    );
}

#[tokio::test]
async fn settlement_reads_get_blocks_in_pages_for_deposits_500_000_slots_apart() {
    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(10 * SOL).await;
    let alice = Keypair::new().pubkey();
    let first = node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    let first_slot = node.slot_of(&first).await;
    // The network moves 600,000 slots on, as after a long outage.
    let warp = RpcRequest::Custom { method: "surfnet_timeTravel" };
    let _: Value = node.rpc.send(warp, json!([{ "absoluteSlot": first_slot + 600_000 }])).await.unwrap();
    let second = node.send(&[transfer_sol(&outsider.pubkey(), &alice, 2 * SOL)], &outsider, &[]).await;
    let second_slot = node.slot_of(&second).await;
    assert!(second_slot - first_slot > lagging::MAX_BLOCKS_RANGE, "{first_slot} → {second_slot}");
    node.wait_finalized(second_slot).await;

    // The first read of alice's signature history finds both deposits,
    // PENDING; settling them needs slots 600,000 apart judged.
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice).await;
    let config = solana_config(&node, &rpc.url, "signatures", node.first_slot);
    let watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(watcher.run(shutdown.clone()));
    let found = settled(&db.store, SOLANA, 2, Duration::from_secs(30)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let deposits = db.store.deposits_on_chain(SOLANA).await.unwrap();
    let statuses: Vec<_> = deposits.iter().map(|d| (d.amount.clone(), d.status)).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(statuses.iter().all(|(_, s)| *s == DepositStatus::Confirmed), "{statuses:?}");
    let widest = rpc.stats.widest_range.load(std::sync::atomic::Ordering::SeqCst);
    assert!(widest <= lagging::MAX_BLOCKS_RANGE, "asked for {widest} slots at once");
}

#[tokio::test]
async fn a_late_solana_registration_gap_scanned_through_a_lagging_backend_misses_nothing() {
    use custody_indexer::{deposits::coverage, store::WatchFrom};

    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(100 * SOL).await;
    let (alice, carol) = (Keypair::new().pubkey(), Keypair::new().pubkey());
    let db = TestDb::new(Backend::Postgres).await;
    add_wallet(&db.store, "alice", &alice).await;
    let config = solana_config(&node, &rpc.url, "blocks", node.first_slot);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        SolanaWatcher::connect(config.clone(), db.store.clone()).await.unwrap().run(shutdown.clone()),
    );
    let mut expected = Vec::new();
    for i in 1..=12u64 {
        let signature = node.send(&[transfer_sol(&outsider.pubkey(), &carol, i * SOL)], &outsider, &[]).await;
        expected.push((signature, "carol".to_string(), "SOL".to_string(), i.to_string()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    common::add_account_from(
        &db.store,
        SOLANA,
        "carol",
        &carol.to_string(),
        WatchFrom::Block(node.first_slot),
    )
    .await;
    // A deposit to alice, so that a live scan knows carol.
    node.send(&[transfer_sol(&outsider.pubkey(), &alice, SOL)], &outsider, &[]).await;
    // Wide gap steps reach up to the finalized slot, where the backend
    // behind lists fewer blocks than were asked for.
    let mut wide = config.clone();
    wide.max_block_range = 10_000;
    let gaps =
        tokio::spawn(coverage::fill_gaps(SolanaWatcher::history(wide, db.store.clone()), shutdown.clone()));
    let found = eventually_rows(&db.store, "carol", expected.len()).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    gaps.await.unwrap();
    assert_exact(&found, &expected, "gap");
}

/// The rows of `account`'s deposits once there are `count` (or after a minute).
async fn eventually_rows(store: &Store, account: &str, count: usize) -> Vec<Row> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let rows: Vec<Row> = rows(store, SOLANA).await.into_iter().filter(|r| r.1 == account).collect();
        if rows.len() >= count || tokio::time::Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn solana_backfill_through_a_lagging_backend_finds_every_deposit_once() {
    let node = SolanaNode::start().await;
    let rpc = lagging::start(node.url.clone(), Family::Solana, 50).await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let db = TestDb::new(Backend::Postgres).await;
    add_wallet(&db.store, "alice", &alice).await;
    let mut expected = Vec::new();
    for i in 1..=20u64 {
        // i tenths of a SOL.
        let signature =
            node.send(&[transfer_sol(&outsider.pubkey(), &alice, i * SOL / 10)], &outsider, &[]).await;
        let amount = if i % 10 == 0 { (i / 10).to_string() } else { format!("{}.{}", i / 10, i % 10) };
        expected.push((signature, "alice".to_string(), "SOL".to_string(), amount));
    }
    let last = node.slot(CommitmentConfig::confirmed()).await;
    node.wait_finalized(last).await;
    // Finalized on the real node; the newest deposits are beyond the backend behind.
    let mut watcher =
        SolanaWatcher::connect(solana_config(&node, &rpc.url, "blocks", node.first_slot), db.store.clone())
            .await
            .unwrap();
    let mut done = None;
    for _ in 0..100 {
        match watcher.backfill_slots(node.first_slot, Some(last), &|_, _| {}).await {
            Ok(report) => {
                done = Some(report);
                break;
            }
            // The finalized slot came from the backend behind.
            Err(WatchError::AboveConfirmed { .. }) => {}
            Err(error) if error.is_retryable() => {}
            Err(error) => panic!("backfill: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = done.expect("a backfill completed");
    assert_eq!(report.deposits_found, expected.len());
    assert_exact(&rows(&db.store, SOLANA).await, &expected, "solana backfill");
    assert!(
        rpc.stats.withheld.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the backend behind withheld answers"
    );
}

/// Ten deposits to `alice`, one after the other; their rows.
async fn ten_deposits(node: &SolanaNode, outsider: &Keypair, alice: &Pubkey) -> Vec<Row> {
    let mut expected = Vec::new();
    for i in 1..=10u64 {
        // i tenths of a SOL.
        let signature =
            node.send(&[transfer_sol(&outsider.pubkey(), alice, i * SOL / 10)], outsider, &[]).await;
        let amount = if i % 10 == 0 { (i / 10).to_string() } else { format!("0.{i}") };
        expected.push((signature, "alice".to_string(), "SOL".to_string(), amount));
    }
    expected
}

#[tokio::test]
async fn solana_address_backfill_through_a_lagging_backend_reads_the_whole_history() {
    let node = SolanaNode::start().await;
    // A backend ten seconds behind: it lacks every deposit for a while.
    let rpc = lagging::start(node.url.clone(), Family::Solana, 200).await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice).await;
    let expected = ten_deposits(&node, &outsider, &alice).await;
    // `run` has seen the chain's head, past the deposits.
    let head = node.slot(CommitmentConfig::confirmed()).await;
    let seen = db.store.accounts_version().await.unwrap();
    coverage::start_cursor(&db.store, SOLANA, head, head, seen).await.unwrap();
    let config = solana_config(&node, &rpc.url, "signatures", node.first_slot);
    let mut watcher = SolanaWatcher::connect(config, db.store.clone()).await.unwrap();
    // Each backfill's requests reach either backend at random; every one
    // reads all ten. Backfills go on until one was refused by the backend
    // behind (each has even odds of never asking it), 60 at most.
    let refusals = || rpc.stats.below_min_context.load(std::sync::atomic::Ordering::SeqCst);
    for round in 0..60 {
        if round >= 5 && refusals() > 0 {
            break;
        }
        let report = watcher.backfill_address(&alice.to_string(), None, None, &|_, _| {}).await.unwrap();
        assert_eq!(report.deposits_found, expected.len(), "a short history was taken for the whole");
    }
    assert_exact(&rows(&db.store, SOLANA).await, &expected, "address backfill");
    let refused = refusals();
    eprintln!("requests the backend behind refused (-32016): {refused}");
    assert!(refused > 0, "the backend behind was asked at the freshest slot");
}

// The proxy answers while the test waits for the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solana_block_range_backfill_through_a_lagging_backend_retries_and_exits_0() {
    use common::cli::Env;

    let node = SolanaNode::start().await;
    // 10 s behind: the backfills start well within the time the backend
    // behind still lacks `--to` at finalized, however slow the machine.
    let rpc = lagging::start(node.url.clone(), Family::Solana, 100).await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let expected = ten_deposits(&node, &outsider, &alice).await;
    let last = node.slot(CommitmentConfig::confirmed()).await;
    // Finalized on the real node, and confirmed on both backends: `--to`
    // is a slot every answer shows reached.
    node.wait_finalized(last + 20).await;
    let text = format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 20\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, rpc.url
    );
    let env = Env::with_chain_file(&text);
    env.add_account("alice", &alice.to_string(), SOLANA);
    let (from, to) = (node.first_slot.to_string(), last.to_string());
    let mut retried = false;
    for _ in 0..10 {
        let out = env.output(&["backfill", "--chain", SOLANA.as_str(), "--from", &from, "--to", &to]);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "backfill failed: {stderr}");
        assert!(stdout.contains("10 deposits found"), "{stdout}");
        if stderr.contains("backfill: an answer came from a node behind the chain; asking again") {
            retried = true;
            break;
        }
    }
    assert!(retried, "no backfill met the backend behind");
    assert_exact(&rows(&env.store().await, SOLANA).await, &expected, "block-range backfill");
}

/// Slots the far backend is behind: a minute at the test node's 50 ms slots,
/// so it lacks every deposit for as long as the watcher has to find them.
const FAR: u64 = 1_200;

const WALLETS: u64 = 17;

/// A chain file with one SPL asset: each wallet is polled with its token
/// accounts, as in production.
fn solana_config_with_usd(node: &SolanaNode, url: &str, strategy: &str, start: u64, usd: &Pubkey) -> String {
    format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{url}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 20\nstart_block = {start}\nstrategy = \"{strategy}\"\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n\
         [[assets]]\nsymbol = \"TUSD\"\ncontract_address = \"{usd}\"\ndecimals = 6\ntoken_program = \"{TOKEN}\"\n",
        node.genesis_hash
    )
}

/// `i` hundredths of a SOL, as the API writes it.
fn hundredths(i: u64) -> String {
    let text = format!("{}.{:02}", i / 100, i % 100);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Seventeen wallets behind one URL whose second backend is a minute behind,
/// before every deposit: `run` (signatures strategy) finds every deposit
/// within a minute, and `backfill --address` reads each wallet's whole
/// history, exiting 0 only then. Checked against f395c56: there one
/// `-32016` from the backend behind failed the whole step, so most wallets
/// were never read (backoff growing to a minute), and a backfill whose
/// `getSlot` looks all reached the backend behind read the history as of
/// its slot: no signatures, exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventeen_wallets_through_a_backend_a_minute_behind_are_read_whole_by_run_and_by_backfill() {
    use common::cli::Env;

    let node = SolanaNode::start().await;
    let outsider = node.funded(100 * SOL).await;
    let o = outsider.pubkey();
    let usd = node.create_mint(&outsider, TOKEN, 6).await;
    let funding =
        [create_ata(&o, &o, &usd, TOKEN), mint_to(TOKEN, &usd, &ata(&o, &usd, TOKEN), &o, 1_000_000_000)];
    node.send(&funding, &outsider, &[]).await;
    // The network moves on past the far backend's lag, as a live one is.
    let now = node.slot(CommitmentConfig::confirmed()).await;
    let warp = RpcRequest::Custom { method: "surfnet_timeTravel" };
    let _: Value = node.rpc.send(warp, json!([{ "absoluteSlot": now + 2 * FAR }])).await.unwrap();
    let rpc = lagging::start(node.url.clone(), Family::Solana, FAR).await;
    let wallets: Vec<Pubkey> = (0..WALLETS).map(|_| Keypair::new().pubkey()).collect();
    let id = |i: usize| format!("w{i:02}");

    let db = TestDb::new(Backend::Postgres).await;
    for (i, wallet) in wallets.iter().enumerate() {
        add_wallet(&db.store, &id(i), wallet).await;
    }
    let start = node.slot(CommitmentConfig::confirmed()).await;
    let text = solana_config_with_usd(&node, &rpc.url, "signatures", start, &usd);
    let config = ChainConfig::from_toml(&text, std::path::Path::new("solana.toml"), &|_| None).unwrap();
    let shutdown = CancellationToken::new();
    let running =
        tokio::spawn(SolanaWatcher::connect(config, db.store.clone()).await.unwrap().run(shutdown.clone()));

    let mut expected = Vec::new();
    for (i, wallet) in wallets.iter().enumerate() {
        let amount = i as u64 + 1;
        let signature = node.send(&[transfer_sol(&o, wallet, amount * SOL / 100)], &outsider, &[]).await;
        expected.push((signature, id(i), "SOL".to_string(), hundredths(amount)));
    }
    let to_first = transfer_checked(
        TOKEN,
        &ata(&o, &usd, TOKEN),
        &usd,
        &ata(&wallets[0], &usd, TOKEN),
        &o,
        2_500_000,
        6,
    );
    let signature = node.send(&[create_ata(&o, &wallets[0], &usd, TOKEN), to_first], &outsider, &[]).await;
    expected.push((signature, id(0), "TUSD".to_string(), "2.5".to_string()));
    expected.sort();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut found = rows(&db.store, SOLANA).await;
    while found.len() < expected.len() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        found = rows(&db.store, SOLANA).await;
    }
    assert_exact(&found, &expected, "run, within a minute");
    let refused = rpc.stats.below_min_context.load(std::sync::atomic::Ordering::SeqCst);
    assert!(refused > 0, "the backend behind refused reads at the freshest slot");
    let confirmed = settled(&db.store, SOLANA, expected.len(), Duration::from_secs(60)).await;
    assert_exact(&confirmed, &expected, "run, settled");
    shutdown.cancel();
    running.await.unwrap().unwrap();

    // Every wallet's history, each through a watcher of its own (no head
    // seen before): the history is read whole, whichever backend answers.
    let history = TestDb::new(Backend::Sqlite).await;
    for (i, wallet) in wallets.iter().enumerate() {
        add_wallet(&history.store, &id(i), wallet).await;
    }
    let text = solana_config_with_usd(&node, &rpc.url, "blocks", start, &usd);
    for (i, wallet) in wallets.iter().enumerate() {
        let config = ChainConfig::from_toml(&text, std::path::Path::new("solana.toml"), &|_| None).unwrap();
        let mut watcher = SolanaWatcher::connect(config, history.store.clone()).await.unwrap();
        let report = watcher.backfill_address(&wallet.to_string(), None, None, &|_, _| {}).await.unwrap();
        let own = expected.iter().filter(|row| row.1 == id(i)).count();
        assert_eq!(report.deposits_found, own, "{}: a short history was taken for the whole", id(i));
    }
    assert_exact(&rows(&history.store, SOLANA).await, &expected, "backfill --address");

    // The command: exit 0, saying as of which slot the history was read.
    let env = Env::with_chain_file(&text);
    env.add_account("w00", &wallets[0].to_string(), SOLANA);
    let address = wallets[0].to_string();
    let args = ["backfill", "--chain", SOLANA.as_str(), "--address", &address].map(String::from);
    // The proxy answers on this runtime while the command runs.
    let (env, out) = tokio::task::spawn_blocking(move || {
        let out = env.output(&args.each_ref().map(String::as_str));
        (env, out)
    })
    .await
    .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "backfill --address failed: {stderr}");
    assert!(stdout.contains(&format!("read the history of {address} as of slot ")), "{stdout}");
    assert!(stdout.contains(": 2 deposits found, 2 new or updated"), "{stdout}");
    let own: Vec<Row> = expected.iter().filter(|row| row.1 == "w00").cloned().collect();
    assert_exact(&rows(&env.store().await, SOLANA).await, &own, "the command's store");
}

/// An address with history on both sides of a backend far behind: every
/// restart of the signatures watcher reads on from the address's cursor,
/// never from a node that does not know the cursor's signature (Agave lists
/// such a node's whole history instead). Checked against 1b7ffbe: a
/// restart whose first `getSlot` reached the backend behind took its slot
/// as the freshest, and that backend, not knowing the cursor, answered the
/// address's older history: the cursor moved back to it and every
/// signature was read again.
#[tokio::test]
async fn a_restarted_signatures_watcher_never_reads_from_before_its_cursor() {
    let node = SolanaNode::start().await;
    let outsider = node.funded(100 * SOL).await;
    let alice = Keypair::new().pubkey();
    let mut expected = Vec::new();
    let mut deposit = |signature: String, tenths: u64| {
        expected.push((signature, "alice".to_string(), "SOL".to_string(), format!("0.{tenths}")));
    };
    for tenths in 1..=3 {
        deposit(
            node.send(&[transfer_sol(&outsider.pubkey(), &alice, tenths * SOL / 10)], &outsider, &[]).await,
            tenths,
        );
    }
    // The backend behind knows these three, not what follows.
    let now = node.slot(CommitmentConfig::confirmed()).await;
    let warp = RpcRequest::Custom { method: "surfnet_timeTravel" };
    let _: Value = node.rpc.send(warp, json!([{ "absoluteSlot": now + 2 * FAR }])).await.unwrap();
    let rpc = lagging::start(node.url.clone(), Family::Solana, FAR).await;
    for tenths in 4..=5 {
        deposit(
            node.send(&[transfer_sol(&outsider.pubkey(), &alice, tenths * SOL / 10)], &outsider, &[]).await,
            tenths,
        );
    }
    expected.sort();

    let db = TestDb::new(Backend::Sqlite).await;
    add_wallet(&db.store, "alice", &alice).await;
    let config = solana_config(&node, &rpc.url, "signatures", node.first_slot);
    let mut watcher = SolanaWatcher::connect(config.clone(), db.store.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while rows(&db.store, SOLANA).await.len() < expected.len() && tokio::time::Instant::now() < deadline {
        let _ = watcher.tick().await;
    }
    assert_exact(&rows(&db.store, SOLANA).await, &expected, "first run");
    let (cursor, _) = db.store.address_cursor(SOLANA, &alice.to_string()).await.unwrap().unwrap();
    assert_eq!(cursor, expected.iter().find(|r| r.3 == "0.5").unwrap().0, "the cursor is the newest deposit");

    // Restarts: each a new process's watcher, one step each. Each first
    // look at the slot has even odds of reaching the backend behind.
    for restart in 0..20 {
        let mut watcher = SolanaWatcher::connect(config.clone(), db.store.clone()).await.unwrap();
        let _ = watcher.tick().await;
        let (now, _) = db.store.address_cursor(SOLANA, &alice.to_string()).await.unwrap().unwrap();
        assert_eq!(now, cursor, "restart {restart}: the cursor moved back");
    }
    assert_exact(&rows(&db.store, SOLANA).await, &expected, "after the restarts");
}
