//! Sponsored transfers on a real local Solana network: the sponsor pays every
//! fee and the rent of a destination token account it creates, the owner's
//! key signs, and the gas ledger equals what the transactions' metadata
//! says the fee payer paid, to the lamport.

use crate::common;

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use alloy::primitives::U256;
use alloy::transports::http::reqwest::Method;
use common::{
    api::{Answer, answers, send, send_json},
    cli::{Env, Process},
    dead_port, eventually,
    proxy::{self, FaultyRpc},
    solana::{SOL, SolanaNode, TOKEN, ata, create_ata, key, mint_to},
};
use custody_indexer::chain::Chain;
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

pub(crate) const CHAIN: Chain = Chain::SolanaDevnet;
pub(crate) const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

pub(crate) async fn airdrop(node: &SolanaNode, to: &Pubkey, lamports: u64) {
    let signature = node.rpc.request_airdrop(to, lamports).await.unwrap();
    eventually(Duration::from_secs(30), "the airdrop", || async {
        node.rpc.confirm_transaction(&signature).await.unwrap().then_some(())
    })
    .await;
}

async fn lamports(node: &SolanaNode, of: &Pubkey) -> u64 {
    node.rpc.get_balance_with_commitment(of, CommitmentConfig::finalized()).await.unwrap().value
}

pub(crate) struct Setup {
    pub(crate) node: SolanaNode,
    pub(crate) env: Env,
    key: String,
    base: String,
    pub(crate) sponsor: Pubkey,
    omnibus: Pubkey,
    pub(crate) alice: Pubkey,
    pub(crate) mint: Pubkey,
    /// Between `run` and the node, when asked for.
    proxy: Option<FaultyRpc>,
    _run: Process,
}

/// The variables of a service whose keys come from [`MNEMONIC`].
pub(crate) fn mnemonic() -> Vec<(String, String)> {
    vec![("CUSTODY_INDEXER_MNEMONIC".into(), MNEMONIC.into())]
}

impl Setup {
    /// A local network with a TUSD mint, the service's wallets funded,
    /// alice (segregated, 1 SOL and 100 TUSD) and the omnibus account
    /// `treasury`, and `run` reaching the node directly or through a proxy.
    pub(crate) async fn new(transfers: &str, through_proxy: bool) -> Self {
        Self::with_keys(transfers, through_proxy, mnemonic()).await
    }

    /// As [`Setup::new`], the service's keys named by `keys`.
    async fn with_keys(transfers: &str, through_proxy: bool, keys: Vec<(String, String)>) -> Self {
        let node = SolanaNode::start().await;
        Self::on(node, transfers, through_proxy, keys, &[], "").await
    }

    /// As [`Setup::new`] on `node`, the chain file also listing the RPC
    /// URLs `also` after the node's (or the proxy's), with `lines` added.
    pub(crate) async fn on(
        node: SolanaNode,
        transfers: &str,
        through_proxy: bool,
        keys: Vec<(String, String)>,
        also: &[String],
        lines: &str,
    ) -> Self {
        let proxy = if through_proxy { Some(proxy::start(node.url.clone()).await) } else { None };
        let mut rpc = proxy.as_ref().map_or(node.url.clone(), |p| p.url.clone());
        for url in also {
            rpc = format!("{rpc}\", \"{url}");
        }
        let minter = node.funded(10 * SOL).await;
        let mint = node.create_mint(&minter, TOKEN, 6).await;
        let env = Env::with_chain_file(&format!(
            "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
             poll_interval_ms = 100\nmax_block_range = 200\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n{lines}\n\
             [[assets]]\nsymbol = \"TUSD\"\ncontract_address = \"{mint}\"\ndecimals = 6\ntoken_program = \"{TOKEN}\"\n\
             [transfers]\nnative_usd = \"150\"\n{transfers}\n",
            node.genesis_hash, rpc
        ));
        let key = env.organization_with_key();
        let cli = |args: &[&str]| cli_with(&env, args, &keys);
        let wallets: Value = serde_json::from_str(&cli(&["wallets", "list", "--json"])).unwrap();
        let sponsor = key_of(&wallets[0]["sponsor"]);
        let omnibus = key_of(&wallets[0]["omnibus"]);
        airdrop(&node, &sponsor, 5 * SOL).await;
        airdrop(&node, &omnibus, 5 * SOL).await;
        let created = |id: &str, kind: &str| -> Pubkey {
            env.identity("acme", id);
            let out = cli(&[
                "accounts",
                "create",
                "--organization",
                "acme",
                "--account-id",
                id,
                "--identity-id",
                id,
                "--type",
                kind,
                "--json",
            ]);
            let account: Value = serde_json::from_str(&out).unwrap();
            key_of(&account["addresses"][0]["address"])
        };
        let alice = created("alice", "SEGREGATED");
        assert_eq!(created("treasury", "OMNIBUS"), omnibus);
        airdrop(&node, &alice, SOL).await;
        node.send(
            &[
                create_ata(&minter.pubkey(), &alice, &mint, TOKEN),
                mint_to(TOKEN, &mint, &ata(&alice, &mint, TOKEN), &minter.pubkey(), 100_000_000),
            ],
            &minter,
            &[],
        )
        .await;
        let port = dead_port();
        let vars: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let run = env.listen("run", CHAIN, port, &vars);
        let base = format!("http://127.0.0.1:{port}");
        eventually(Duration::from_secs(30), "the API", || async {
            answers(&format!("{base}/healthz")).await.then_some(())
        })
        .await;
        Self { node, env, key, base, sponsor, omnibus, alice, mint, proxy, _run: run }
    }

    pub(crate) async fn post(&self, account: &str, amount: &str, symbol: &str, to: String) -> Answer {
        let body = json!({
            "request_id": uuid::Uuid::new_v4().to_string(), "account_id": account, "amount": amount,
            "currency_symbol": symbol, "address_destination": { "address": to, "chain": CHAIN.as_str() },
        });
        send_json(Method::POST, &format!("{}/v2/crypto/transfers", self.base), Some(&self.key), Some(&body))
            .await
    }

    pub(crate) async fn get(&self, path: &str) -> Value {
        send(Method::GET, &format!("{}{path}", self.base), Some(&self.key)).await.body
    }

    /// Waits until the transfer reaches `status` (failing on another terminal one).
    pub(crate) async fn until(&self, id: &str, status: &str) -> Value {
        eventually(Duration::from_secs(90), &format!("{id} {status}"), || async {
            let t = self.get(&format!("/v2/crypto/transfers/{id}")).await;
            let now = t["status"].as_str().unwrap().to_string();
            assert!(now == status || !["CONFIRMED", "FAILED", "DROPPED"].contains(&now.as_str()), "{t}");
            (now == status).then_some(t)
        })
        .await
    }
}

fn cli(env: &Env, args: &[&str]) -> String {
    cli_with(env, args, &mnemonic())
}

fn cli_with(env: &Env, args: &[&str], keys: &[(String, String)]) -> String {
    let out = env.command(args).envs(keys.iter().map(|(k, v)| (k, v))).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn key_of(value: &Value) -> Pubkey {
    key(value.as_str().unwrap())
}

#[tokio::test]
async fn the_sponsor_pays_fees_and_rent_and_the_ledger_matches_the_chain() {
    let s = Setup::new("", false).await;
    let node = &s.node;
    let (sponsor_before, alice_before, omnibus_before) =
        (lamports(node, &s.sponsor).await, lamports(node, &s.alice).await, lamports(node, &s.omnibus).await);

    let outside = Keypair::new().pubkey();
    let refused = s.post("alice", "1", "TUSD", "0x4242424242424242424242424242424242424242".into()).await;
    assert_eq!(refused.status, 400, "an EVM address is no Solana destination");
    assert!(refused.body["message"].as_str().unwrap().contains("Solana"), "{:?}", refused.body);
    let mut ids = Vec::new();
    for (account, amount, symbol) in
        [("alice", "5", "TUSD"), ("alice", "0.25", "SOL"), ("treasury", "1", "SOL")]
    {
        let answer = s.post(account, amount, symbol, outside.to_string()).await;
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        ids.push(answer.body["id"].as_str().unwrap().to_string());
    }
    let mut settled = Vec::new();
    for id in &ids {
        settled.push(s.until(id, "CONFIRMED").await);
    }

    // The funds arrived; the owners paid the amounts only.
    let outside_tokens = node.rpc.get_token_account_balance(&ata(&outside, &s.mint, TOKEN)).await.unwrap();
    assert_eq!(outside_tokens.amount, "5000000");
    assert_eq!(lamports(node, &outside).await, SOL + SOL / 4);
    assert_eq!(alice_before - lamports(node, &s.alice).await, SOL / 4, "alice paid no fee");
    assert_eq!(omnibus_before - lamports(node, &s.omnibus).await, SOL, "the omnibus wallet paid no fee");

    // The ledger: each signature's fee from its metadata, and the new token
    // account's rent for the first; the sponsor paid exactly their sum.
    let store = s.env.store().await;
    let rent = node.rpc.get_minimum_balance_for_rent_exemption(165).await.unwrap();
    let mut total = 0u64;
    for (i, id) in ids.iter().enumerate() {
        let signature = settled[i]["transaction_hash"].as_str().unwrap();
        let encoding = solana_transaction_status_client_types::UiTransactionEncoding::Json;
        let tx = node.rpc.get_transaction(&signature.parse().unwrap(), encoding).await.unwrap();
        let fee = tx.transaction.meta.unwrap().fee;
        let mut expected = vec![(signature.to_string(), "NETWORK_FEE".to_string(), U256::from(fee))];
        total += fee;
        if i == 0 {
            expected.push((signature.to_string(), "RENT".to_string(), U256::from(rent)));
            total += rent;
        }
        let mut entries = store.gas_entries(id).await.unwrap();
        entries.sort();
        expected.sort();
        assert_eq!(entries, expected, "{id}");
        assert_eq!(settled[i]["network_fee"]["currency_symbol"], "SOL");
    }
    assert_eq!(sponsor_before - lamports(node, &s.sponsor).await, total);
    let usage: Value =
        serde_json::from_str(&cli(&s.env, &["gas", "usage", "--organization", "acme", "--json"])).unwrap();
    assert_eq!(usage[0]["by_chain"][0]["chain"], CHAIN.as_str());
    assert_eq!(usage[0]["by_chain"][0]["transactions"], 3);
}

#[tokio::test]
async fn a_lost_transaction_is_signed_again_after_expiry_then_dropped_at_the_window_end() {
    let s = Setup::new("window_secs = 12\nrebroadcast_after_secs = 1", true).await;
    let node = &s.node;
    let faults = &s.proxy.as_ref().unwrap().faults;
    // The endpoint answers sendTransaction with a signature and loses the transaction.
    let fake = "1111111111111111111111111111111111111111111111111111111111111111";
    faults.swallowed.lock().unwrap().push(("sendTransaction".into(), json!(fake)));
    let (sponsor_before, alice_before) = (lamports(node, &s.sponsor).await, lamports(node, &s.alice).await);
    let outside = Keypair::new().pubkey();
    let answer = s.post("alice", "0.1", "SOL", outside.to_string()).await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    let id = answer.body["id"].as_str().unwrap().to_string();
    s.until(&id, "SUBMITTED").await;
    let dropped = s.until(&id, "DROPPED").await;

    // Signed again with a fresh blockhash only after the previous one expired,
    // never twice in flight; none of them ever reached the chain.
    let store = s.env.store().await;
    let signed = store.transfer_transactions(&id).await.unwrap();
    assert!(signed.len() >= 2, "signed again after expiry: {signed:?}");
    assert!(
        signed.windows(2).all(|w| w[1].nonce > w[0].nonce),
        "each signature has a later last valid height"
    );
    let signatures: Vec<_> = signed.iter().map(|t| t.hash.parse().unwrap()).collect();
    let statuses = node.rpc.get_signature_statuses_with_history(&signatures).await.unwrap().value;
    assert!(statuses.iter().all(Option::is_none), "{statuses:?}");
    assert!(faults.swallowed_count.load(Ordering::SeqCst) >= 2);
    assert_eq!(dropped["transaction_hash"], signed.last().unwrap().hash.as_str());

    // Nothing moved, nothing was paid, and the drop was announced.
    assert_eq!(lamports(node, &s.alice).await, alice_before);
    assert_eq!(lamports(node, &s.sponsor).await, sponsor_before);
    assert_eq!(store.gas_entries(&id).await.unwrap(), []);
    let events = s.get("/v2/events?limit=100").await;
    let of: Vec<(String, String)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["id"] == id.as_str())
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["data"]["status"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        of,
        [
            ("crypto_transfer_submitted".to_string(), "SUBMITTED".to_string()),
            ("crypto_transfer_updated".to_string(), "DROPPED".to_string())
        ]
    );

    // Once the endpoint delivers again, the next transfer lands.
    faults.swallowed.lock().unwrap().clear();
    let answer = s.post("alice", "0.1", "SOL", outside.to_string()).await;
    let next = answer.body["id"].as_str().unwrap().to_string();
    s.until(&next, "CONFIRMED").await;
    assert_eq!(lamports(node, &outside).await, SOL / 10);
}

#[tokio::test]
async fn a_lagging_nodes_blockhash_not_found_does_not_fail_the_transfer_before_expiry() {
    let s = Setup::new("rebroadcast_after_secs = 1", true).await;
    let faults = &s.proxy.as_ref().unwrap().faults;
    // A node behind the cluster: its preflight does not know the fresh
    // blockhash yet, for the first few sends.
    let refusal = "Transaction simulation failed: Blockhash not found";
    faults.method_errors.lock().unwrap().push(("sendTransaction".into(), -32002, refusal.into(), 5));
    let outside = Keypair::new().pubkey();
    let answer = s.post("alice", "0.1", "SOL", outside.to_string()).await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    let id = answer.body["id"].as_str().unwrap().to_string();
    // `until` fails on any other terminal status on the way.
    let confirmed = s.until(&id, "CONFIRMED").await;
    assert_eq!(faults.failed.load(Ordering::SeqCst), 5, "every refusal was met");

    // Sent once: one signature, which is the transfer's, and the lamports arrived once.
    let signed = s.env.store().await.transfer_transactions(&id).await.unwrap();
    assert_eq!(signed.len(), 1, "{signed:?}");
    assert_eq!(confirmed["transaction_hash"], signed[0].hash.as_str());
    assert_eq!(lamports(&s.node, &outside).await, SOL / 10);
}

#[tokio::test]
async fn a_lagging_nodes_missing_status_does_not_end_a_transfer_that_landed() {
    // A short window: a blockhash taken as expired would drop the transfer.
    let s = Setup::new("window_secs = 5\nrebroadcast_after_secs = 1", true).await;
    let node = &s.node;
    let faults = &s.proxy.as_ref().unwrap().faults;
    // Statuses come from a node far behind, which has not seen the slot the
    // transaction lands in; heights and blockhashes from the real node.
    faults.statuses_behind.store(1_000_000, Ordering::SeqCst);
    let outside = Keypair::new().pubkey();
    let answer = s.post("alice", "0.1", "SOL", outside.to_string()).await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    let id = answer.body["id"].as_str().unwrap().to_string();
    s.until(&id, "SUBMITTED").await;
    let store = s.env.store().await;
    let sent = store.transfer_transactions(&id).await.unwrap().remove(0);
    let signature = sent.hash.parse().unwrap();

    // The transaction landed, then the finalized chain passed its blockhash.
    eventually(Duration::from_secs(60), "the landed transaction's blockhash to expire", || async {
        let statuses = node.rpc.get_signature_statuses_with_history(&[signature]).await.unwrap().value;
        let height = node.rpc.get_block_height_with_commitment(CommitmentConfig::finalized()).await.unwrap();
        (statuses[0].is_some() && height > sent.nonce).then_some(())
    })
    .await;
    let expired_at = Instant::now();
    let asked_since = || {
        let calls = faults.calls.lock().unwrap();
        calls.iter().filter(|(at, method)| *at > expired_at && method == "getSignatureStatuses").count()
    };
    eventually(Duration::from_secs(30), "the lagging node to be asked again", || async {
        let t = s.get(&format!("/v2/crypto/transfers/{id}")).await;
        assert_eq!(t["status"], "SUBMITTED", "a lagging node's silence ended a landed transfer: {t}");
        (asked_since() >= 5).then_some(())
    })
    .await;

    // A node that saw the slot answers: the transfer settles with the
    // transaction that landed, signed once, and the lamports moved once.
    faults.statuses_behind.store(0, Ordering::SeqCst);
    let confirmed = s.until(&id, "CONFIRMED").await;
    let signed = store.transfer_transactions(&id).await.unwrap();
    assert_eq!(signed.len(), 1, "never signed again: {signed:?}");
    assert_eq!(confirmed["transaction_hash"], sent.hash.as_str());
    assert_eq!(lamports(node, &outside).await, SOL / 10);
}

/// TUSD and SOL sent from a segregated account and SOL from the omnibus
/// wallet to a new address, each `CONFIRMED` and the address holding what
/// was sent: the settled transfers.
async fn settled_to_outside(s: &Setup) -> Vec<Value> {
    let outside = Keypair::new().pubkey();
    let mut ids = Vec::new();
    for (account, amount, symbol) in
        [("alice", "2", "TUSD"), ("alice", "0.1", "SOL"), ("treasury", "0.5", "SOL")]
    {
        let answer = s.post(account, amount, symbol, outside.to_string()).await;
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        ids.push(answer.body["id"].as_str().unwrap().to_string());
    }
    let mut settled = Vec::new();
    for id in &ids {
        settled.push(s.until(id, "CONFIRMED").await);
    }
    let tokens = s.node.rpc.get_token_account_balance(&ata(&outside, &s.mint, TOKEN)).await.unwrap();
    assert_eq!(tokens.amount, "2000000");
    assert_eq!(lamports(&s.node, &outside).await, SOL / 10 + SOL / 2);
    settled
}

/// Keys in a PKCS#11 token (SoftHSM2): SOL and TUSD transfers from a
/// segregated account and the omnibus wallet, the sponsor paying, every
/// signature a `CKM_EDDSA` signature by a key that never left the token.
#[tokio::test]
async fn token_keys_sign_sol_and_token_transfers() {
    let token = common::softhsm::Token::new("solana-transfers");
    let s = Setup::with_keys("", false, token.vars()).await;
    let keys = token.private_keys();
    for label in ["sponsor:platform:solana", "omnibus:platform:solana", "account:2:solana"] {
        assert!(keys.contains(&format!("custody-indexer:{label}")), "{label}: {keys}");
    }
    settled_to_outside(&s).await;
}

/// Keys in AWS KMS (the stand-in): SOL and TUSD transfers from a
/// segregated account and the omnibus wallet, the sponsor paying, every
/// signature an `ED25519_SHA_512` signature of the raw message by a key
/// that never left KMS.
#[cfg(feature = "aws-kms")]
#[tokio::test(flavor = "multi_thread")]
async fn kms_keys_sign_sol_and_token_transfers() {
    let kms = common::kms::Kms::start().await;
    let s = Setup::with_keys("", false, kms.vars()).await;
    let aliases = kms.aliases();
    for alias in ["sponsor/platform/solana", "omnibus/platform/solana", "account/2/solana"] {
        assert!(aliases.contains(&format!("alias/custody-indexer/{alias}")), "{alias}: {aliases:?}");
    }
    settled_to_outside(&s).await;
    assert!(kms.calls("Sign") >= 3, "every transaction signed in KMS");
}

/// Keys in OpenBao's Transit engine: SOL and TUSD transfers from a
/// segregated account and the omnibus wallet, the sponsor paying, every
/// signature made by Ed25519 keys that never left the engine; the accounts'
/// addresses are the engine's public keys.
#[tokio::test]
async fn transit_keys_sign_sol_and_token_transfers() {
    let bao = common::openbao::Bao::start().await;
    let s = Setup::with_keys("", false, bao.vars()).await;
    assert_eq!(s.sponsor.to_string(), bao.public_key("custody-indexer.sponsor.platform.solana").await);
    assert_eq!(s.omnibus.to_string(), bao.public_key("custody-indexer.omnibus.platform.solana").await);
    assert_eq!(s.alice.to_string(), bao.public_key("custody-indexer.account.2.solana").await);
    let (_, exported) = bao.call("transit/export/signing-key/custody-indexer.account.2.solana", None).await;
    assert!(exported["data"]["keys"].is_null(), "the key is not exportable: {exported}");

    for settled in settled_to_outside(&s).await {
        let id = &settled["id"];
        let signature = settled["transaction_hash"].as_str().unwrap();
        let encoding = solana_transaction_status_client_types::UiTransactionEncoding::Json;
        let tx = s.node.rpc.get_transaction(&signature.parse().unwrap(), encoding).await.unwrap();
        let solana_transaction_status_client_types::EncodedTransaction::Json(ui) = tx.transaction.transaction
        else {
            panic!("{id}: a JSON transaction");
        };
        let solana_transaction_status_client_types::UiMessage::Raw(message) = ui.message else {
            panic!("{id}: a raw message");
        };
        assert_eq!(message.account_keys[0], s.sponsor.to_string(), "{id}: the sponsor pays the fee");
    }

    // EVM needs secp256k1, which Transit has not: `run` with an EVM chain
    // refuses to start and says so.
    let env = Env::with_chain_file(&common::chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let mut run = env.command(&["run", "--chain", common::CHAIN.as_str()]);
    let out = run
        .envs(bao.vars().iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("no secp256k1 keys"), "{error}");
}
