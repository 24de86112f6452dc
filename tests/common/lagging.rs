//! One load-balanced RPC URL over two backends at different heights, as
//! public endpoints are: the real node (fresh) and a backend `lag` blocks or
//! slots behind, whose answers are computed from the real node as it was
//! then. Every HTTP request (a JSON-RPC batch counts as one) goes to either
//! backend at random.
//!
//! The backend behind answers like a real node that lacks the newest blocks,
//! without an error where a real node gives none:
//! - EVM: a lower `eth_blockNumber`; `null` for blocks it does not have (by
//!   number, tag or hash); `eth_getLogs` over a range without their logs;
//!   an error for `eth_getLogs` and traces by the hash of a block it lacks
//!   (EIP-234: a real node and anvil answer `-32000 unknown block`); `null`
//!   for `eth_getBlockReceipts` of such a block, and receipts and
//!   transactions for transactions in those blocks.
//! - Solana: a lower `getSlot`; `getBlocks` listing slots up to its own
//!   height at the asked commitment (`getBlocksWithLimit` too);
//!   `-32004 Block not available` from
//!   `getBlock` above it; `getSignaturesForAddress` without newer
//!   signatures (an empty page below a `before` it does not know, no lower
//!   bound above an `until` it does not know, as Agave answers);
//!   `getTransaction` `null` for transactions above it; and,
//!   as Agave does, `-32016 Minimum context slot has not been reached` for
//!   a request whose `minContextSlot` is above its slot.
//!
//! Both backends refuse a `getBlocks` range wider than 500,000 slots, as
//! Agave does (`MAX_GET_CONFIRMED_BLOCKS_RANGE`: `end` is first clamped to
//! the node's height, then `-32602 Slot range too large; max 500000`).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
    time::Duration,
};

use alloy::transports::http::reqwest;
use axum::{Json, Router, extract::State, routing::post};
use custody_indexer::{chain::Chain, deposits::resource::DepositStatus, store::Store};
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Evm,
    Solana,
}

/// Agave's `MAX_GET_CONFIRMED_BLOCKS_RANGE`.
pub const MAX_BLOCKS_RANGE: u64 = 500_000;

#[derive(Default)]
pub struct Stats {
    /// Requests the fresh and the lagging backend answered.
    pub fresh: AtomicU32,
    pub stale: AtomicU32,
    /// Answers the lagging backend gave differently from the real node.
    pub withheld: AtomicU32,
    /// `eth_getLogs` calls by block hash (EVM).
    pub logs_by_hash: AtomicU32,
    /// `eth_getBlockReceipts` answered `null` for a block not reached yet (EVM).
    pub null_receipts: AtomicU32,
    /// Logs left out of `eth_getLogs` range answers (EVM).
    pub dropped_logs: AtomicU32,
    /// Requests the lagging backend refused with `-32016` because it had not
    /// reached their `minContextSlot`.
    pub below_min_context: AtomicU32,
    /// `getBlocks` calls refused as too wide.
    pub refused_ranges: AtomicU32,
    /// Widest `getBlocks` range asked (`end - start`).
    pub widest_range: AtomicU64,
}

struct Proxy {
    upstream: String,
    family: Family,
    lag: u64,
    client: reqwest::Client,
    stats: Arc<Stats>,
    seed: AtomicU64,
}

pub struct LaggingRpc {
    pub url: String,
    pub stats: Arc<Stats>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LaggingRpc {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(upstream: String, family: Family, lag: u64) -> LaggingRpc {
    if family == Family::Solana {
        past_the_ledger_start(&upstream, lag).await;
    }
    let stats = Arc::new(Stats::default());
    let seed = seed();
    let proxy = Arc::new(Proxy {
        upstream,
        family,
        lag,
        client: reqwest::Client::new(),
        stats: stats.clone(),
        seed: AtomicU64::new(seed | 1),
    });
    let app = Router::new().route("/", post(handle)).with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    LaggingRpc { url: format!("http://{addr}"), stats, task }
}

/// The seed of the coin tosses: `LAGGING_SEED` when set (to replay a run),
/// the clock otherwise; printed either way, so a failing run can be replayed
/// (the requests' order still depends on timing).
fn seed() -> u64 {
    let seed = match std::env::var("LAGGING_SEED") {
        Ok(text) => text.parse().expect("LAGGING_SEED is a number"),
        Err(_) => {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        }
    };
    eprintln!("lagging backends: LAGGING_SEED={seed}");
    seed
}

/// Waits until the backend behind is past the node's first slot: a backend
/// of a live cluster lags within its ledger, while the local network's ledger
/// starts at a slot above 0, which a backend `lag` slots behind a younger
/// node would report as its head.
async fn past_the_ledger_start(upstream: &str, lag: u64) {
    let client = reqwest::Client::new();
    let call = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params});
        let request = client.post(upstream).json(&body).send();
        async move { request.await.unwrap().json::<Value>().await.unwrap()["result"].as_u64() }
    };
    let started = std::time::Instant::now();
    loop {
        let first = call("getFirstAvailableBlock", json!([])).await.unwrap_or_default();
        let finalized = call("getSlot", json!([{"commitment": "finalized"}])).await.unwrap_or_default();
        if finalized >= first + lag {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the node does not reach slot {}",
            first + lag
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

impl Proxy {
    /// A coin toss per request (xorshift: no shared RNG state to lock).
    fn stale(&self) -> bool {
        let mut x = self.seed.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed.store(x, Ordering::Relaxed);
        x & 1 == 1
    }

    async fn forward(&self, call: &Value) -> Value {
        let answer = self.client.post(&self.upstream).json(call).send().await.unwrap();
        answer.json().await.unwrap()
    }

    async fn result(&self, method: &str, params: Value) -> Value {
        let call = json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params});
        self.forward(&call).await["result"].take()
    }

    /// The backend's height for a call: the real one, less the lag when stale.
    async fn height(&self, call: &Value, stale: bool) -> u64 {
        let real = match self.family {
            Family::Evm => hex(&self.result("eth_blockNumber", json!([])).await).unwrap_or_default(),
            Family::Solana => {
                let commitment = commitment(call);
                self.result("getSlot", json!([{"commitment": commitment}])).await.as_u64().unwrap_or_default()
            }
        };
        if stale { real.saturating_sub(self.lag) } else { real }
    }

    async fn answer(&self, call: &Value, stale: bool) -> Value {
        let method = call["method"].as_str().unwrap_or_default();
        if method == "eth_getLogs" && call["params"][0].get("blockHash").is_some() {
            self.stats.logs_by_hash.fetch_add(1, Ordering::SeqCst);
        }
        if self.family == Family::Solana && method == "getBlocks" {
            return self.get_blocks(call, stale).await;
        }
        if !stale {
            return self.forward(call).await;
        }
        let height = self.height(call, true).await;
        if let Some(refusal) = self.below_min_context(call, height) {
            return refusal;
        }
        let answer = match self.family {
            Family::Evm => self.evm_stale(call, method, height).await,
            Family::Solana => self.solana_stale(call, method, height).await,
        };
        // Reads only: asking the real node again must change nothing.
        let read = !["eth_send", "sendTransaction", "anvil_", "evm_", "surfnet_", "requestAirdrop"]
            .iter()
            .any(|prefix| method.starts_with(prefix));
        if read && answer != self.forward(call).await {
            self.stats.withheld.fetch_add(1, Ordering::SeqCst);
        }
        answer
    }

    async fn evm_stale(&self, call: &Value, method: &str, height: u64) -> Value {
        let params = &call["params"];
        let above =
            |v: &Value| hex(&v["blockNumber"]).or_else(|| hex(&v["number"])).is_some_and(|n| n > height);
        match method {
            "eth_blockNumber" => reply(call, json!(format!("0x{height:x}"))),
            "eth_getBlockByNumber" => {
                let number = match params[0].as_str().unwrap_or_default() {
                    tag if tag.starts_with("0x") => hex(&params[0]).unwrap_or_default(),
                    "latest" | "pending" => height,
                    // `finalized`, `safe`: the real node's, unless above this backend's head.
                    _ => {
                        let answer = self.forward(call).await;
                        if !above(&answer["result"]) {
                            return answer;
                        }
                        height
                    }
                };
                if number > height {
                    return reply(call, Value::Null);
                }
                let mut asked = call.clone();
                asked["params"][0] = json!(format!("0x{number:x}"));
                self.forward(&asked).await
            }
            "eth_getLogs" if params[0].get("blockHash").is_some() => {
                let block = self.result("eth_getBlockByHash", json!([params[0]["blockHash"], false])).await;
                if block.is_null() || above(&block) {
                    return error(call, -32000, "unknown block");
                }
                self.forward(call).await
            }
            // By hash, as the watcher asks: `null` for a block it lacks, as
            // geth and anvil answer.
            "eth_getBlockReceipts" => {
                let block = self.result("eth_getBlockByHash", json!([params[0], false])).await;
                if block.is_null() || above(&block) {
                    self.stats.null_receipts.fetch_add(1, Ordering::SeqCst);
                    return reply(call, Value::Null);
                }
                self.forward(call).await
            }
            "debug_traceBlockByHash" => {
                let block = self.result("eth_getBlockByHash", json!([params[0], false])).await;
                if block.is_null() || above(&block) {
                    return error(call, -32000, "unknown block");
                }
                self.forward(call).await
            }
            _ => {
                let mut answer = self.forward(call).await;
                let result = &mut answer["result"];
                if let Some(logs) = result.as_array_mut() {
                    let all = logs.len();
                    logs.retain(|log| !above(log));
                    self.stats.dropped_logs.fetch_add((all - logs.len()) as u32, Ordering::SeqCst);
                } else if result.is_object() && above(result) {
                    *result = Value::Null;
                }
                answer
            }
        }
    }

    /// Agave's `-32016` for a request whose `minContextSlot` is above this
    /// backend's slot at the asked commitment.
    fn below_min_context(&self, call: &Value, height: u64) -> Option<Value> {
        let params = call["params"].as_array()?;
        let wanted = params.iter().find_map(|p| p.get("minContextSlot").and_then(Value::as_u64))?;
        if self.family != Family::Solana || wanted <= height {
            return None;
        }
        self.stats.below_min_context.fetch_add(1, Ordering::SeqCst);
        let mut refusal = error(call, -32016, "Minimum context slot has not been reached");
        refusal["error"]["data"] = json!({ "contextSlot": height });
        Some(refusal)
    }

    async fn solana_stale(&self, call: &Value, method: &str, height: u64) -> Value {
        let params = &call["params"];
        match method {
            "getSlot" => reply(call, json!(height)),
            "getBlock" if params[0].as_u64().is_some_and(|slot| slot > height) => {
                let slot = params[0].as_u64().unwrap_or_default();
                error(call, -32004, &format!("Block not available for slot {slot}"))
            }
            "getBlocksWithLimit" => {
                let mut answer = self.forward(call).await;
                if let Some(list) = answer["result"].as_array_mut() {
                    list.retain(|slot| slot.as_u64().is_some_and(|slot| slot <= height));
                }
                answer
            }
            "getSignaturesForAddress" => self.signatures_stale(call, height).await,
            "getTransaction" => {
                let mut answer = self.forward(call).await;
                if answer["result"]["slot"].as_u64().is_some_and(|slot| slot > height) {
                    answer["result"] = Value::Null;
                }
                answer
            }
            _ => self.forward(call).await,
        }
    }

    /// `getSignaturesForAddress` from a node at `height`, as Agave answers
    /// for signatures it does not know: an empty page below an unknown
    /// `before`, and the history with no lower bound above an unknown
    /// `until`.
    async fn signatures_stale(&self, call: &Value, height: u64) -> Value {
        let mut call = call.clone();
        let config = &call["params"][1];
        if self.slot_of(&config["before"]).await.is_some_and(|slot| slot > height) {
            return reply(&call, json!([]));
        }
        if self.slot_of(&config["until"]).await.is_some_and(|slot| slot > height) {
            call["params"][1].as_object_mut().expect("a config").remove("until");
        }
        let mut answer = self.forward(&call).await;
        if let Some(list) = answer["result"].as_array_mut() {
            list.retain(|s| s["slot"].as_u64().is_some_and(|slot| slot <= height));
        }
        answer
    }

    /// The slot of a signature (a JSON string), as the real node knows it.
    async fn slot_of(&self, signature: &Value) -> Option<u64> {
        let signature = signature.as_str()?;
        let params = json!([[signature], {"searchTransactionHistory": true}]);
        self.result("getSignatureStatuses", params).await["value"][0]["slot"].as_u64()
    }

    /// `getBlocks` as Agave answers it: `end` clamped to the node's height at
    /// the asked commitment, then a range over 500,000 slots refused.
    async fn get_blocks(&self, call: &Value, stale: bool) -> Value {
        let start = call["params"][0].as_u64().unwrap_or_default();
        let height = self.height(call, stale).await;
        let end = call["params"][1].as_u64().unwrap_or(u64::MAX).min(height);
        if end < start {
            return reply(call, json!([]));
        }
        self.stats.widest_range.fetch_max(end - start, Ordering::SeqCst);
        if end - start > MAX_BLOCKS_RANGE {
            self.stats.refused_ranges.fetch_add(1, Ordering::SeqCst);
            return error(call, -32602, &format!("Slot range too large; max {MAX_BLOCKS_RANGE}"));
        }
        let mut asked = call.clone();
        asked["params"][1] = json!(end);
        self.forward(&asked).await
    }
}

async fn handle(State(proxy): State<Arc<Proxy>>, Json(body): Json<Value>) -> Json<Value> {
    let stale = proxy.stale();
    let counter = if stale { &proxy.stats.stale } else { &proxy.stats.fresh };
    counter.fetch_add(1, Ordering::SeqCst);
    let answer = match body.as_array() {
        Some(batch) => {
            let mut out = Vec::with_capacity(batch.len());
            for call in batch {
                out.push(proxy.answer(call, stale).await);
            }
            Value::Array(out)
        }
        None => proxy.answer(&body, stale).await,
    };
    Json(answer)
}

/// The commitment a Solana call asks for (`confirmed` when it names none,
/// as the indexer's client sets it).
fn commitment(call: &Value) -> String {
    let params = call["params"].as_array().cloned().unwrap_or_default();
    let named = params.iter().find_map(|p| p.get("commitment").and_then(Value::as_str).map(String::from));
    match named.as_deref() {
        Some("finalized") => "finalized".into(),
        Some("processed") => "processed".into(),
        _ => "confirmed".into(),
    }
}

fn hex(value: &Value) -> Option<u64> {
    u64::from_str_radix(value.as_str()?.trim_start_matches("0x"), 16).ok()
}

fn reply(call: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
}

fn error(call: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": call["id"], "error": {"code": code, "message": message}})
}

/// `(transaction, account, currency, amount)` of each deposit, sorted.
pub type Row = (String, String, String, String);

pub async fn rows(store: &Store, chain: Chain) -> Vec<Row> {
    let mut rows: Vec<Row> = store
        .deposits_on_chain(chain)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.transaction_hash, d.account_id, d.currency_symbol, d.amount))
        .collect();
    rows.sort();
    rows
}

/// Waits until the store holds `expected.len()` deposits, all `CONFIRMED`
/// (or the time is up), then returns what it holds.
pub async fn settled(store: &Store, chain: Chain, expected: usize, timeout: Duration) -> Vec<Row> {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        let deposits = store.deposits_on_chain(chain).await.unwrap();
        if deposits.len() >= expected && deposits.iter().all(|d| d.status == DepositStatus::Confirmed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    rows(store, chain).await
}

/// The store holds exactly the expected deposits: none missing, none twice.
pub fn assert_exact(found: &[Row], expected: &[Row], what: &str) {
    let missing: Vec<&Row> = expected.iter().filter(|r| !found.contains(r)).collect();
    let extra: Vec<&Row> = found.iter().filter(|r| !expected.contains(r)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "{what}: missing {missing:?}, unexpected {extra:?}");
    assert_eq!(found.len(), expected.len(), "{what}: a deposit recorded twice");
}
