//! Registered means watched: a deposit made after an address was registered
//! is found whenever `run` starts, however often it is killed, and an
//! address registered while `run` runs has its earlier blocks scanned.

use crate::common;

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
};
use common::{
    Anvil, CHAIN,
    anvil::Mined,
    chain_toml,
    cli::{Env, terminate},
    eventually, proxy,
};
use custody_indexer::{chain::Chain, deposits::resource::DepositStatus, store::Store};

/// The test chain file without `start_block`: a first start begins where the
/// registered addresses' watch begins, else at the head.
fn chain_file(urls: &[String], token: Address, extra: &str) -> String {
    chain_toml(urls, Some(&token.to_string()), extra).replace("start_block = 0\n", "")
}

async fn token_deposits(env: &Env) -> Vec<(String, String)> {
    let store = env.store().await;
    let mut found: Vec<(String, String)> = store
        .deposits_on_chain(CHAIN)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.transaction_hash, d.account_id))
        .collect();
    found.sort();
    found
}

/// The test token, with a balance for anvil's first account to send.
async fn funded_token(anvil: &Anvil) -> Address {
    let token = anvil.deploy_token("TUSD").await;
    let sender = anvil.accounts[0];
    anvil.token(token).mint(sender, U256::from(1_000_000_000_000u64)).from(sender).mined().await;
    token
}

/// Registers a watch-only account whose watch starts at `flag`
/// (`--from-block`, `--from-slot`, `--from-time`) = `value`.
fn register_from(env: &Env, id: &str, address: &str, chain: Chain, flag: &str, value: &str) {
    let identity = format!("identity-{id}");
    env.identity("default", &identity);
    env.ok(&[
        "accounts",
        "add",
        "--account-id",
        id,
        "--identity-id",
        &identity,
        "--type",
        "SEGREGATED",
        "--address",
        address,
        "--chains",
        chain.as_str(),
        flag,
        value,
    ]);
}

/// The transaction hashes of an account's deposits, once there are `count`.
async fn transactions_of(store: &Store, account: &str, count: usize) -> BTreeSet<String> {
    eventually(Duration::from_secs(90), &format!("{count} deposits of {account}"), || async {
        let found: BTreeSet<String> = store
            .deposits_of_account(account)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.transaction_hash)
            .collect();
        (found.len() >= count).then_some(found)
    })
    .await
}

fn health_json(env: &Env) -> serde_json::Value {
    let out = env.output(&["health", "--chain", CHAIN.as_str(), "--json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn a_deposit_between_registration_and_the_first_run_is_found() {
    // A chain whose first blocks are two hours old.
    let past = chrono::Utc::now().timestamp() - 7200;
    let anvil = Anvil::start_with(&["--timestamp", &past.to_string()]).await;
    let token = funded_token(&anvil).await;
    let (sender, alice, bob) = (anvil.accounts[0], anvil.accounts[5], anvil.accounts[6]);
    let before = anvil.send_eth(sender, alice, U256::from(1_000u64)).await;
    let bob_before = anvil.send_eth(sender, bob, U256::from(2_000u64)).await;
    let now = chrono::Utc::now().timestamp() as u64;
    anvil
        .provider
        .raw_request::<_, serde_json::Value>("evm_setNextBlockTimestamp".into(), (now,))
        .await
        .unwrap();
    anvil.mine(1).await;

    // Alice registers now; her deposits arrive before `run` ever started.
    let env = Env::with_chain_file(&chain_file(&[anvil.url()], token, ""));
    env.add_account("alice", &alice.to_string(), CHAIN);
    let native = anvil.send_eth(sender, alice, U256::from(3_000u64)).await;
    let tokens = anvil.token(token).transfer(alice, U256::from(4_000_000u64)).from(sender).mined().await;
    anvil.mine(5).await;
    let mut run = env.spawn_run(CHAIN);
    let expected: BTreeSet<(String, String)> = [native.to_string(), tokens.transaction_hash.to_string()]
        .into_iter()
        .map(|tx| (tx, "alice".into()))
        .collect();
    let found = eventually(Duration::from_secs(60), "the deposits made before the first run", || async {
        let found: BTreeSet<_> = token_deposits(&env).await.into_iter().collect();
        (found.len() >= expected.len()).then_some(found)
    })
    .await;
    assert_eq!(found, expected, "alice's deposit of two hours before her registration is not looked for");
    assert!(!found.iter().any(|(tx, _)| *tx == before.to_string()));

    // Bob registers while `run` runs, watched from a time two hours ago: the
    // gap is resolved by block time and scanned once confirmed.
    let from = chrono::DateTime::from_timestamp(past, 0).unwrap().to_rfc3339();
    register_from(&env, "bob", &bob.to_string(), CHAIN, "--from-time", &from);
    anvil.mine(5).await;
    let store = env.store().await;
    let bobs = eventually(Duration::from_secs(60), "bob's earlier deposit", || async {
        let found = store.deposits_of_account("bob").await.unwrap();
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert!(terminate(&mut run).success());
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0].transaction_hash, bob_before.to_string());
    assert_eq!(bobs[0].status, DepositStatus::Confirmed);
}

/// Sends a native and a token deposit to one of `to` every ~100 ms until
/// `stop`; returns the transaction hashes with the receiving address.
async fn keep_depositing(
    anvil: &Anvil,
    token: Address,
    to: &[Address],
    stop: &AtomicBool,
) -> Vec<(String, Address)> {
    let sender = anvil.accounts[0];
    let mut sent = Vec::new();
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let target = to[i % to.len()];
        let hash = if i.is_multiple_of(2) {
            anvil.send_eth(sender, target, U256::from(1_000 + i as u64)).await
        } else {
            let contract = anvil.token(token);
            contract
                .transfer(target, U256::from(1_000 + i as u64))
                .from(sender)
                .mined()
                .await
                .transaction_hash
        };
        sent.push((hash.to_string(), target));
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sent
}

/// The logs of the runs `env` spawned, the newest last.
fn run_logs(env: &Env) -> String {
    let mut logs: Vec<_> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
        .map(|e| (e.metadata().and_then(|m| m.modified()).unwrap(), e.path()))
        .collect();
    logs.sort();
    logs.iter()
        .map(|(_, path)| std::fs::read_to_string(path).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[tokio::test]
async fn run_killed_before_and_after_its_first_commit_misses_nothing() {
    let anvil = Anvil::start().await;
    let token = funded_token(&anvil).await;
    let proxy = proxy::start(anvil.url()).await;
    let env =
        Env::with_chain_file(&chain_file(std::slice::from_ref(&proxy.url), token, "max_block_range = 3"));
    let wallets: Vec<Address> = anvil.accounts[5..9].to_vec();
    for (i, wallet) in wallets.iter().enumerate() {
        env.add_account(&format!("acc-{i}"), &wallet.to_string(), CHAIN);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let depositing = {
        let (anvil, stop, wallets) = (&anvil, stop.clone(), wallets.clone());
        async move { keep_depositing(anvil, token, &wallets, &stop).await }
    };
    let faults = proxy.faults.clone();
    let injecting = Arc::new(AtomicBool::new(true));
    let killing = async {
        // Requests fail now and then while `run` is killed again and again:
        // first before it can commit anything, then mid-catch-up. A run
        // that must commit first does so without them (under a failure
        // every 40 ms its watcher never got past `eth_chainId`), and
        // meets them again until it is killed.
        let injector = tokio::spawn({
            let injecting = injecting.clone();
            async move {
                loop {
                    if injecting.load(Ordering::Relaxed) {
                        faults.status.store(503, Ordering::Relaxed);
                        faults.fail_next.store(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
            }
        });
        // (after a commit, then how long): killed before its first commit
        // (0 ms after it started, or 30), or once its cursor moved.
        let store = env.store().await;
        let cursor = || async { store.chain_state(CHAIN).await.unwrap().map(|s| s.next_block) };
        let mut seen = BTreeSet::new();
        for (after_commit, wait_ms) in [
            (false, 0),
            (true, 120),
            (true, 400),
            (false, 30),
            (true, 900),
            (true, 250),
            (true, 1500),
            (true, 700),
        ] {
            let before = cursor().await;
            let mut run = env.spawn_run(CHAIN);
            if after_commit {
                injecting.store(false, Ordering::Relaxed);
                proxy.faults.fail_next.store(0, Ordering::Relaxed);
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while cursor().await == before {
                    if let Some(status) = run.try_wait().unwrap() {
                        panic!("run exited ({status}) before it committed:\n{}", run_logs(&env));
                    }
                    assert!(std::time::Instant::now() < deadline, "no commit in 60 s:\n{}", run_logs(&env));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                injecting.store(true, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(wait_ms)).await;
            run.kill().unwrap();
            run.wait().unwrap();
            seen.insert(cursor().await != before);
        }
        // The proof of the timings: a run was killed before it committed
        // anything, and runs were killed after they committed.
        assert_eq!(seen, BTreeSet::from([false, true]), "kills before and after a commit");
        injector.abort();
        proxy.faults.fail_next.store(0, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    };
    let (sent, ()) = tokio::join!(depositing, killing);
    assert!(sent.len() >= 10, "deposits kept arriving ({})", sent.len());

    let head = anvil.head().await;
    let mut run = env.spawn_run(CHAIN);
    let store = env.store().await;
    eventually(Duration::from_secs(60), "run to catch up", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(())
    })
    .await;
    assert!(terminate(&mut run).success());
    let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
    let found: BTreeSet<String> = deposits.iter().map(|d| d.transaction_hash.clone()).collect();
    let expected: BTreeSet<String> = sent.iter().map(|(tx, _)| tx.clone()).collect();
    assert_eq!(deposits.len(), sent.len(), "no deposit recorded twice");
    assert_eq!(found, expected, "no deposit missed");
}

#[tokio::test]
async fn an_address_registered_while_running_is_scanned_from_its_watch_start() {
    let anvil = Anvil::start().await;
    let token = funded_token(&anvil).await;
    let (sender, alice, carol) = (anvil.accounts[0], anvil.accounts[5], anvil.accounts[7]);
    let env = Env::with_chain_file(&chain_file(&[anvil.url()], token, ""));
    env.add_account("alice", &alice.to_string(), CHAIN);
    let mut run = env.spawn_run(CHAIN);
    let store = env.store().await;

    // Carol's deposits land while nobody watches her address.
    // The first from alice, a registered account: an internal transfer.
    let early = anvil.send_eth(alice, carol, U256::from(5_000u64)).await;
    let early_block = anvil.provider.get_block_number().await.unwrap();
    let early_token = anvil.token(token).transfer(carol, U256::from(6_000u64)).from(sender).mined().await;
    anvil.send_eth(sender, alice, U256::from(1u64)).await;
    let head = anvil.head().await;
    eventually(Duration::from_secs(30), "the live cursor to pass carol's deposits", || async {
        (store.chain_state(CHAIN).await.unwrap()?.next_block > head).then_some(())
    })
    .await;

    // Registered from the block of her first deposit: the gap is scanned in
    // the background once its blocks are confirmed (depth 3).
    register_from(&env, "carol", &carol.to_string(), CHAIN, "--from-block", &early_block.to_string());
    let late = anvil.send_eth(sender, carol, U256::from(7_000u64)).await;
    // One more block: a live scan that knew carol commits, while the gap's
    // top is not confirmed yet.
    anvil.mine(1).await;
    eventually(Duration::from_secs(30), "health to report carol catching up", || async {
        (health_json(&env)["chains"][0]["addresses_catching_up"] == 1).then_some(())
    })
    .await;
    anvil.mine(5).await;
    let carol_deposits = transactions_of(&store, "carol", 3).await;
    let expected: BTreeSet<String> =
        [early, early_token.transaction_hash, late].iter().map(|h| h.to_string()).collect();
    assert_eq!(carol_deposits, expected);
    eventually(Duration::from_secs(30), "carol's coverage to complete", || async {
        (health_json(&env)["chains"][0]["addresses_catching_up"] == 0).then_some(())
    })
    .await;
    assert!(terminate(&mut run).success());
    let deposits = store.deposits_of_account("carol").await.unwrap();
    assert_eq!(deposits.len(), 3, "no duplicates");
    let internal = deposits.iter().find(|d| d.transaction_hash == early.to_string()).unwrap();
    assert_eq!(internal.source_account_id.as_deref(), Some("alice"), "found by the gap scan, still internal");
    assert!(
        deposits
            .iter()
            .filter(|d| d.transaction_hash != late.to_string())
            .all(|d| d.status == DepositStatus::Confirmed)
    );
}

#[tokio::test]
async fn accounts_import_registers_100000_addresses_or_nothing() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    let mut csv = String::from("account_id,identity_id,type,address,chains,from_block\n");
    for i in 0..100_000u64 {
        let address = Address::from_word(alloy::primitives::B256::from(U256::from(i + 1)));
        csv.push_str(&format!("acc-{i},identity-{},SEGREGATED,{address},{CHAIN},\n", i % 100));
    }
    let file = env.dir.path().join("accounts.csv");
    std::fs::write(&file, &csv).unwrap();
    let store = env.store().await;
    for identity in (0..100).map(|i| format!("identity-{i}")).chain(["i".to_string()]) {
        common::identity(&store, "default", &identity).await;
    }
    let started = std::time::Instant::now();
    let out = env.ok(&["accounts", "import", file.to_str().unwrap()]);
    eprintln!("imported 100,000 addresses in {:.2?}", started.elapsed());
    assert!(out.contains("imported 100000 accounts with 100000 addresses"), "{out}");
    let store = env.store().await;
    assert_eq!(store.watched_addresses(CHAIN).await.unwrap().len(), 100_000);

    // A bad line: named, and nothing of the file imported.
    let bad = env.dir.path().join("bad.jsonl");
    let good = |id: &str, n: u64| {
        let address = Address::from_word(alloy::primitives::B256::from(U256::from(1_000_000 + n)));
        format!(
            r#"{{"account_id":"{id}","identity_id":"i","type":"OMNIBUS","address":"{address}","chains":["{CHAIN}"]}}"#
        )
    };
    let lines = [good("new-1", 1), good("new-2", 2), r#"{"account_id":"new-3","identity_id":"i","type":"OMNIBUS","address":"0x1234","chains":["ETHEREUM_TESTNET"]}"#.to_string(), good("new-4", 4)];
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let out = env.output(&["accounts", "import", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 3:") && stderr.contains("0x1234"), "{stderr}");
    assert!(stderr.contains("nothing was imported"), "{stderr}");

    // An address already registered, on line 3 of this file: nothing imported either.
    let clash = env.dir.path().join("clash.csv");
    let taken = Address::from_word(alloy::primitives::B256::from(U256::from(7u64)));
    std::fs::write(
        &clash,
        format!(
            "account_id,identity_id,type,address,chains\nfresh-1,i,SEGREGATED,{},{CHAIN}\nfresh-2,i,SEGREGATED,{taken},{CHAIN}\n",
            Address::from_word(alloy::primitives::B256::from(U256::from(2_000_000u64)))
        ),
    )
    .unwrap();
    let out = env.output(&["accounts", "import", clash.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("line 3:") && stderr.contains("already watched"),
        "{stderr}"
    );
    assert_eq!(store.watched_addresses(CHAIN).await.unwrap().len(), 100_000, "nothing half-imported");
    assert!(store.account("fresh-1").await.is_err());
}

#[tokio::test]
async fn solana_wallets_are_watched_from_registration_and_from_a_past_slot() {
    use common::solana::{SOL, SolanaNode, transfer_sol};
    use solana_keypair::Keypair;
    use solana_signer::Signer;
    const SOLANA: Chain = Chain::SolanaDevnet;

    let node = SolanaNode::start().await;
    let payer = node.funded(10 * SOL).await;
    let (alice, carol) = (Keypair::new().pubkey(), Keypair::new().pubkey());
    let send = |to, lamports| {
        let ix = transfer_sol(&payer.pubkey(), &to, lamports);
        let payer = &payer;
        let node = &node;
        async move { node.send(&[ix], payer, &[]).await }
    };
    let carol_early = send(carol, SOL / 10).await;
    let carol_slot = node.slot_of(&carol_early).await;

    let env = Env::with_chain_file(&format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nstrategy = \"blocks\"\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, node.url
    ));
    env.add_account("alice", &alice.to_string(), SOLANA);
    let alice_deposit = send(alice, SOL / 5).await;
    let mut run = env.spawn_run(SOLANA);
    let store = env.store().await;
    eventually(Duration::from_secs(60), "alice's deposit made before the first run", || async {
        (store.deposits_of_account("alice").await.unwrap().len() == 1).then_some(())
    })
    .await;

    // Carol registers while `run` runs, from the slot of her first deposit.
    register_from(&env, "carol", &carol.to_string(), SOLANA, "--from-slot", &carol_slot.to_string());
    let carol_late = send(carol, SOL / 20).await;
    let carols = transactions_of(&store, "carol", 2).await;
    assert!(terminate(&mut run).success());
    assert_eq!(carols, [carol_early, carol_late].into_iter().collect::<BTreeSet<_>>());
    let alices = store.deposits_of_account("alice").await.unwrap();
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0].transaction_hash, alice_deposit);
}

#[tokio::test]
async fn solana_run_killed_again_and_again_misses_nothing() {
    use common::solana::{SOL, SolanaNode, transfer_sol};
    use solana_commitment_config::CommitmentConfig;
    use solana_keypair::Keypair;
    use solana_signer::Signer;
    const SOLANA: Chain = Chain::SolanaDevnet;

    let node = SolanaNode::start().await;
    let payer = node.funded(10 * SOL).await;
    let wallets: Vec<_> = (0..3).map(|_| Keypair::new().pubkey()).collect();
    let env = Env::with_chain_file(&format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nstrategy = \"blocks\"\nmax_block_range = 5\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, node.url
    ));
    for (i, wallet) in wallets.iter().enumerate() {
        env.add_account(&format!("wallet-{i}"), &wallet.to_string(), SOLANA);
    }
    // Deposits arrive from registration on: before the first `run`, and all
    // along while it is killed again and again.
    let stop = AtomicBool::new(false);
    let depositing = async {
        let mut sent = BTreeSet::new();
        let mut i = 0u64;
        // At least ten, however slow the machine.
        while !stop.load(Ordering::Relaxed) || sent.len() < 10 {
            let to = wallets[i as usize % wallets.len()];
            sent.insert(node.send(&[transfer_sol(&payer.pubkey(), &to, SOL / 1000 + i)], &payer, &[]).await);
            i += 1;
        }
        sent
    };
    let killing = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for wait_ms in [30, 150, 400, 900, 300, 1200] {
            let mut run = env.spawn_run(SOLANA);
            tokio::time::sleep(Duration::from_millis(wait_ms)).await;
            run.kill().unwrap();
            run.wait().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    };
    let (sent, ()) = tokio::join!(depositing, killing);
    assert!(sent.len() >= 10, "deposits kept arriving ({})", sent.len());

    // The last run killed may have scanned up to the confirmed slot already:
    // this one must scan past what it left, or it proves nothing.
    let store = env.store().await;
    let left = store.chain_state(SOLANA).await.unwrap().map_or(0, |s| s.next_block);
    let confirmed = node.slot(CommitmentConfig::confirmed()).await.max(left);
    let mut run = env.spawn_run(SOLANA);
    eventually(Duration::from_secs(60), "run to catch up", || async {
        (store.chain_state(SOLANA).await.unwrap()?.next_block > confirmed).then_some(())
    })
    .await;
    let status = terminate(&mut run);
    assert!(status.success(), "run exited {status} on SIGTERM; the runs' logs:\n{}", env.run_logs());
    let deposits = store.deposits_on_chain(SOLANA).await.unwrap();
    let found: BTreeSet<String> = deposits.iter().map(|d| d.transaction_hash.clone()).collect();
    assert_eq!(deposits.len(), sent.len(), "no deposit recorded twice");
    assert_eq!(found, sent, "no deposit missed");
}
