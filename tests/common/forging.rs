//! A provider that lies: a JSON-RPC proxy in front of a node that adds one
//! forged token `Transfer` log to a real transaction, consistently in
//! every answer that could show it (`eth_getLogs` by range or by block
//! hash, the transaction's receipt, the block's receipts, and the block's
//! `logsBloom`), so that no check a single provider's answers allow can
//! tell it from a real one. Or one that leaves out every `Transfer` log of
//! a token to an address from its `eth_getLogs` answers, as a provider
//! whose log index lost them does.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use alloy::{
    primitives::{Address, B256, Bloom, BloomInput, U256, keccak256},
    transports::http::reqwest,
};
use axum::{Json, Router, extract::State, routing::post};
use serde_json::{Value, json};

/// The forged log, and where it claims to be.
#[derive(Clone)]
struct Forged {
    log: Value,
    block_number: u64,
    block_hash: String,
    transaction: String,
    bloom: Bloom,
}

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    forged: Mutex<Option<Forged>>,
    /// The token and the receiver (as a topic) whose transfers `eth_getLogs`
    /// leaves out.
    dropped: Mutex<Option<(String, String)>>,
}

pub struct ForgingRpc {
    pub url: String,
    proxy: Arc<Proxy>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ForgingRpc {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(upstream: String) -> ForgingRpc {
    let proxy = Arc::new(Proxy {
        upstream,
        client: reqwest::Client::new(),
        forged: Mutex::new(None),
        dropped: Mutex::new(None),
    });
    let app = Router::new().route("/", post(handle)).with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    ForgingRpc { url: format!("http://{addr}"), proxy, task }
}

fn word(bytes: &[u8]) -> B256 {
    let mut padded = [0u8; 32];
    padded[32 - bytes.len()..].copy_from_slice(bytes);
    B256::from(padded)
}

impl ForgingRpc {
    /// From now on, the mined transaction `carrier` also holds a `Transfer`
    /// of `amount` of `token` from `from` to `to`.
    pub async fn forge(&self, carrier: B256, token: Address, from: Address, to: Address, amount: U256) {
        let receipt = self.ask("eth_getTransactionReceipt", json!([carrier])).await;
        assert!(receipt.is_object(), "the carrier is mined: {receipt}");
        let topics =
            [keccak256("Transfer(address,address,uint256)"), word(from.as_slice()), word(to.as_slice())];
        let mut bloom = Bloom::default();
        bloom.accrue(BloomInput::Raw(token.as_slice()));
        for topic in &topics {
            bloom.accrue(BloomInput::Raw(topic.as_slice()));
        }
        let number = receipt["blockNumber"].as_str().unwrap();
        let log = json!({
            "address": token,
            "topics": topics,
            "data": B256::from(amount),
            "blockNumber": number,
            "blockHash": receipt["blockHash"],
            "transactionHash": carrier,
            "transactionIndex": receipt["transactionIndex"],
            "logIndex": "0x63",
            "removed": false,
        });
        *self.proxy.forged.lock().unwrap() = Some(Forged {
            log,
            block_number: u64::from_str_radix(number.trim_start_matches("0x"), 16).unwrap(),
            block_hash: receipt["blockHash"].as_str().unwrap().to_lowercase(),
            transaction: format!("{carrier:#x}"),
            bloom,
        });
    }

    /// From now on, `eth_getLogs` answers leave out every `Transfer` of
    /// `token` to `to` (receipts still hold them).
    pub fn drop_transfers(&self, token: Address, to: Address) {
        let topic = format!("{:#x}", word(to.as_slice()));
        *self.proxy.dropped.lock().unwrap() = Some((format!("{token:#x}"), topic));
    }

    async fn ask(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer: Value = self
            .proxy
            .client
            .post(&self.proxy.upstream)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["result"].clone()
    }
}

async fn handle(State(proxy): State<Arc<Proxy>>, Json(body): Json<Value>) -> Json<Value> {
    let answer = proxy.client.post(&proxy.upstream).json(&body).send().await.unwrap();
    let mut value: Value = answer.json().await.unwrap();
    let forged = proxy.forged.lock().unwrap().clone();
    let dropped = proxy.dropped.lock().unwrap().clone();
    let lie = |call: &Value, answer: &mut Value| {
        if let Some(forged) = &forged {
            forge(forged, call, answer);
        }
        if let Some((token, to)) = &dropped
            && call["method"] == "eth_getLogs"
            && let Some(logs) = answer.get_mut("result").and_then(Value::as_array_mut)
        {
            logs.retain(|log| !(lower(&log["address"]) == *token && lower(&log["topics"][2]) == *to));
        }
    };
    match (&body, &mut value) {
        (Value::Array(calls), Value::Array(answers)) => {
            for answer in answers.iter_mut() {
                if let Some(call) = calls.iter().find(|c| c["id"] == answer["id"]) {
                    lie(call, answer);
                }
            }
        }
        (call, answer) => lie(call, answer),
    }
    Json(value)
}

fn hex(value: &Value) -> Option<u64> {
    u64::from_str_radix(value.as_str()?.trim_start_matches("0x"), 16).ok()
}

fn lower(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_lowercase()
}

/// Adds the forged log to `answer` wherever `call` could show it.
fn forge(forged: &Forged, call: &Value, answer: &mut Value) {
    let Some(result) = answer.get_mut("result") else { return };
    let params = &call["params"];
    match call["method"].as_str().unwrap_or_default() {
        "eth_getLogs" => {
            let filter = &params[0];
            let in_block = match filter.get("blockHash") {
                Some(hash) => lower(hash) == forged.block_hash,
                None => {
                    let (from, to) = (hex(&filter["fromBlock"]), hex(&filter["toBlock"]));
                    from.zip(to).is_some_and(|(f, t)| (f..=t).contains(&forged.block_number))
                }
            };
            let token = lower(&forged.log["address"]);
            let addresses = match &filter["address"] {
                Value::Array(list) => list.iter().map(lower).collect(),
                one => vec![lower(one)],
            };
            if in_block
                && addresses.contains(&token)
                && let Some(logs) = result.as_array_mut()
            {
                logs.push(forged.log.clone());
            }
        }
        "eth_getTransactionReceipt" if lower(&params[0]) == forged.transaction => {
            add_to_receipt(forged, result)
        }
        "eth_getBlockReceipts" => {
            for receipt in result.as_array_mut().into_iter().flatten() {
                if lower(&receipt["transactionHash"]) == forged.transaction {
                    add_to_receipt(forged, receipt);
                }
            }
        }
        "eth_getBlockByNumber" | "eth_getBlockByHash" if lower(&result["hash"]) == forged.block_hash => {
            add_to_bloom(forged, &mut result["logsBloom"]);
        }
        _ => {}
    }
}

fn add_to_receipt(forged: &Forged, receipt: &mut Value) {
    if let Some(logs) = receipt["logs"].as_array_mut() {
        logs.push(forged.log.clone());
    }
    add_to_bloom(forged, &mut receipt["logsBloom"]);
}

fn add_to_bloom(forged: &Forged, bloom: &mut Value) {
    let Some(mut current) = bloom.as_str().and_then(|b| b.parse::<Bloom>().ok()) else { return };
    current.accrue_bloom(&forged.bloom);
    *bloom = json!(current);
}
