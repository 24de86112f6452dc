//! A JSON-RPC proxy in front of a node that injects the faults a real node
//! cannot be told to produce: refused `eth_getLogs` ranges, HTTP 429/503,
//! errors, hidden slots, lost transactions and answers that lie about what
//! the node did.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    },
};

use alloy::transports::http::reqwest;
use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::post};
use serde_json::{Value, json};

#[derive(Default)]
pub struct Faults {
    /// `eth_getLogs` spanning more blocks than this is refused (0: no limit).
    pub max_log_range: AtomicU64,
    /// The next this many requests get `status` instead of an answer.
    pub fail_next: AtomicU32,
    pub status: AtomicU32,
    /// Block spans of the `eth_getLogs` calls anvil answered.
    pub log_ranges: Mutex<Vec<u64>>,
    pub refused: AtomicU32,
    pub failed: AtomicU32,
    /// JSON-RPC errors `(method, code, message, times)` to answer instead of
    /// forwarding.
    pub method_errors: Mutex<Vec<(String, i64, String, u32)>>,
    /// Slots left out of `getBlocks` answers at `finalized` commitment, and
    /// their transactions' statuses out of `getSignatureStatuses`: as if the
    /// cluster had skipped them.
    pub skipped_slots: Mutex<Vec<u64>>,
    /// Slots left out of `getBlocks` answers at `finalized` commitment only:
    /// a hole in the node's ledger (its statuses still know the transactions).
    pub ledger_holes: Mutex<Vec<u64>>,
    /// Methods answered with `result` without reaching the node, like an
    /// endpoint that accepts a transaction and loses it: `(method, result)`.
    pub swallowed: Mutex<Vec<(String, Value)>>,
    pub swallowed_count: AtomicU32,
    /// Methods forwarded to the node whose answer is then lost (HTTP 503
    /// instead), `(method, times)`: the node acted, the client cannot know.
    pub lost_answers: Mutex<Vec<(String, u32)>>,
    /// Methods forwarded to the node whose answer is then replaced by a
    /// JSON-RPC error `(method, code, message, times)`: the node acted, the
    /// client is told it failed (an internal error, a timeout).
    pub answered_errors: Mutex<Vec<(String, i64, String, u32)>>,
    /// Methods answered `null` without reaching the node `(method, times)`,
    /// as a backend behind a load balancer that has not seen a transaction.
    pub nulled: Mutex<Vec<(String, u32)>>,
    /// Calls of these methods, batched or not, answered without reaching the
    /// node with `answer` (its `result` or `error` member), `(method, answer,
    /// times)`; a batch only when each of its calls is listed.
    pub replaced: Mutex<Vec<(String, Value, u32)>>,
    /// Methods answered with `result` without reaching the node, `(method,
    /// result, times)`: a backend behind that reports an older state.
    pub stale: Mutex<Vec<(String, Value, u32)>>,
    /// This many receipts of `eth_getTransactionReceipt` (batched or not)
    /// answered as a backend on another fork has them: the transaction
    /// mined in another block, and reverted there.
    pub forked_receipts: AtomicU32,
    /// A block number (0: none): a receipt the node does not have (`null`)
    /// is answered instead as a successful one in a block at this number
    /// under a hash no canonical block has, as a backend on a minority
    /// fork, or a provider inventing it, would answer.
    pub invented_receipts_at: AtomicU64,
    /// This many blocks of `eth_getBlockByNumber` (batched or not) that hold
    /// transactions answered with none, their header kept: a node that has
    /// the header but not the body.
    pub bodiless_blocks: AtomicU32,
    /// Blocks answered as Base's nodes serve them since its 200 ms blocks
    /// (0: as the node answers): block `n` at this many milliseconds since
    /// the epoch plus `n` × 200 ms, in `timestampMs`, with `timestamp` its
    /// whole second.
    pub millisecond_blocks_from: AtomicU64,
    /// Methods whose calls mention one of these strings in their parameters
    /// (a transaction hash) are answered with an error: `(method, needle)`.
    pub failing_params: Mutex<Vec<(String, String)>>,
    /// `getSignatureStatuses` answered as by a node this many slots behind
    /// the real one (0: as the node is): its `context.slot` that much lower
    /// and no status for a transaction in a slot above it.
    pub statuses_behind: AtomicU64,
    /// A non-archive node's ledger starting at this slot (0: as the node
    /// is): `getFirstAvailableBlock` answers it, `getBlocks` and
    /// `getBlocksWithLimit` list nothing below it, and `getBlock` below it
    /// is Agave's `-32001` "cleaned up".
    pub pruned_below: AtomicU64,
    /// With `pruned_below`: `getFirstAvailableBlock` answered by an archive
    /// backend behind the same URL (the node's own first slot), while the
    /// listings come from the pruned one.
    pub archive_first_available: AtomicBool,
    /// Every answer waits a random time between these (milliseconds) before
    /// it is forwarded, like a slow or overloaded node.
    pub slow_min_ms: AtomicU64,
    pub slow_max_ms: AtomicU64,
    /// Every method called, batched or not, with when it arrived; a block
    /// read with full transactions is `eth_getBlockByNumber(full)`.
    pub calls: Mutex<Vec<(std::time::Instant, String)>>,
    /// The parameters of every call of these methods, in arrival order:
    /// what a logging provider keeps.
    pub kept_methods: Mutex<Vec<String>>,
    pub kept: Mutex<Vec<(String, Value)>>,
}

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    faults: Arc<Faults>,
}

pub struct FaultyRpc {
    pub url: String,
    pub faults: Arc<Faults>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultyRpc {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(upstream: String) -> FaultyRpc {
    let faults = Arc::new(Faults::default());
    let proxy = Arc::new(Proxy { upstream, client: reqwest::Client::new(), faults: faults.clone() });
    let app = Router::new().route("/", post(handle)).with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    FaultyRpc { url: format!("http://{addr}"), faults, task }
}

fn span(call: &Value) -> Option<u64> {
    let filter = call.get("params")?.get(0)?;
    let number =
        |key: &str| u64::from_str_radix(filter.get(key)?.as_str()?.trim_start_matches("0x"), 16).ok();
    Some(number("toBlock")? - number("fromBlock")? + 1)
}

async fn handle(State(proxy): State<Arc<Proxy>>, Json(body): Json<Value>) -> axum::response::Response {
    let faults = &proxy.faults;
    record_calls(faults, &body);
    let (min, max) = (faults.slow_min_ms.load(Ordering::SeqCst), faults.slow_max_ms.load(Ordering::SeqCst));
    if max > 0 {
        let random = u64::from(u16::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..2].try_into().unwrap()));
        let wait = min + random * max.saturating_sub(min) / u64::from(u16::MAX);
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    }
    if faults.fail_next.load(Ordering::SeqCst) > 0 {
        faults.fail_next.fetch_sub(1, Ordering::SeqCst);
        faults.failed.fetch_add(1, Ordering::SeqCst);
        let status = StatusCode::from_u16(faults.status.load(Ordering::SeqCst) as u16).unwrap();
        return (status, "injected failure").into_response();
    }
    if let Some(error) = injected_error(faults, &body) {
        return Json(error).into_response();
    }
    if let Some(nulls) = nulled(faults, &body) {
        return Json(nulls).into_response();
    }
    if let Some(answers) = replaced(faults, &body) {
        return Json(answers).into_response();
    }
    if let Some(answer) = pruned(faults, &body) {
        return Json(answer).into_response();
    }
    if let Some(result) = stale(faults, &body) {
        return Json(json!({"jsonrpc": "2.0", "id": body["id"], "result": result})).into_response();
    }
    let params = body["params"].to_string();
    let failing = faults.failing_params.lock().unwrap().iter().any(|(method, needle)| {
        body["method"] == method.as_str() && params.to_lowercase().contains(&needle.to_lowercase())
    });
    if failing {
        faults.failed.fetch_add(1, Ordering::SeqCst);
        let error = json!({"code": -32603, "message": "internal error"});
        return Json(json!({"jsonrpc": "2.0", "id": body["id"], "error": error})).into_response();
    }
    let swallowed =
        faults.swallowed.lock().unwrap().iter().find(|(m, _)| body["method"] == m.as_str()).cloned();
    if let Some((_, result)) = swallowed {
        faults.swallowed_count.fetch_add(1, Ordering::SeqCst);
        return Json(json!({"jsonrpc": "2.0", "id": body["id"], "result": result})).into_response();
    }
    let limit = faults.max_log_range.load(Ordering::SeqCst);
    if body["method"] == "eth_getLogs"
        && let Some(span) = span(&body)
    {
        if limit > 0 && span > limit {
            faults.refused.fetch_add(1, Ordering::SeqCst);
            let error = json!({"jsonrpc": "2.0", "id": body["id"], "error": {
                "code": -32005, "message": format!("query exceeds max block range {limit}")}});
            return Json(error).into_response();
        }
        faults.log_ranges.lock().unwrap().push(span);
    }
    let mut body = body;
    let first_available = faults.pruned_below.load(Ordering::SeqCst);
    if ["getBlocks", "getBlocksWithLimit"].iter().any(|m| body["method"] == *m)
        && body["params"][0].as_u64().is_some_and(|start| start < first_available)
    {
        body["params"][0] = json!(first_available);
    }
    let answer = proxy.client.post(&proxy.upstream).json(&body).send().await.unwrap();
    let mut value: Value = answer.json().await.unwrap();
    if take(&faults.lost_answers, &body) {
        faults.failed.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, "answer lost").into_response();
    }
    let replaced = {
        let mut errors = faults.answered_errors.lock().unwrap();
        let entry =
            errors.iter_mut().find(|(method, _, _, times)| body["method"] == method.as_str() && *times > 0);
        entry.map(|e| {
            e.3 -= 1;
            json!({"code": e.1, "message": e.2})
        })
    };
    if let Some(error) = replaced {
        faults.failed.fetch_add(1, Ordering::SeqCst);
        return Json(json!({"jsonrpc": "2.0", "id": body["id"], "error": error})).into_response();
    }
    fork_receipts(faults, &body, &mut value);
    invent_receipts(faults, &body, &mut value);
    strip_bodies(faults, &body, &mut value);
    milliseconds(faults, &body, &mut value);
    let finalized =
        body["params"].as_array().is_some_and(|p| p.iter().any(|v| v["commitment"] == "finalized"));
    let skipped = faults.skipped_slots.lock().unwrap().clone();
    if body["method"] == "getBlocks" && finalized {
        let holes = faults.ledger_holes.lock().unwrap().clone();
        if let Some(slots) = value["result"].as_array_mut() {
            slots.retain(|slot| slot.as_u64().is_none_or(|s| !skipped.contains(&s) && !holes.contains(&s)));
        }
    }
    let lag = faults.statuses_behind.load(Ordering::SeqCst);
    if body["method"] == "getSignatureStatuses"
        && let Some(result) = value.get_mut("result")
    {
        lag_statuses(result, lag);
        for status in result["value"].as_array_mut().into_iter().flatten() {
            if status["slot"].as_u64().is_some_and(|s| skipped.contains(&s)) {
                *status = Value::Null;
            }
        }
    }
    Json(value).into_response()
}

/// The `result`s in `answer` (one answer, or a batch's) when `body` (one
/// call, or a batch) calls `method` only; none otherwise.
fn results_of<'a>(body: &Value, method: &str, answer: &'a mut Value) -> impl Iterator<Item = &'a mut Value> {
    let asked = |call: &Value| call["method"] == method;
    let only_method = body.as_array().map_or_else(|| asked(body), |calls| calls.iter().all(asked));
    let answers: Vec<&mut Value> = match answer {
        _ if !only_method => Vec::new(),
        Value::Array(answers) => answers.iter_mut().collect(),
        one => vec![one],
    };
    answers.into_iter().filter_map(|a| a.get_mut("result"))
}

/// Rewrites up to `forked_receipts` of the receipts in `answer` (one
/// answer, or a batch's) as a backend on another fork has them.
fn fork_receipts(faults: &Faults, body: &Value, answer: &mut Value) {
    for receipt in results_of(body, "eth_getTransactionReceipt", answer).filter(|r| r.is_object()) {
        let left = faults.forked_receipts.load(Ordering::SeqCst);
        if left == 0 {
            return;
        }
        faults.forked_receipts.store(left - 1, Ordering::SeqCst);
        faults.failed.fetch_add(1, Ordering::SeqCst);
        receipt["blockHash"] = json!(format!("0x{}", "11".repeat(32)));
        receipt["status"] = json!("0x0");
    }
}

/// Answers a single `eth_getTransactionReceipt` the node answered `null`
/// with a successful receipt at `invented_receipts_at` (see [`Faults`]).
fn invent_receipts(faults: &Faults, body: &Value, answer: &mut Value) {
    let at = faults.invented_receipts_at.load(Ordering::SeqCst);
    if at == 0 || body["method"] != "eth_getTransactionReceipt" || !answer["result"].is_null() {
        return;
    }
    faults.failed.fetch_add(1, Ordering::SeqCst);
    answer["result"] = json!({
        "transactionHash": body["params"][0], "transactionIndex": "0x0",
        "blockHash": format!("0x{}", "22".repeat(32)), "blockNumber": format!("{at:#x}"),
        "from": format!("0x{}", "00".repeat(20)), "to": null, "cumulativeGasUsed": "0x5208",
        "gasUsed": "0x5208", "effectiveGasPrice": "0x3b9aca00", "contractAddress": null,
        "logs": [], "logsBloom": format!("0x{}", "00".repeat(256)), "status": "0x1", "type": "0x2",
    });
}

/// Empties the transaction lists of up to `bodiless_blocks` of the blocks
/// in `answer` (one answer, or a batch's) that hold some.
fn strip_bodies(faults: &Faults, body: &Value, answer: &mut Value) {
    for block in results_of(body, "eth_getBlockByNumber", answer) {
        let Some(transactions) = block.get_mut("transactions").and_then(Value::as_array_mut) else {
            continue;
        };
        let left = faults.bodiless_blocks.load(Ordering::SeqCst);
        if left == 0 || transactions.is_empty() {
            continue;
        }
        faults.bodiless_blocks.store(left - 1, Ordering::SeqCst);
        faults.failed.fetch_add(1, Ordering::SeqCst);
        transactions.clear();
    }
}

/// Times the blocks in `answer` as Base's 200 ms blocks when
/// `millisecond_blocks_from` is set.
fn milliseconds(faults: &Faults, body: &Value, answer: &mut Value) {
    let from = faults.millisecond_blocks_from.load(Ordering::SeqCst);
    if from == 0 {
        return;
    }
    let hex = |v: &Value| v.as_str().and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok());
    for method in ["eth_getBlockByNumber", "eth_getBlockByHash"] {
        for block in results_of(body, method, answer).filter(|b| b.is_object()) {
            let Some(number) = hex(&block["number"]) else { continue };
            let ms = from + number * 200;
            block["timestampMs"] = json!(format!("{ms:#x}"));
            block["timestamp"] = json!(format!("{:#x}", ms / 1000));
        }
    }
}

/// What a node whose ledger starts at `pruned_below` answers where it
/// differs from the node: its first available block, and `-32001` for a
/// block below it (Agave's `BlockCleanedUp`).
fn pruned(faults: &Faults, body: &Value) -> Option<Value> {
    let first = faults.pruned_below.load(Ordering::SeqCst);
    if first == 0 {
        return None;
    }
    let id = &body["id"];
    match body["method"].as_str()? {
        "getFirstAvailableBlock" if !faults.archive_first_available.load(Ordering::SeqCst) => {
            Some(json!({"jsonrpc": "2.0", "id": id, "result": first}))
        }
        "getBlock" if body["params"][0].as_u64().is_some_and(|slot| slot < first) => {
            let slot = body["params"][0].as_u64().unwrap_or_default();
            let message =
                format!("Block {slot} cleaned up, does not exist on node. First available block: {first}");
            Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": message}}))
        }
        _ => None,
    }
}

/// A `getSignatureStatuses` result as a node `lag` slots behind gives it.
fn lag_statuses(result: &mut Value, lag: u64) {
    let Some(slot) = result["context"]["slot"].as_u64().filter(|_| lag > 0) else {
        return;
    };
    let at = slot.saturating_sub(lag);
    result["context"]["slot"] = json!(at);
    for status in result["value"].as_array_mut().into_iter().flatten() {
        if status["slot"].as_u64().is_some_and(|s| s > at) {
            *status = Value::Null;
        }
    }
}

fn record_calls(faults: &Faults, body: &Value) {
    let calls = body.as_array().cloned().unwrap_or_else(|| vec![body.clone()]);
    let now = std::time::Instant::now();
    let mut recorded = faults.calls.lock().unwrap();
    let kept_methods = faults.kept_methods.lock().unwrap();
    for call in calls {
        let method = call["method"].as_str().unwrap_or_default();
        if kept_methods.iter().any(|m| m == method) {
            faults.kept.lock().unwrap().push((method.to_string(), call["params"].clone()));
        }
        let full = method == "eth_getBlockByNumber" && call["params"][1] == true;
        recorded.push((now, if full { format!("{method}(full)") } else { method.to_string() }));
    }
}

fn injected_error(faults: &Faults, body: &Value) -> Option<Value> {
    let mut errors = faults.method_errors.lock().unwrap();
    let entry =
        errors.iter_mut().find(|(method, _, _, times)| body["method"] == method.as_str() && *times > 0)?;
    entry.3 -= 1;
    faults.failed.fetch_add(1, Ordering::SeqCst);
    Some(json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": entry.1, "message": entry.2}}))
}

/// The stale result `body`'s method is listed with, one of its times taken.
fn stale(faults: &Faults, body: &Value) -> Option<Value> {
    let mut stale = faults.stale.lock().unwrap();
    let entry =
        stale.iter_mut().find(|(method, _, times)| body["method"] == method.as_str() && *times > 0)?;
    entry.2 -= 1;
    faults.failed.fetch_add(1, Ordering::SeqCst);
    Some(entry.1.clone())
}

/// Takes one of the times `body`'s method is listed for in `list`; whether it did.
fn take(list: &Mutex<Vec<(String, u32)>>, body: &Value) -> bool {
    let mut list = list.lock().unwrap();
    let entry = list.iter_mut().find(|(method, times)| body["method"] == method.as_str() && *times > 0);
    entry.map(|e| e.1 -= 1).is_some()
}

/// The `null` answer to `body` (one call, or a batch of calls) when each of
/// its calls is listed in `nulled`.
fn nulled(faults: &Faults, body: &Value) -> Option<Value> {
    let listed = |call: &Value| {
        faults.nulled.lock().unwrap().iter().any(|(m, t)| call["method"] == m.as_str() && *t > 0)
    };
    answer_each(body, listed, |call| {
        take(&faults.nulled, call);
        faults.failed.fetch_add(1, Ordering::SeqCst);
        json!({"result": null})
    })
}

/// The answers `replaced` lists for `body`'s calls, when it lists each.
fn replaced(faults: &Faults, body: &Value) -> Option<Value> {
    let listed = |call: &Value| {
        faults.replaced.lock().unwrap().iter().any(|(m, _, t)| call["method"] == m.as_str() && *t > 0)
    };
    answer_each(body, listed, |call| {
        let mut list = faults.replaced.lock().unwrap();
        let entry = list.iter_mut().find(|(m, _, t)| call["method"] == m.as_str() && *t > 0);
        faults.failed.fetch_add(1, Ordering::SeqCst);
        entry.map_or(json!({"result": null}), |e| {
            e.2 -= 1;
            e.1.clone()
        })
    })
}

/// `answer`'s answer to each call of `body` (one call, or a batch of calls)
/// when `listed` lists each of them.
fn answer_each(
    body: &Value,
    listed: impl Fn(&Value) -> bool,
    mut answer: impl FnMut(&Value) -> Value,
) -> Option<Value> {
    let calls = body.as_array().cloned().unwrap_or_else(|| vec![body.clone()]);
    if calls.is_empty() || !calls.iter().all(listed) {
        return None;
    }
    let answers: Vec<Value> = calls
        .iter()
        .map(|call| {
            let mut answer = answer(call);
            answer["jsonrpc"] = json!("2.0");
            answer["id"] = call["id"].clone();
            answer
        })
        .collect();
    Some(if body.is_array() { Value::Array(answers) } else { answers[0].clone() })
}
