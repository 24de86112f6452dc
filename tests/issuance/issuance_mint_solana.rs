//! A wire minted on the local Solana network: `run` in `sandbox`, the SPL
//! mint placed by `issuance deploy` with the issuer its authority, the
//! mint sent by the chain's sender (the sponsor pays the fee and the new
//! token account's rent, the issuer signs), its deposit `CONFIRMED` and the
//! mint `COMPLETED`; and a wire to a virtual account delivered the same
//! way, its on-ramp announced at each of its five statuses; and a
//! returned off-ramp whose first refund every node refused, sent again once
//! its blockhash expired.

use crate::common;

use std::time::Duration;

use alloy::transports::http::reqwest::Method;
use common::{
    api::{answers, send, send_json},
    cli::Env,
    dead_port, eventually,
    softhsm::Token,
    solana::{SOL, SolanaNode, TOKEN, ata},
};
use custody_indexer::chain::Chain;
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_pubkey::Pubkey;

const CHAIN: Chain = Chain::SolanaDevnet;
const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

fn key_of(value: &Value) -> Pubkey {
    value.as_str().unwrap().parse().unwrap()
}

/// The local Solana network with the platform's USDC placed by `issuance
/// deploy`, organization `acme` and its `ACTIVE`, fiat-enabled identity
/// `ada` with account `ada-1`, and `run` in `sandbox` over them.
struct Platform {
    node: SolanaNode,
    env: Env,
    key: String,
    sponsor: Pubkey,
    issuer: Pubkey,
    mint: Pubkey,
    owner: Pubkey,
    base: String,
    /// Between `run` and the node.
    proxy: common::proxy::FaultyRpc,
    /// The signer's variables every command and `run` gets.
    keys: Vec<(String, String)>,
    _run: common::cli::Process,
}

impl Platform {
    async fn start() -> Self {
        Self::start_with(vec![("CUSTODY_INDEXER_MNEMONIC".into(), MNEMONIC.into())]).await
    }

    /// As [`Platform::start`], every key where `keys` (a signer's
    /// variables) says.
    async fn start_with(keys: Vec<(String, String)>) -> Self {
        let node = SolanaNode::start().await;
        let proxy = common::proxy::start(node.url.clone()).await;
        let toml = format!(
            "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
             poll_interval_ms = 100\nmax_block_range = 200\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n\
             [transfers]\nnative_usd = \"150\"\n",
            node.genesis_hash, node.url
        );
        let env = Env::with_chain_file(&toml);
        let cli = |args: &[&str]| {
            let out = env.command(args).envs(keys.clone()).output().unwrap();
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        let wallets: Value = serde_json::from_str(&cli(&["wallets", "list", "--json"])).unwrap();
        let (sponsor, issuer) = (key_of(&wallets[0]["sponsor"]), key_of(&wallets[0]["issuer"]));
        let airdrop = node.rpc.request_airdrop(&sponsor, 5 * SOL).await.unwrap();
        eventually(Duration::from_secs(30), "the airdrop", || async {
            node.rpc.confirm_transaction(&airdrop).await.unwrap().then_some(())
        })
        .await;
        let printed =
            cli(&["issuance", "deploy", "--chain", CHAIN.as_str(), "--symbol", "USDC", "--decimals", "6"]);
        std::fs::write(env.chains.join("test.toml"), format!("{toml}\n{printed}")).unwrap();
        let mint: Pubkey = printed
            .lines()
            .find_map(|l| l.strip_prefix("contract_address = "))
            .unwrap()
            .trim_matches('"')
            .parse()
            .unwrap();

        let key = env.organization_with_key();
        env.identity("acme", "ada");
        cli(&[
            "identities",
            "fiat",
            "enable",
            "ada",
            "--organization",
            "acme",
            "--by",
            "kyc",
            "--reason",
            "wires",
        ]);
        let account: Value = serde_json::from_str(&cli(&[
            "accounts",
            "create",
            "--organization",
            "acme",
            "--account-id",
            "ada-1",
            "--identity-id",
            "ada",
            "--type",
            "SEGREGATED",
            "--json",
        ]))
        .unwrap();
        let owner = key_of(&account["addresses"][0]["address"]);

        // The commands above reached the node directly (they block this
        // runtime, which serves the proxy); `run` goes through the proxy.
        let file = env.chains.join("test.toml");
        std::fs::write(&file, std::fs::read_to_string(&file).unwrap().replace(&node.url, &proxy.url))
            .unwrap();
        let port = dead_port();
        let mut env_vars: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env_vars.push(("CUSTODY_INDEXER_ENVIRONMENT", "sandbox"));
        let _run = env.listen("run", CHAIN, port, &env_vars);
        let base = format!("http://127.0.0.1:{port}");
        eventually(Duration::from_secs(30), "the API", || async {
            answers(&format!("{base}/healthz")).await.then_some(())
        })
        .await;
        drop(env_vars);
        Self { node, env, key, sponsor, issuer, mint, owner, base, proxy, keys, _run }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let answer =
            send_json(Method::POST, &format!("{}{path}", self.base), Some(&self.key), Some(&body)).await;
        assert!(answer.status == 200 || answer.status == 201, "{path}: {answer:?}");
        answer.body
    }

    async fn get(&self, path: &str) -> Value {
        send(Method::GET, &format!("{}{path}", self.base), Some(&self.key)).await.body
    }

    /// The account's USDC, finalized, once its token account exists.
    async fn held_now(&self) -> Option<String> {
        let finalized = CommitmentConfig::finalized();
        let account = ata(&self.owner, &self.mint, TOKEN);
        let balance = self.node.rpc.get_token_account_balance_with_commitment(&account, finalized).await;
        balance.ok().map(|b| b.value.amount)
    }

    /// The account's USDC, finalized.
    async fn held(&self) -> String {
        let finalized = CommitmentConfig::finalized();
        let account = ata(&self.owner, &self.mint, TOKEN);
        self.node
            .rpc
            .get_token_account_balance_with_commitment(&account, finalized)
            .await
            .unwrap()
            .value
            .amount
    }
}

#[tokio::test]
async fn a_wire_is_minted_to_the_clients_token_account_and_completes() {
    minted_once(&Platform::start().await).await;
}

/// Every key in a PKCS#11 token (SoftHSM2), Ed25519 keys made there: the
/// deployment, the account's key and the mint are the token's.
#[tokio::test]
async fn a_wire_is_minted_with_every_key_in_a_token() {
    let token = Token::new("solana-mint");
    let platform = Platform::start_with(token.vars()).await;
    minted_once(&platform).await;
    let keys = token.private_keys();
    for label in ["sponsor:platform:solana", "issuer:platform:solana", "account:"] {
        assert!(keys.contains(&format!("custody-indexer:{label}")), "{label} in the token: {keys}");
    }
    assert!(keys.contains("EC_EDWARDS") || keys.contains("EDDSA"), "Ed25519 keys: {keys}");
}

/// A wire of 250 USD minted to `ada-1` once: the issuer signs as the
/// mint's authority, the sponsor pays, the deposit confirmed and the books
/// agree.
async fn minted_once(platform: &Platform) {
    let Platform { node, env, sponsor, issuer, mint, base, key, .. } = platform;
    let post = |path: &'static str, body: Value| platform.post(path, body);
    let instruction = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "identity_id": "ada",
        "stablecoin_symbol": "USDC", "chain": CHAIN.as_str(), "mint_destination_address_id": "ada-1" });
    let memo = post("/v2/issuance/mint-instructions", instruction).await["memo_id"].clone();
    let wire = json!({ "amount": "250.00", "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
    let id = post("/v2/simulation/fiat-deposit", wire).await["mint_id"].as_str().unwrap().to_string();

    let completed = eventually(Duration::from_secs(90), "the mint COMPLETED", || async {
        let mint = send(Method::GET, &format!("{base}/v2/issuance/mints/{id}"), Some(key)).await.body;
        assert_ne!(mint["status"], "FAILED", "{mint}");
        (mint["status"] == "COMPLETED").then_some(mint)
    })
    .await;

    let finalized = CommitmentConfig::finalized();
    assert_eq!(platform.held().await, "250000000");
    let supply = node.rpc.get_token_supply_with_commitment(mint, finalized).await.unwrap().value;
    assert_eq!(supply.amount, "250000000", "minted once");

    let signature = completed["transaction_hash"].as_str().expect("the mint's signature");
    let deposits =
        send(Method::GET, &format!("{base}/v2/crypto/deposits?account_id=ada-1"), Some(key)).await.body;
    let deposits = deposits["deposits"].as_array().unwrap();
    assert_eq!(deposits.len(), 1, "{deposits:?}");
    assert_eq!(deposits[0]["id"], completed["deposit_id"]);
    assert_eq!(
        (deposits[0]["status"].as_str(), deposits[0]["amount"].as_str()),
        (Some("CONFIRMED"), Some("250"))
    );
    assert_eq!(deposits[0]["transaction_hash"], signature);
    // The sponsor paid the fee; the issuer signed as the mint's authority.
    let encoding = solana_transaction_status_client_types::UiTransactionEncoding::Base64;
    let tx = node.rpc.get_transaction(&signature.parse().unwrap(), encoding).await.unwrap();
    let keys = tx
        .transaction
        .transaction
        .decode()
        .expect("a binary encoding")
        .message
        .static_account_keys()
        .to_vec();
    assert_eq!((keys[0], keys[1]), (*sponsor, *issuer), "fee payer first, then the issuer");

    // The command reaches the node through the proxy this runtime serves.
    let mut reconcile = env.command(&["issuance", "reconcile", "--chain", CHAIN.as_str()]);
    let out = tokio::task::spawn_blocking(move || reconcile.output().unwrap()).await.unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}{}", String::from_utf8_lossy(&out.stderr));
    assert!(printed.contains("USDC on SOLANA_DEVNET: received 250.00 USD = minted 250 +"), "{printed}");
    assert!(printed.contains("supply 250 (being sent 0): agree"), "{printed}");
}

#[tokio::test]
async fn a_wire_to_a_virtual_account_is_delivered_on_solana_in_five_announced_steps() {
    let platform = Platform::start().await;
    let body = json!({ "request_id": "va-1",
        "destination": { "account_id": "ada-1", "currency": "USDC", "chain": CHAIN.as_str() },
        "source": { "banking_country": "US" } });
    let va =
        platform.post("/v2/identities/ada/virtual-accounts", body).await["id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(15), "the virtual account ACTIVE", || async {
        let page = platform.get("/v2/identities/ada/virtual-accounts").await;
        (page["virtual_accounts"][0]["status"] == "VIRTUAL_ACCOUNT_STATUS_ACTIVE").then_some(())
    })
    .await;
    let wire = json!({ "virtual_account_id": va, "amount": "42.10", "currency": "USD" });
    let answer = platform.post("/v2/simulation/virtual-account-deposit", wire).await;
    let id = answer["conversion_id"].as_str().unwrap().to_string();
    let conversion = eventually(Duration::from_secs(90), "the conversion COMPLETED", || async {
        let conversion = platform.get(&format!("/v2/conversions/{id}")).await;
        assert_ne!(conversion["status"], "FAILED", "{conversion}");
        (conversion["status"] == "COMPLETED").then_some(conversion)
    })
    .await;
    assert_eq!(platform.held().await, "42100000", "delivered to the account's token account");
    assert_eq!(conversion["destination"], json!({ "currency": "USDC", "amount": "42.10" }));
    let page = platform.get("/v2/events?limit=100").await;
    let statuses: Vec<Value> = common::api::events_about(&page, "conversion_notification_update", &id)
        .iter()
        .map(|e| e["data"]["status"].clone())
        .collect();
    assert_eq!(statuses, ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"]);

    // Off-ramps from Solana: one paid, one returned and sent back by the
    // settlement wallet (the sponsor paying the fee).
    let paid = off_ramp(&platform, "000123456789", "10.00").await;
    let returned = off_ramp(&platform, "000123459999", "12.10").await;
    assert_eq!(ended(&platform, &paid).await["status"], "COMPLETED");
    let back = ended(&platform, &returned).await;
    assert_eq!(back["status"], "RETURNED", "{back}");
    assert_eq!(back["refund_details"]["amount"], "12.1", "{back}");
    eventually(Duration::from_secs(60), "the refund finalized", || async {
        (platform.held().await == "32100000").then_some(())
    })
    .await;
    let wallets: Value = serde_json::from_str(
        &String::from_utf8(
            platform
                .env
                .command(&["wallets", "list", "--json"])
                .envs(platform.keys.clone())
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap(),
    )
    .unwrap();
    let settlement = ata(&key_of(&wallets[0]["settlement"]), &platform.mint, TOKEN);
    let finalized = CommitmentConfig::finalized();
    let kept =
        platform.node.rpc.get_token_account_balance_with_commitment(&settlement, finalized).await.unwrap();
    assert_eq!(kept.value.amount, "10000000", "the settlement wallet keeps what was paid out");
}

/// An off-ramp of `amount` USDC of `ada-1` by a US wire to a bank account
/// numbered `number`: its id.
async fn off_ramp(platform: &Platform, number: &str, amount: &str) -> String {
    let bank = json!({ "request_id": number, "identity_id": "ada", "bank_account_details": common::issuance::us_bank(number) });
    let bank = platform.post("/v2/issuance/bank-accounts", bank).await["id"].as_str().unwrap().to_string();
    let body = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "type": "OFF_RAMP", "account_id": "ada-1",
        "payment_instructions_id": bank, "amount": amount, "source": { "currency": "USDC", "chain": CHAIN.as_str() } });
    platform.post("/v2/conversions", body).await["id"].as_str().unwrap().to_string()
}

/// Conversion `id` once terminal.
async fn ended(platform: &Platform, id: &str) -> Value {
    eventually(Duration::from_secs(90), &format!("conversion {id} terminal"), || async {
        let conversion = platform.get(&format!("/v2/conversions/{id}")).await;
        ["COMPLETED", "FAILED", "RETURNED"].contains(&conversion["status"].as_str()?).then_some(conversion)
    })
    .await
}

/// Every node refuses the first refund of a returned off-ramp (as when the
/// settlement wallet was swept) until its blockhash expires; then the
/// wallet is whole again and an operator asks for the refund again. Before
/// the fix (checked against f395c56) the refund stayed `FAILED`
/// (`REJECTED_BY_NODE`) for good, never replaced: the conversion never ended
/// and the client's stablecoin never came back.
#[tokio::test]
async fn a_refund_refused_by_every_node_is_sent_again_once_its_blockhash_expired() {
    let platform = Platform::start().await;
    let instruction = json!({ "request_id": "mi-1", "identity_id": "ada",
        "stablecoin_symbol": "USDC", "chain": CHAIN.as_str(), "mint_destination_address_id": "ada-1" });
    let memo = platform.post("/v2/issuance/mint-instructions", instruction).await["memo_id"].clone();
    let wire = json!({ "amount": "20.00", "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
    platform.post("/v2/simulation/fiat-deposit", wire).await;
    eventually(Duration::from_secs(90), "the 20 USDC minted", || async {
        (platform.held_now().await? == "20000000").then_some(())
    })
    .await;

    let id = off_ramp(&platform, "000123459999", "20.00").await;
    eventually(Duration::from_secs(90), "the collect confirmed", || async {
        let page = platform.get("/v2/crypto/transfers?account_id=ada-1").await;
        let collect = page["transfers"].as_array()?.iter().find(|t| t["amount"] == "20")?.clone();
        (collect["status"] == "CONFIRMED").then_some(())
    })
    .await;
    let swept = "Transaction simulation failed: Error processing Instruction 0: custom program error: 0x1";
    platform.proxy.faults.method_errors.lock().unwrap().push((
        "sendTransaction".into(),
        -32002,
        swept.into(),
        100_000,
    ));
    let store = platform.env.store().await;
    let first = eventually(Duration::from_secs(90), "the first refund refused until it expired", || async {
        let refund = store.off_ramp_refund(&id).await.unwrap()?;
        let transfer = store.transfer(&refund).await.unwrap();
        assert_ne!(transfer.status.as_str(), "CONFIRMED", "the refund was sent before the refusals began");
        (transfer.status.as_str() == "FAILED").then_some(transfer)
    })
    .await;
    assert_eq!(first.failure_details.as_ref().unwrap().code, "REJECTED_BY_NODE", "{first:?}");

    // The wallet is whole again; an operator sends the refund now.
    platform.proxy.faults.method_errors.lock().unwrap().clear();
    let args =
        ["conversions", "refunds", "retry", &id, "--by", "ops", "--reason", "settlement wallet refilled"];
    let out = platform.env.command(&args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let back = ended(&platform, &id).await;
    assert_eq!(back["status"], "RETURNED", "{back}");
    eventually(Duration::from_secs(60), "the stablecoin back", || async {
        (platform.held().await == "20000000").then_some(())
    })
    .await;
    let actions = store.conversion_actions(&id).await.unwrap();
    assert_eq!(
        actions,
        [("REFUND_RETRIED".to_string(), "by:ops".to_string(), "settlement wallet refilled".to_string())]
    );
}
