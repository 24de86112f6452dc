//! The transfers every block carries while `run` follows the chains: on each
//! EVM chain one `batchTransfer` of the token and plain native transfers, a
//! share of them to watched addresses; on each Solana chain one transaction
//! of SOL transfers per slot. Each load counts the transfers to watched
//! addresses that landed: the deposits `run` must find.

use std::{sync::Arc, time::Duration};

use alloy::{
    primitives::{Address, U256},
    sol_types::SolCall,
    transports::http::reqwest::Client,
};
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;
use tokio_util::sync::CancellationToken;

use crate::{
    common::{anvil::TestToken, solana::transfer_sol},
    nodes::{EvmNode, SolanaChain},
};

/// What each block (or slot) carries.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Token transfers in the block's one `batchTransfer`, and how many of
    /// them go to watched addresses.
    pub tokens: usize,
    pub watched_tokens: usize,
    /// Native transfers, each its own transaction from its own one of
    /// anvil's dev accounts (at most 8), and how many to watched addresses.
    pub natives: usize,
    pub watched_natives: usize,
    /// SOL transfers in a slot's transaction, and how many to watched wallets.
    pub sol: usize,
    pub watched_sol: usize,
}

/// Addresses nobody watches, spread like the watched ones.
fn stranger(n: u64) -> Address {
    Address::from_word(alloy::primitives::keccak256((u64::MAX - n).to_be_bytes()))
}

/// Recipients of one block: `watched` of `total` picked from `list`, the
/// rest strangers.
fn recipients<T: Copy>(
    list: &[T],
    stranger: impl Fn(u64) -> T,
    next: &mut u64,
    total: usize,
    watched: usize,
) -> Vec<T> {
    (0..total)
        .map(|i| {
            *next += 1;
            // A stride prime to the list's length visits every address.
            if i < watched { list[(*next * 7_919 % list.len() as u64) as usize] } else { stranger(*next) }
        })
        .collect()
}

/// Sends each new block's transfers to `node` until `stop`; returns the
/// transfers to watched addresses, once all of them are mined.
pub async fn evm(
    node: Arc<EvmNode>,
    watched: Arc<Vec<Address>>,
    shape: Shape,
    stop: CancellationToken,
) -> u64 {
    assert!(shape.natives <= 8, "anvil's dev accounts 2 to 9 send the native transfers");
    let client = Client::new();
    let url = node.anvil.url();
    let poll = Duration::from_secs_f64((node.block_time / 5.0).max(0.05));
    let (mut head, mut next, mut sent) = (block_number(&client, &url).await, 0u64, 0u64);
    while !stop.is_cancelled() {
        let now = block_number(&client, &url).await;
        if now == head {
            tokio::time::sleep(poll).await;
            continue;
        }
        head = now;
        let token = node.tokens[(head % node.tokens.len() as u64) as usize];
        let to = recipients(&watched, stranger, &mut next, shape.tokens, shape.watched_tokens);
        let call = TestToken::batchTransferCall { to: to.clone(), value: vec![U256::from(1_000); to.len()] };
        let mut batch = vec![
            json!({"from": node.anvil.accounts[1], "to": token, "data": format!("0x{}", alloy::hex::encode(call.abi_encode()))}),
        ];
        let natives = recipients(&watched, stranger, &mut next, shape.natives, shape.watched_natives);
        for (i, to) in natives.into_iter().enumerate() {
            // One transaction of each sender a block: anvil numbers a
            // batch's transactions of one sender alike.
            let from = node.anvil.accounts[2 + i];
            batch.push(json!({"from": from, "to": to, "value": "0x3b9aca00"}));
        }
        let requests: Vec<Value> = batch
            .into_iter()
            .enumerate()
            .map(|(id, tx)| json!({"jsonrpc": "2.0", "id": id, "method": "eth_sendTransaction", "params": [tx]}))
            .collect();
        for answer in rpc(&client, &url, &Value::Array(requests)).await.as_array().unwrap() {
            assert!(answer.get("result").is_some(), "{}: a transfer was refused: {answer}", node.chain);
        }
        sent += (shape.watched_tokens + shape.watched_natives) as u64;
    }
    // The last block's transfers are mined in the next block.
    let last = block_number(&client, &url).await;
    while block_number(&client, &url).await <= last {
        tokio::time::sleep(poll).await;
    }
    sent
}

async fn rpc(client: &Client, url: &str, body: &Value) -> Value {
    let answer =
        client.post(url).header("content-type", "application/json").body(body.to_string()).send().await;
    serde_json::from_slice(&answer.unwrap().bytes().await.unwrap()).unwrap()
}

async fn block_number(client: &Client, url: &str) -> u64 {
    let answer = rpc(client, url, &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"})).await;
    u64::from_str_radix(answer["result"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Sends one transaction of SOL transfers per new slot until `stop`;
/// returns the transfers to watched wallets of those that landed.
pub async fn solana(
    chain: Arc<SolanaChain>,
    watched: Arc<Vec<Pubkey>>,
    shape: Shape,
    stop: CancellationToken,
) -> u64 {
    let rpc = &chain.node.rpc;
    let payer = chain.payer.pubkey();
    let (mut slot, mut next, mut signatures) = (0u64, 0u64, Vec::new());
    let stranger = |n: u64| Pubkey::new_from_array(alloy::primitives::keccak256(n.to_be_bytes()).0);
    while !stop.is_cancelled() {
        let now = rpc.get_slot_with_commitment(CommitmentConfig::processed()).await.unwrap();
        if now == slot {
            tokio::time::sleep(Duration::from_millis(80)).await;
            continue;
        }
        slot = now;
        let to = recipients(&watched, stranger, &mut next, shape.sol, shape.watched_sol);
        // Rent-exempt for a new wallet: 0.001 SOL.
        let instructions: Vec<_> = to.iter().map(|to| transfer_sol(&payer, to, 1_000_000)).collect();
        let blockhash = rpc.get_latest_blockhash().await.unwrap();
        let tx = Transaction::new_signed_with_payer(&instructions, Some(&payer), &[&chain.payer], blockhash);
        signatures.push(rpc.send_transaction(&tx).await.unwrap());
    }
    // What landed: a transaction is confirmed within a few slots or never.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut landed = 0u64;
    for chunk in signatures.chunks(256) {
        let statuses = rpc.get_signature_statuses(chunk).await.unwrap().value;
        landed += statuses.iter().flatten().filter(|status| status.err.is_none()).count() as u64;
    }
    landed * shape.watched_sol as u64
}
