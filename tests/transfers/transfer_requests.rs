//! Transfer requests over HTTP on both backends, against anvil's balances:
//! idempotency by the UUID (in any of its forms) whatever the transfer
//! holds, destinations that must be wallets, limit policies on listed
//! assets only, and the expiry of transfers no sender takes.

use crate::common;

use std::{sync::Arc, time::Duration};

use alloy::primitives::{Address, U256};
use common::{
    Anvil, CHAIN,
    anvil::Mined,
    api::{App, spawn_app_with_signer},
    chain_config, chain_toml,
    cli::Env,
    db::BACKENDS,
    eventually,
};
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    api::RateLimit,
    chain::Chain,
    config::Chains,
    keys::{KeyRef, MnemonicSigner, Signer},
    store::{NewAccount, Settlement},
    transfers::{
        FailureDetails, TransferStatus, limit_policies::create_limit_policy, settle::settle_transfer,
        transactions::mark_submitted,
    },
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

/// The API with keys over a fresh store, the anvil chain (TUSD listed)
/// and Solana devnet's built-in file; the omnibus account `treasury` holds
/// `tusd` TUSD (6 decimals) on anvil.
struct Setup {
    app: App,
    _anvil: Anvil,
    chains: Chains,
    key: String,
}

impl Setup {
    async fn new(backend: common::Backend, transfers: &str, tusd: u64) -> Self {
        let anvil = Anvil::start().await;
        let token = anvil.deploy_token("TUSD").await;
        let mut chains = Chains::default();
        let extra = format!("[transfers]\nnative_usd = \"3000\"\n{transfers}");
        chains.insert(chain_config(&[anvil.url()], Some(&token.to_string()), &extra));
        chains.insert(Chains::load(None).unwrap().get(Chain::SolanaDevnet).unwrap().clone());
        let signer = MnemonicSigner::from_phrase(MNEMONIC).unwrap();
        let omnibus = signer.evm_address(KeyRef::Omnibus).unwrap();
        let signer: Arc<dyn Signer> = Arc::new(signer);
        let app = spawn_app_with_signer(backend, chains.clone(), RateLimit::default(), Some(signer)).await;
        let key = app.key("acme").await;
        common::identity(app.store(), "acme", "identity-treasury").await;
        accounts::add_account(
            app.store(),
            NewAccount {
                watch_from: Default::default(),
                id: "treasury".into(),
                organization: "acme".into(),
                identity_id: "identity-treasury".into(),
                kind: AccountType::Omnibus,
                request_id: None,
                addresses: vec![AccountAddress { chains: vec![CHAIN], address: omnibus.to_checksum(None) }],
            },
        )
        .await
        .unwrap();
        let minter = anvil.accounts[5];
        anvil.token(token).mint(omnibus, U256::from(tusd)).from(minter).mined().await;
        Self { app, _anvil: anvil, chains, key }
    }

    /// A request of `amount` TUSD from the treasury to an outside address.
    fn request(&self, request_id: &str, amount: &str) -> Value {
        json!({
            "request_id": request_id,
            "account_id": "treasury",
            "amount": amount,
            "currency_symbol": "TUSD",
            "address_destination": { "address": Address::repeat_byte(0x42).to_string(), "chain": CHAIN.as_str() },
        })
    }

    async fn post(&self, body: &Value) -> common::api::Answer {
        self.app.post("/v2/crypto/transfers", &self.key, body).await
    }

    async fn available(&self) -> String {
        let balances = self.app.get("/v2/accounts/treasury/balances", &self.key).await.body;
        let tusd =
            balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == "TUSD").unwrap().clone();
        tusd["available"].as_str().unwrap().to_string()
    }
}

/// Every textual form of one UUID.
fn forms(id: uuid::Uuid) -> [String; 5] {
    let canonical = id.hyphenated().to_string();
    [
        canonical.clone(),
        canonical.to_uppercase(),
        format!("{{{canonical}}}"),
        id.simple().to_string(),
        format!("urn:uuid:{canonical}"),
    ]
}

#[tokio::test]
async fn one_request_in_any_uuid_form_is_one_transfer_whatever_it_holds() {
    for backend in BACKENDS {
        // The transfer takes the whole balance and the whole 24 h limit: a
        // repeat must not meet its own hold.
        let s = Setup::new(backend, "", 10_000_000).await;
        create_limit_policy(s.app.store(), "acme", Some("treasury"), None, "TUSD", Some("10"), Some("10"))
            .await
            .unwrap();
        let id = uuid::Uuid::new_v4();
        let canonical = id.hyphenated().to_string();
        let requests: Vec<Value> = forms(id).iter().cycle().take(10).map(|f| s.request(f, "10")).collect();
        let answers = futures::future::join_all(requests.iter().map(|r| s.post(r))).await;
        let mut statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
        statuses.sort();
        assert_eq!(statuses, [201; 10], "{backend:?}: every replay answers as the create: {answers:?}");
        let transfer = answers[0].body["id"].as_str().unwrap().to_string();
        for answer in &answers {
            assert_eq!(answer.body["id"], transfer.as_str(), "{backend:?}: every answer names it");
            assert_eq!(answer.body["request_id"], canonical.as_str());
        }
        assert_eq!(s.available().await, "0");
        let listed = s.app.get("/v2/crypto/transfers?account_id=treasury", &s.key).await.body;
        assert_eq!(listed["transfers"].as_array().unwrap().len(), 1, "{listed}");

        // Submitted: still in flight, still the same transfer.
        mark_submitted(s.app.store(), &transfer).await.unwrap();
        let again = s.post(&s.request(&canonical.to_uppercase(), "10.000")).await;
        assert_eq!((again.status, again.body["id"].as_str()), (201, Some(transfer.as_str())), "{again:?}");
        assert_eq!(again.body["status"], "SUBMITTED");

        // Another request under the same UUID, in another form: refused, naming it.
        let reused = s.post(&s.request(&id.simple().to_string(), "9")).await;
        assert_eq!(
            (reused.status, reused.body["code"].as_str()),
            (409, Some("REQUEST_ID_REUSED")),
            "{reused:?}"
        );
        assert_eq!(reused.body["transfer_id"], transfer.as_str());

        // Processed: a repeat is the reference's duplicate transaction, naming it.
        let settlement = Settlement {
            status: TransferStatus::Failed,
            transaction_hash: None,
            failure: Some(FailureDetails { code: "REVERTED".into(), message: "test".into() }),
            fees: Vec::new(),
            native_symbol: "ETH".into(),
            native_decimals: 18,
            usd_micros_per_coin: 0,
        };
        settle_transfer(s.app.store(), &transfer, &settlement).await.unwrap();
        let duplicate = s.post(&s.request(&format!("urn:uuid:{canonical}"), "10")).await;
        assert_eq!(
            (duplicate.status, duplicate.body["code"].as_str()),
            (409, Some("DUPLICATE_TRANSACTION")),
            "{duplicate:?}"
        );
        assert_eq!(duplicate.body["transfer_id"], transfer.as_str());
        let invalid = s.post(&s.request("6ba7b810-9dad-11d1-80b4", "1")).await;
        assert_eq!((invalid.status, invalid.body["code"].as_str()), (400, Some("INVALID_REQUEST")));
    }
}

#[tokio::test]
async fn destinations_must_be_wallets() {
    for backend in BACKENDS {
        let s = Setup::new(backend, "", 1_000_000).await;
        let zero = Address::ZERO.to_string();
        let mut structured = s.request(&uuid::Uuid::new_v4().to_string(), "1");
        structured["address_destination"]["address"] = json!(zero);
        let mut legacy = s.request(&uuid::Uuid::new_v4().to_string(), "1");
        legacy.as_object_mut().unwrap().remove("address_destination");
        legacy["destination_address"] = json!(zero);
        legacy["destination_chain"] = json!(CHAIN.as_str());
        // A Solana wallet's USDC token account: a program-derived address.
        let wallet = MnemonicSigner::from_phrase(MNEMONIC).unwrap().solana_address(KeyRef::Omnibus).unwrap();
        let mint = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU".parse().unwrap();
        let token_account = custody_indexer::solana::instructions::ata(
            &wallet.parse().unwrap(),
            &mint,
            custody_indexer::solana::decode::TOKEN_PROGRAM,
        )
        .to_string();
        let mut to_token_account = s.request(&uuid::Uuid::new_v4().to_string(), "1");
        to_token_account["currency_symbol"] = json!("USDC");
        to_token_account["address_destination"] =
            json!({ "address": token_account, "chain": "SOLANA_DEVNET" });
        for (body, field, reason) in [
            (&structured, "address_destination.address", "zero address"),
            (&legacy, "destination_address", "zero address"),
            (&to_token_account, "address_destination.address", "not a wallet"),
        ] {
            let answer = s.post(body).await;
            assert_eq!(
                (answer.status, answer.body["code"].as_str()),
                (400, Some("INVALID_REQUEST")),
                "{answer:?}"
            );
            let message = answer.body["message"].as_str().unwrap();
            assert!(message.starts_with(field) && message.contains(reason), "{backend:?}: {message}");
        }
        // The wallet itself passes validation (refused further on: the
        // treasury has no address on Solana).
        to_token_account["address_destination"]["address"] = json!(wallet);
        let answer = s.post(&to_token_account).await;
        assert!(
            answer.body["message"].as_str().unwrap().contains("has no address on SOLANA_DEVNET"),
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn a_limit_policy_names_a_listed_asset() {
    let anvil = Anvil::start().await;
    let token = anvil.deploy_token("TUSD").await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], Some(&token.to_string()), ""));
    env.identity("default", "i");
    env.ok(&[
        "accounts",
        "add",
        "--account-id",
        "a",
        "--identity-id",
        "i",
        "--type",
        "SEGREGATED",
        "--address",
        &Address::repeat_byte(7).to_string(),
        "--chains",
        CHAIN.as_str(),
    ]);
    let refused = env
        .command(&[
            "limits",
            "create",
            "--account-id",
            "a",
            "--currency-symbol",
            "USDT",
            "--max-per-transfer",
            "5",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("USDT is not listed"), "{stderr}");
    assert_eq!(env.ok(&["limits", "list", "--json"]).trim(), "[]");
    for listed in ["TUSD", "ETH"] {
        env.ok(&[
            "limits",
            "create",
            "--account-id",
            "a",
            "--currency-symbol",
            listed,
            "--max-per-transfer",
            "5",
        ]);
    }
}

#[tokio::test]
async fn a_transfer_no_sender_takes_fails_after_submit_within_secs() {
    for backend in BACKENDS {
        let s = Setup::new(backend, "submit_within_secs = 2", 5_000_000).await;
        // A second instance sweeping the same store at the same time.
        let other = CancellationToken::new();
        tokio::spawn(custody_indexer::transfers::expire_unsent(
            s.app.store().clone(),
            s.chains.clone(),
            other.clone(),
        ));
        let created = s.post(&s.request(&uuid::Uuid::new_v4().to_string(), "5")).await;
        assert_eq!(created.status, 201, "{created:?}");
        let id = created.body["id"].as_str().unwrap().to_string();
        assert_eq!(s.available().await, "0", "held while accepted");
        let failed = eventually(Duration::from_secs(30), "the unsent transfer to fail", || async {
            let transfer = s.app.get(&format!("/v2/crypto/transfers/{id}"), &s.key).await.body;
            (transfer["status"] == "FAILED").then_some(transfer)
        })
        .await;
        assert_eq!(failed["failure_details"]["code"], "NOT_SUBMITTED");
        let message = failed["failure_details"]["message"].as_str().unwrap();
        assert!(
            message.contains(
                "not submitted within submit_within_secs (2 s): no sender on ETHEREUM_TESTNET took"
            ),
            "{message}"
        );
        assert_eq!(s.available().await, "5", "the hold is released");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let events = s.app.get("/v2/events?limit=100", &s.key).await.body;
        let events: Vec<&Value> =
            events["events"].as_array().unwrap().iter().filter(|e| e["data"]["id"] == id.as_str()).collect();
        assert_eq!(events.len(), 1, "{backend:?}: announced once by two sweepers: {events:?}");
        assert_eq!(events[0]["type"], "crypto_transfer_failed");
        assert_eq!(events[0]["data"]["failure_details"], failed["failure_details"]);
        other.cancel();
    }
}
