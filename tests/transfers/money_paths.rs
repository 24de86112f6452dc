//! Money that must not leave, or must come back: a transfer whose identity
//! stopped transacting while its gas top-up waited in the pool, an
//! off-ramp's collect after the fiat entitlement was withdrawn. Each runs
//! `run` on a real anvil and checks what the chain holds afterwards.

use crate::common;

use std::time::Duration;

use alloy::{primitives::U256, providers::Provider};
use common::{
    anvil::Mined,
    db::{BACKENDS, Backend},
    dead_port, eventually,
    platform::{Platform, api_up},
    transfers::Setup,
};
use custody_indexer::store::TxRole;
use serde_json::{Value, json};

/// 1 TUSD or USDC in its smallest unit.
const UNIT: u64 = 1_000_000;

/// A fault proxy between the platform's chain file and its anvil.
async fn through_proxy(platform: &Platform) -> common::proxy::FaultyRpc {
    let proxy = common::proxy::start(platform.anvil.url()).await;
    let file = platform.env.chains.join("test.toml");
    let toml = std::fs::read_to_string(&file).unwrap().replace(&platform.anvil.url(), &proxy.url);
    std::fs::write(&file, toml).unwrap();
    proxy
}

/// An off-ramp of `amount` USDC of `ada-1` paid by a US wire: its id.
async fn off_ramp(platform: &Platform, port: u16, amount: &str) -> String {
    let body = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "identity_id": "ada",
        "bank_account_details": common::issuance::us_bank("000123456789") });
    let bank =
        platform.post(port, "/v2/issuance/bank-accounts", &body).await["id"].as_str().unwrap().to_string();
    let body = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "type": "OFF_RAMP", "account_id": "ada-1",
        "payment_instructions_id": bank, "amount": amount,
        "source": { "currency": "USDC", "chain": common::CHAIN.as_str() } });
    platform.post(port, "/v2/conversions", &body).await["id"].as_str().unwrap().to_string()
}

/// Before the fix (checked against f395c56) the sender signed and sent the
/// account's own transaction once the top-up was mined, with no look at the
/// identity: the destination received the 5 TUSD of a terminated identity.
#[tokio::test]
async fn a_transfer_whose_identity_ends_while_its_top_up_is_pending_fails_and_sends_nothing() {
    for backend in BACKENDS {
        let s = Setup::new(backend, "submit_within_secs = 120\nrebroadcast_after_secs = 60").await;
        let alice = s.create_account("alice", "SEGREGATED");
        s.anvil.token(s.tusd).mint(alice, U256::from(5 * UNIT)).from(s.anvil.accounts[5]).mined().await;
        s.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (false,)).await.unwrap();
        let mut run = s.start("run").await;
        let id = s.transfer("alice", "5", "TUSD", s.outside).await;

        // The sponsor's top-up waits in the pool; the transfer itself waits for it.
        let store = s.env.store().await;
        let top_up = eventually(Duration::from_secs(30), "the top-up in the pool", || async {
            let txs = store.transfer_transactions(&id).await.unwrap();
            let top_up = txs.iter().find(|t| t.role == TxRole::TopUp)?.hash.clone();
            let pooled: Value =
                s.anvil.provider.raw_request("eth_getTransactionByHash".into(), (&top_up,)).await.unwrap();
            (!pooled.is_null()).then_some(top_up)
        })
        .await;
        // The store is production's: compliance closes it in an emergency.
        let by = ["--organization", "acme", "--break-glass", "--reason", "closed by compliance"];
        s.cli(&[&["identities", "terminate", "identity-alice"][..], &by].concat());

        // Mined: the top-up lands, and the transfer ends instead of sending.
        let failed = s.until(&id, "FAILED", true).await;
        assert_eq!(failed["failure_details"]["code"], "ACCOUNT_NOT_ACTIVE", "{failed}");
        assert!(failed["failure_details"]["message"].as_str().unwrap().contains("TERMINATED"), "{failed}");
        s.anvil.mine(3).await;
        assert_eq!(s.tokens(s.tusd, s.outside).await, U256::ZERO, "nothing reached the destination");
        assert_eq!(s.tokens(s.tusd, alice).await, U256::from(5 * UNIT), "the funds stayed");
        let txs = store.transfer_transactions(&id).await.unwrap();
        assert!(
            txs.iter().all(|t| t.role == TxRole::TopUp),
            "no transaction of the account was signed: {txs:?}"
        );
        // The top-up stays the platform's gas, with its fee in the ledger.
        let entries = store.gas_entries(&id).await.unwrap();
        assert!(entries.iter().any(|(hash, ..)| *hash == top_up), "{entries:?}");
        run.kill().unwrap();
        run.wait().unwrap();
    }
}

/// Before the fix (checked against f395c56) the collect went out although
/// the entitlement was withdrawn: the stablecoin left the account for the
/// settlement wallet, the payout was refused at hand-off and a refund had
/// to bring it back.
#[tokio::test]
async fn an_off_ramp_collect_after_the_fiat_entitlement_is_withdrawn_fails_unsent() {
    let backend = Backend::Sqlite;
    let platform = Platform::new(backend).await;
    let port = dead_port();
    // The API alone: the off-ramp is accepted, its collect not yet signed.
    let serve = platform.minted_then_serving(port, "20.00").await;
    let id = off_ramp(&platform, port, "20.00").await;
    drop(serve);

    let by = ["--organization", "acme", "--by", "kyc", "--reason", "entitlement review"];
    platform.cli(&[&["identities", "fiat", "disable", "ada"][..], &by].concat());
    let _run = platform.run(port);
    api_up(port).await;
    let failed = eventually(Duration::from_secs(60), "the off-ramp ended", || async {
        let conversion = platform.get(port, &format!("/v2/conversions/{id}")).await;
        (!["INITIATED", "PENDING", "PAYOUT_INITIATED"].contains(&conversion["status"].as_str()?))
            .then_some(conversion)
    })
    .await;
    assert_eq!(failed["status"], "FAILED", "{failed}");
    assert!(failed["failure_reason"].as_str().unwrap().starts_with("FIAT_NOT_ENABLED"), "{failed}");
    // The collect is the account's transfer: failed, with no transaction.
    let transfers = platform.get(port, "/v2/crypto/transfers?account_id=ada-1").await;
    let collects: Vec<&Value> =
        transfers["transfers"].as_array().unwrap().iter().filter(|t| t["amount"] == "20").collect();
    assert_eq!(collects.len(), 1, "{transfers}");
    assert_eq!(collects[0]["status"], "FAILED", "{transfers}");
    assert_eq!(collects[0]["failure_details"]["code"], "FIAT_NOT_ENABLED", "{transfers}");
    assert!(collects[0]["transaction_hash"].is_null(), "the collect was never signed: {transfers}");
    assert_eq!(platform.balance().await, U256::from(20 * UNIT), "nothing left the account");
}

/// A backend behind answers the estimate `-32000 header not found` five
/// times (more than the transport's own three retries), then geth's
/// `missing trie node`, which the transport does not retry. Before the fix
/// (checked against f395c56) the second failed the approved mint for good
/// (`INVALID_TRANSFER`), and the wired dollars had to be sent back by hand.
#[tokio::test]
async fn a_mint_whose_estimate_meets_a_node_behind_is_asked_again_and_completes() {
    let platform = Platform::new(Backend::Sqlite).await;
    let proxy = through_proxy(&platform).await;
    let missing_trie_node =
        "missing trie node 1f1e33c2b6e7e8b4f7ac6a4b0f21d2b3a6e8f5c1d9a0b7e4c3f2a1b0c9d8e7f6 (path ) <nil>";
    for (message, times) in [("header not found", 5), (missing_trie_node, 1)] {
        let error = ("eth_estimateGas".to_string(), -32000, message.to_string(), times);
        proxy.faults.method_errors.lock().unwrap().push(error);
    }
    let port = dead_port();
    let _run = platform.run(port);
    let mint = platform.wire(port, "25.00").await;
    let completed = platform.completed(port, &mint).await;
    assert_eq!(completed["status"], "COMPLETED");
    assert_eq!(proxy.faults.failed.load(std::sync::atomic::Ordering::SeqCst), 6, "every error was answered");
    assert_eq!(platform.balance().await, U256::from(25 * UNIT));
}

/// A provider's error answer (its words name the plan and a project id)
/// while a client reads balances. Before the fix (checked against f395c56)
/// the `503` body carried those words verbatim.
#[tokio::test]
async fn a_balance_read_the_node_fails_names_the_call_never_the_providers_words() {
    let s = Setup::with_rpc(Backend::Sqlite, "", true).await;
    s.create_account("alice", "SEGREGATED");
    let _serve = s.start("serve").await;
    let words = "project ID 9f3c2a7e-internal is over its plan's quota (tier: growth)";
    let error = ("eth_getBalance".to_string(), -32099, words.to_string(), 100);
    s.proxy.as_ref().unwrap().faults.method_errors.lock().unwrap().push(error);
    let answer = s.get("/v2/accounts/alice/balances").await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(answer.body["code"], "CHAIN_UNAVAILABLE");
    let message = answer.body["message"].as_str().unwrap();
    assert!(message.contains("eth_getBalance") && message.contains(common::CHAIN.as_str()), "{message}");
    assert!(!message.contains("9f3c2a7e") && !message.contains("quota"), "{message}");
}

/// Before the fix (checked against f395c56) the phrase stayed readable in
/// `/proc/<pid>/environ` for the whole life of the process.
#[tokio::test]
async fn the_mnemonic_is_gone_from_the_process_environment_once_read() {
    let s = Setup::new(Backend::Sqlite, "").await;
    s.create_account("treasury", "OMNIBUS");
    let serve = s.start("serve").await;
    let environ = std::fs::read(format!("/proc/{}/environ", serve.id())).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("CUSTODY_INDEXER_MNEMONIC="), "the variable was given");
    assert!(!environ.contains(common::transfers::MNEMONIC), "the phrase is still readable");
    assert!(!environ.contains("abandon"), "no word of it is left");
    // The keys were read before: transfers are still signed.
    s.transfer("treasury", "0.1", "ETH", s.outside).await;
}

/// The platform's USDC (6 decimals on chain) listed with `decimals = 18`.
/// Before the fix (checked against f395c56) `run` started and minted 10^12
/// times every wire.
#[tokio::test]
async fn a_chain_file_wrong_about_the_issued_decimals_is_refused_and_a_correct_one_starts() {
    let platform = Platform::bare(Backend::Sqlite).await;
    let file = platform.env.chains.join("test.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    let wrong = good.replace(
        "decimals = 6\neip3009 = true\nissued = true",
        "decimals = 18\neip3009 = true\nissued = true",
    );
    assert_ne!(wrong, good, "the issued asset's lines: {good}");
    std::fs::write(&file, &wrong).unwrap();
    for command in ["run", "serve"] {
        let out = platform
            .env
            .command(&[command, "--chain", common::CHAIN.as_str()])
            .env("CUSTODY_INDEXER_MNEMONIC", common::transfers::MNEMONIC)
            .env("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command} started");
        let named = stderr.contains("asset USDC") && stderr.contains(&file.display().to_string());
        assert!(named && stderr.contains("decimals = 18") && stderr.contains("has 6"), "{command}: {stderr}");
    }
    std::fs::write(&file, &good).unwrap();
    let port = dead_port();
    let _run = platform.run(port);
    api_up(port).await;
}

/// The node does not answer the first decimals read: `run` starts, the
/// asset is checked again in the background, and a wire's mint waits until
/// then.
#[tokio::test]
async fn a_node_silent_about_the_issued_decimals_holds_the_mints_back_until_it_answers() {
    let mut platform = Platform::bare(Backend::Sqlite).await;
    platform.env.identity("acme", "ada");
    platform.onboard("ada");
    let proxy = through_proxy(&platform).await;
    let error = ("eth_call".to_string(), -32603, "internal error".to_string(), 1);
    proxy.faults.method_errors.lock().unwrap().push(error);
    let port = dead_port();
    let _run = platform.run(port);
    api_up(port).await;
    let started = std::time::Instant::now();
    let mint = platform.wire(port, "5.00").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let waiting = platform.get(port, &format!("/v2/issuance/mints/{mint}")).await;
    assert_eq!(waiting["status"], "MINTING", "{waiting}");
    assert!(
        waiting["transaction_hash"].is_null(),
        "nothing sent before the decimals are verified: {waiting}"
    );
    platform.completed(port, &mint).await;
    assert!(started.elapsed() >= Duration::from_secs(10), "minted only once verified in the background");
    assert_eq!(platform.balance().await, U256::from(5 * UNIT));
}

/// A backend answers the off-ramp's collect, still in the pool, with a
/// successful receipt in a block that is not canonical. Before the fix
/// (checked against f395c56) the collect was taken as `CONFIRMED` and the
/// payout handed to the bank for stablecoin that never moved.
#[tokio::test]
async fn a_collect_receipt_from_a_block_off_the_canonical_chain_never_hands_the_payout_off() {
    let platform = Platform::new(Backend::Sqlite).await;
    let proxy = through_proxy(&platform).await;
    let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
    let settlement: alloy::primitives::Address = wallets[0]["settlement"].as_str().unwrap().parse().unwrap();
    let anvil = &platform.anvil;
    anvil.send_eth(anvil.accounts[0], settlement, U256::from(common::transfers::ETH)).await;
    let port = dead_port();
    let _run = platform.run(port);
    let mint = platform.wire(port, "20.00").await;
    platform.completed(port, &mint).await;

    platform.pause_mining().await;
    let id = off_ramp(&platform, port, "20.00").await;
    eventually(Duration::from_secs(30), "the collect in the pool", || async {
        let pool: Value = anvil.provider.raw_request("txpool_content".into(), ()).await.unwrap();
        (!pool["pending"].as_object().unwrap().is_empty()).then_some(())
    })
    .await;
    proxy.faults.invented_receipts_at.store(1, std::sync::atomic::Ordering::SeqCst);
    eventually(Duration::from_secs(30), "an invented receipt answered", || async {
        (proxy.faults.failed.load(std::sync::atomic::Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let conversion = platform.get(port, &format!("/v2/conversions/{id}")).await;
    assert!(["INITIATED", "PROCESSING"].contains(&conversion["status"].as_str().unwrap()), "{conversion}");
    let transfers = platform.get(port, "/v2/crypto/transfers?account_id=ada-1").await;
    let collect =
        transfers["transfers"].as_array().unwrap().iter().find(|t| t["amount"] == "20").unwrap().clone();
    assert_ne!(collect["status"], "CONFIRMED", "{collect}");

    // The chain moves on: the real collect lands and the off-ramp completes.
    proxy.faults.invented_receipts_at.store(0, std::sync::atomic::Ordering::SeqCst);
    anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (true,)).await.unwrap();
    let done = eventually(Duration::from_secs(60), "the off-ramp completed", || async {
        anvil.mine(1).await;
        let conversion = platform.get(port, &format!("/v2/conversions/{id}")).await;
        (conversion["status"] == "COMPLETED").then_some(conversion)
    })
    .await;
    assert_eq!(done["status"], "COMPLETED");
}
