//! Sponsored transfers on a real local Solana network: the sponsor pays every
//! fee and the rent of a destination token account it creates, the owner's
//! key signs, and the gas ledger equals what the transactions' metadata
//! says the fee payer paid, to the lamport.

mod common;

use std::time::Duration;

use alloy::primitives::U256;
use alloy::transports::http::reqwest::Method;
use common::{
    api::{answers, send, send_json},
    cli::Env,
    dead_port, eventually,
    solana::{SOL, SolanaNode, TOKEN, ata, create_ata, key, mint_to},
};
use custody_indexer::chain::Chain;
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

const CHAIN: Chain = Chain::SolanaDevnet;
const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

async fn airdrop(node: &SolanaNode, to: &Pubkey, lamports: u64) {
    let signature = node.rpc.request_airdrop(to, lamports).await.unwrap();
    eventually(Duration::from_secs(30), "the airdrop", || async {
        node.rpc.confirm_transaction(&signature).await.unwrap().then_some(())
    })
    .await;
}

async fn lamports(node: &SolanaNode, of: &Pubkey) -> u64 {
    node.rpc.get_balance_with_commitment(of, CommitmentConfig::finalized()).await.unwrap().value
}

#[tokio::test]
async fn the_sponsor_pays_fees_and_rent_and_the_ledger_matches_the_chain() {
    let node = SolanaNode::start().await;
    let minter = node.funded(10 * SOL).await;
    let mint = node.create_mint(&minter, TOKEN, 6).await;
    let env = Env::with_chain_file(&format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 200\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n\
         [[assets]]\nsymbol = \"TUSD\"\ncontract_address = \"{mint}\"\ndecimals = 6\ntoken_program = \"{TOKEN}\"\n\
         [transfers]\nnative_usd = \"150\"\n",
        node.genesis_hash, node.url
    ));
    let cli = |args: &[&str]| {
        let out = env.command(args).env("CUSTODY_INDEXER_MNEMONIC", MNEMONIC).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let key_secret = env.organization_with_key();
    let wallets: Value = serde_json::from_str(&cli(&["wallets", "list", "--json"])).unwrap();
    let sponsor = key(wallets[0]["sponsor"].as_str().unwrap());
    let omnibus = key(wallets[0]["omnibus"].as_str().unwrap());
    airdrop(&node, &sponsor, 5 * SOL).await;
    airdrop(&node, &omnibus, 5 * SOL).await;
    let created = |id: &str, kind: &str| -> Pubkey {
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
        key(account["addresses"][0]["address"].as_str().unwrap())
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
    let _run = env.listen("run", CHAIN, port, &[("CUSTODY_INDEXER_MNEMONIC", MNEMONIC)]);
    let base = format!("http://127.0.0.1:{port}");
    eventually(Duration::from_secs(30), "the API", || async {
        answers(&format!("{base}/healthz")).await.then_some(())
    })
    .await;
    let (sponsor_before, alice_before, omnibus_before) =
        (lamports(&node, &sponsor).await, lamports(&node, &alice).await, lamports(&node, &omnibus).await);

    let outside = Keypair::new().pubkey();
    let post = |account: &str, amount: &str, symbol: &str, to: String| {
        let body = json!({
            "request_id": uuid::Uuid::new_v4().to_string(), "account_id": account, "amount": amount,
            "currency_symbol": symbol, "address_destination": { "address": to, "chain": CHAIN.as_str() },
        });
        let url = format!("{base}/v2/crypto/transfers");
        let key_secret = key_secret.clone();
        async move { send_json(Method::POST, &url, Some(&key_secret), Some(&body)).await }
    };
    let refused = post("alice", "1", "TUSD", "0x4242424242424242424242424242424242424242".into()).await;
    assert_eq!(refused.status, 400, "an EVM address is no Solana destination");
    assert!(refused.body["message"].as_str().unwrap().contains("Solana"), "{:?}", refused.body);
    let mut ids = Vec::new();
    for (account, amount, symbol) in
        [("alice", "5", "TUSD"), ("alice", "0.25", "SOL"), ("treasury", "1", "SOL")]
    {
        let answer = post(account, amount, symbol, outside.to_string()).await;
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        ids.push(answer.body["id"].as_str().unwrap().to_string());
    }
    let mut settled = Vec::new();
    for id in &ids {
        settled.push(
            eventually(Duration::from_secs(90), &format!("{id} CONFIRMED"), || async {
                let t = send(Method::GET, &format!("{base}/v2/crypto/transfers/{id}"), Some(&key_secret))
                    .await
                    .body;
                assert!(!["FAILED", "DROPPED"].contains(&t["status"].as_str().unwrap()), "{t}");
                (t["status"] == "CONFIRMED").then_some(t)
            })
            .await,
        );
    }

    // The funds arrived; the owners paid the amounts only.
    let outside_tokens = node.rpc.get_token_account_balance(&ata(&outside, &mint, TOKEN)).await.unwrap();
    assert_eq!(outside_tokens.amount, "5000000");
    assert_eq!(lamports(&node, &outside).await, SOL + SOL / 4);
    assert_eq!(alice_before - lamports(&node, &alice).await, SOL / 4, "alice paid no fee");
    assert_eq!(omnibus_before - lamports(&node, &omnibus).await, SOL, "the omnibus wallet paid no fee");

    // The ledger: each signature's fee from its metadata, and the new token
    // account's rent for the first; the sponsor paid exactly their sum.
    let store = env.store().await;
    let rent = node.rpc.get_minimum_balance_for_rent_exemption(165).await.unwrap();
    let mut total = 0u64;
    for (i, id) in ids.iter().enumerate() {
        let signature = settled[i]["transaction_hash"].as_str().unwrap();
        let tx = node
            .rpc
            .get_transaction(
                &signature.parse().unwrap(),
                solana_transaction_status_client_types::UiTransactionEncoding::Json,
            )
            .await
            .unwrap();
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
    assert_eq!(sponsor_before - lamports(&node, &sponsor).await, total);
    let usage: Value =
        serde_json::from_str(&cli(&["gas", "usage", "--organization", "acme", "--json"])).unwrap();
    assert_eq!(usage[0]["by_chain"][0]["chain"], CHAIN.as_str());
    assert_eq!(usage[0]["by_chain"][0]["transactions"], 3);
}
