//! Solana scanning throughput on a local network, and the decode-and-match
//! rate of mainnet-size blocks. Prints figures; asserts nothing.
//!
//! `cargo bench --bench solana` (`BENCH_TRANSFERS`, `BENCH_MAX_WALLETS`,
//! `BENCH_BLOCK_TXS` change the size).

#[path = "../tests/common/mod.rs"]
mod common;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use common::solana::{SOL, SolanaNode, transfer_sol};
use custody_indexer::{
    account::AccountAddress,
    chain::Chain,
    config::ChainConfig,
    deposits::watch::WatchSet,
    deposits::watcher::Tick,
    solana::{
        SolanaWatcher,
        decode::{self, SolanaAssets, SolanaWatchSet},
    },
    store::{NewAccount, Store},
};
use futures::{StreamExt, stream};
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;
use solana_transaction_status_client_types::UiConfirmedBlock;

const CHAIN: Chain = Chain::SolanaDevnet;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config(node: &SolanaNode, strategy: &str) -> ChainConfig {
    let text = format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nmax_block_range = 100\nconcurrency = 4\nstrategy = \"{strategy}\"\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, node.url
    );
    ChainConfig::from_toml(&text, Path::new("bench.toml"), &|_| None).unwrap()
}

/// Sends `count` transfers to 10 recipients; returns them and the slot range.
async fn generate(node: &SolanaNode, count: u64) -> (Vec<Pubkey>, u64, u64) {
    let recipients: Vec<Pubkey> = (0..10).map(|_| Pubkey::new_unique()).collect();
    let payer = node.funded(1_000 * SOL).await;
    let first = node.slot(CommitmentConfig::confirmed()).await;
    let started = Instant::now();
    let mut blockhash = node.rpc.get_latest_blockhash().await.unwrap();
    let mut signatures = Vec::new();
    for i in 0..count {
        if i % 25 == 0 {
            blockhash = node.rpc.get_latest_blockhash().await.unwrap();
        }
        let ix = transfer_sol(&payer.pubkey(), &recipients[(i % 10) as usize], SOL / 100 + i);
        let tx = Transaction::new_signed_with_payer(&[ix], Some(&payer.pubkey()), &[&payer], blockhash);
        signatures.push(node.rpc.send_transaction(&tx).await.unwrap());
    }
    for chunk in signatures.chunks(200) {
        while !node.rpc.get_signature_statuses(chunk).await.unwrap().value.iter().all(|s| s.is_some()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let last = node.slot(CommitmentConfig::confirmed()).await;
    println!(
        "generated {count} transfers to 10 wallets in slots {first}..={last} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    (recipients, first, last)
}

async fn store_with(wallets: u64, recipients: &[Pubkey], path: &Path) -> Store {
    let store =
        common::db::unlocked(&Store::open(&format!("sqlite://{}", path.display())).await.unwrap()).await;
    let accounts: Vec<NewAccount> = (0..wallets)
        .map(|i| {
            let address = recipients.get(i as usize).copied().unwrap_or_else(Pubkey::new_unique).to_string();
            common::numbered_account(i, vec![AccountAddress { chains: vec![CHAIN], address }])
        })
        .collect();
    common::numbered_identities(&store).await;
    for chunk in accounts.chunks(50_000) {
        custody_indexer::keys::accounts::add_accounts(&store, chunk).await.unwrap();
    }
    store
}

/// The blocks strategy's requests for the range, decoding nothing.
async fn raw_blocks(node: &SolanaNode, first: u64, last: u64) -> f64 {
    let started = Instant::now();
    let slots: Vec<u64> = node.rpc.get_blocks(first, Some(last)).await.unwrap();
    let config = json!({"encoding": "json", "maxSupportedTransactionVersion": 0, "transactionDetails": "full", "rewards": false});
    let fetches: Vec<_> = slots
        .iter()
        .map(|slot| {
            let config = config.clone();
            async move {
                let request = solana_rpc_client_api::request::RpcRequest::GetBlock;
                node.rpc.send::<Value>(request, json!([slot, config])).await.unwrap()
            }
        })
        .collect();
    stream::iter(fetches).buffered(4).collect::<Vec<_>>().await;
    started.elapsed().as_secs_f64()
}

/// The signatures strategy's requests for the wallets, decoding nothing.
async fn raw_signatures(node: &SolanaNode, wallets: &[String]) -> f64 {
    let started = Instant::now();
    for wallet in wallets {
        let request = solana_rpc_client_api::request::RpcRequest::GetSignaturesForAddress;
        let page: Vec<Value> = node.rpc.send(request, json!([wallet, {"limit": 1000}])).await.unwrap();
        let fetches: Vec<_> = page
            .iter()
            .map(|s| async move {
                let request = solana_rpc_client_api::request::RpcRequest::GetTransaction;
                let config = json!({"encoding": "json", "maxSupportedTransactionVersion": 0});
                node.rpc.send::<Value>(request, json!([s["signature"], config])).await.unwrap()
            })
            .collect();
        stream::iter(fetches).buffered(4).collect::<Vec<_>>().await;
    }
    started.elapsed().as_secs_f64()
}

async fn strategies(node: &SolanaNode, transfers: u64, max_wallets: u64, dir: &Path) {
    let (recipients, first, last) = generate(node, transfers).await;
    node.wait_finalized(last).await;
    let slots = (last - first + 1) as f64;
    println!(
        "{:>8} | {:>10} | {:>8} | {:>8} | {:>9} | {:>10} | {:>6}",
        "wallets", "strategy", "raw s", "scan s", "slots/s", "deposits/s", "vs raw"
    );
    for wallets in [10u64, 10_000, 100_000].into_iter().filter(|w| *w <= max_wallets) {
        let path = dir.join(format!("wallets-{wallets}.db"));
        let store = store_with(wallets, &recipients, &path).await;

        let raw = raw_blocks(node, first, last).await;
        let mut watcher = SolanaWatcher::connect(config(node, "blocks"), store.clone()).await.unwrap();
        let started = Instant::now();
        let report = watcher.backfill_slots(first, Some(last), &|_, _| {}).await.unwrap();
        let scan = started.elapsed().as_secs_f64();
        assert_eq!(report.deposits_found as u64, transfers);
        let row = |strategy: &str, raw: f64, scan: f64| {
            println!(
                "{wallets:>8} | {strategy:>10} | {raw:>8.2} | {scan:>8.2} | {:>9.0} | {:>10.0} | {:>5.2}x",
                slots / scan,
                transfers as f64 / scan,
                raw / scan
            );
        };
        row("blocks", raw, scan);

        // The signatures strategy polls every wallet; its first pass reads each
        // wallet's whole history.
        let fresh = store_with(wallets, &recipients, &dir.join(format!("sig-{wallets}.db"))).await;
        let addresses: Vec<String> =
            fresh.watched_addresses(CHAIN).await.unwrap().into_iter().map(|(a, _)| a).collect();
        let raw = raw_signatures(node, &addresses).await;
        let started = Instant::now();
        let mut watcher = SolanaWatcher::connect(config(node, "signatures"), fresh.clone()).await.unwrap();
        loop {
            if let Tick::Idle { .. } = watcher.tick().await.unwrap() {
                break;
            }
            if fresh.deposits_on_chain(CHAIN).await.unwrap().len() as u64 >= transfers {
                break;
            }
        }
        let scan = started.elapsed().as_secs_f64();
        assert_eq!(fresh.deposits_on_chain(CHAIN).await.unwrap().len() as u64, transfers);
        row("signatures", raw, scan);
        let started = Instant::now();
        watcher.tick().await.unwrap();
        println!(
            "{wallets:>8} | signatures: a poll pass with nothing new takes {:.2} s (the blocks strategy's is independent of wallets)",
            started.elapsed().as_secs_f64()
        );
    }
}

/// A mainnet-size block: `count` transactions of the shapes seen on mainnet
/// (SOL transfers, SPL transfers with token balances), several MB of JSON.
fn synthetic_block(count: usize, mint: &str, watched: &[String]) -> String {
    let key = || Pubkey::new_unique().to_string();
    let transactions: Vec<Value> = (0..count)
        .map(|i| {
            let (payer, ata_from, ata_to) = (key(), key(), key());
            // Every tenth transaction pays a watched wallet, in SOL and in tokens.
            let (to, owner) = match watched.get(i / 10).filter(|_| i % 10 == 0) {
                Some(wallet) => (wallet.clone(), wallet.clone()),
                None => (key(), key()),
            };
            let mut keys = vec![payer.clone(), to.clone(), ata_from.clone(), ata_to.clone()];
            keys.extend((0..16).map(|_| key()));
            keys.push(decode::SYSTEM_PROGRAM.into());
            keys.push(decode::TOKEN_PROGRAM.into());
            let transfer = bs58::encode([&2u32.to_le_bytes()[..], &(1_000 + i as u64).to_le_bytes()].concat()).into_string();
            let balance = |index: u8, owner: &str, amount: u64| json!({
                "accountIndex": index, "mint": mint, "owner": owner, "programId": decode::TOKEN_PROGRAM,
                "uiTokenAmount": {"amount": amount.to_string(), "decimals": 6, "uiAmount": null, "uiAmountString": ""}
            });
            json!({
                "meta": {
                    "err": null, "status": {"Ok": null}, "fee": 5000,
                    "preBalances": keys.iter().map(|_| 10_000_000u64).collect::<Vec<_>>(),
                    "postBalances": keys.iter().enumerate().map(|(k, _)| if k == 1 { 10_001_000 + i as u64 } else { 10_000_000 }).collect::<Vec<_>>(),
                    "innerInstructions": [], "logMessages": vec!["Program log: Instruction: Transfer"; 6],
                    "preTokenBalances": [balance(2, &payer, 5_000_000), balance(3, &owner, 0)],
                    "postTokenBalances": [balance(2, &payer, 4_000_000), balance(3, &owner, 1_000_000)],
                    "rewards": [], "loadedAddresses": {"writable": [], "readonly": []}, "computeUnitsConsumed": 3000
                },
                "transaction": {
                    "message": {
                        "accountKeys": keys,
                        "header": {"numRequiredSignatures": 1, "numReadonlySignedAccounts": 0, "numReadonlyUnsignedAccounts": 2},
                        "instructions": [{"programIdIndex": 20, "accounts": [0, 1], "data": transfer, "stackHeight": null}],
                        "recentBlockhash": key()
                    },
                    "signatures": [bs58::encode([7u8; 64]).into_string()]
                },
                "version": "legacy"
            })
        })
        .collect();
    json!({
        "blockHeight": 1, "blockTime": 1_700_000_000, "blockhash": key(), "parentSlot": 1,
        "previousBlockhash": key(), "transactions": transactions
    })
    .to_string()
}

fn decode_rate(transactions: usize) {
    let mint = Pubkey::new_unique().to_string();
    let pairs: Vec<(String, String)> =
        (0..100_000).map(|i| (Pubkey::new_unique().to_string(), format!("acc-{i}"))).collect();
    let wallets: Vec<String> = pairs.iter().map(|(w, _)| w.clone()).collect();
    let block = synthetic_block(transactions, &mint, &wallets);
    let text = format!(
        "chain = \"{CHAIN}\"\ngenesis_hash = \"x\"\nrpc_urls = [\"http://127.0.0.1:1\"]\nconfirmation = \"finalized\"\n\
         poll_interval_ms = 100\nnative = {{ symbol = \"SOL\", decimals = 9 }}\n\
         [[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{mint}\"\ndecimals = 6\n"
    );
    let assets =
        SolanaAssets::from_config(&ChainConfig::from_toml(&text, Path::new("b.toml"), &|_| None).unwrap());
    let watch: SolanaWatchSet = WatchSet::build(pairs, |s| Some(Box::from(s)));
    let rounds = 20;
    let started = Instant::now();
    let mut found = 0;
    for _ in 0..rounds {
        let parsed: UiConfirmedBlock = serde_json::from_str(&block).unwrap();
        let at = decode::Slot { chain: CHAIN, slot: 1, block_hash: &parsed.blockhash, block_time: 1 };
        for tx in parsed.transactions.iter().flatten() {
            found += decode::deposits_in_transaction(at, tx, &watch, &assets).len();
        }
    }
    let per_block = started.elapsed().as_secs_f64() / rounds as f64;
    println!(
        "decode and match, one core: {transactions} transactions, {:.1} MB of JSON, 100,000 wallets: \
          {:.1} ms a block, {:.1} blocks/s ({} deposits a block)",
        block.len() as f64 / 1e6,
        per_block * 1e3,
        1.0 / per_block,
        found / rounds
    );
}

#[tokio::main]
async fn main() {
    decode_rate(env_or("BENCH_BLOCK_TXS", 1_500) as usize);
    let node = SolanaNode::start().await;
    let dir = tempfile::tempdir().unwrap();
    strategies(&node, env_or("BENCH_TRANSFERS", 2_000), env_or("BENCH_MAX_WALLETS", 100_000), dir.path())
        .await;
    let _ = Keypair::new();
}
