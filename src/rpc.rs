//! A failed RPC call, on any chain family: the chain, the method, the
//! node's message (every URL reduced to its host), its kind for metrics,
//! the JSON-RPC code when the node answered with an error, and what the
//! family's reader learnt beyond the kind ([`Cause`]). Whether asking again
//! can help follows from it ([`RpcFailure::retryable`]).

use crate::chain::Chain;

#[derive(Debug, thiserror::Error)]
#[error("rpc {method} failed on {chain}: {message}")]
pub struct RpcFailure {
    pub chain: Chain,
    pub method: &'static str,
    /// The transport's message with every URL reduced to its host.
    pub message: String,
    /// What went wrong, for metrics: see [`crate::deposits::watcher::WatchError::kind`].
    pub kind: &'static str,
    /// The JSON-RPC error code, when the node answered with an error.
    pub code: Option<i64>,
    pub cause: Cause,
}

/// What a family's reader learnt of a failure beyond its kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Cause {
    #[default]
    Other,
    /// The node refused a block range as too large (`eth_getLogs`): a
    /// smaller range is asked instead.
    RangeTooLarge,
    /// The node answered that it has no block for the slot.
    SlotUnavailable,
    /// The answer holds a transaction this release cannot read (Solana's
    /// `-32015`, or a version or encoding the decoder does not know).
    Unreadable(Box<UnreadableTransaction>),
}

impl RpcFailure {
    /// A failure of `method` on `chain` with no code and no cause.
    pub fn new(chain: Chain, method: &'static str, kind: &'static str, message: String) -> Self {
        Self { chain, method, message, kind, code: None, cause: Cause::Other }
    }

    /// Whether the RPC layer may ask the same request again at once: not
    /// for a range the node refuses as too large, a slot it has no block
    /// for, a transaction this release cannot read, or a node behind the
    /// request's context (the caller decides whether to wait). The step
    /// that made the call may still be tried again later: a watcher or a
    /// sender backs off and retries every RPC failure.
    pub fn retryable(&self) -> bool {
        self.cause == Cause::Other && self.kind != "behind" && self.kind != "unsupported_version"
    }
}

/// A transaction this release cannot decode, or a block (slot) holding
/// one: what the node refused to serve or the decoder does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableTransaction {
    pub slot: Option<u64>,
    pub signature: Option<String>,
    /// What this release reads, e.g. `versions legacy to 1`.
    pub reads: &'static str,
    /// Why, e.g. `version 2`.
    pub reason: String,
}

impl std::fmt::Display for UnreadableTransaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.slot.map_or_else(|| "an unknown slot".to_string(), |s| format!("slot {s}"));
        match &self.signature {
            Some(signature) => write!(f, "transaction {signature} in {slot}")?,
            None => write!(f, "a transaction in {slot}")?,
        }
        write!(f, " cannot be read by this release ({}): {}", self.reads, self.reason)
    }
}

/// Whether a JSON-RPC error says the node does not serve the method at all
/// (`-32601`, or a provider's wording of it): no retry helps, the node must
/// change (e.g. enable the `debug` or `trace` namespace).
pub fn refuses_method(code: i64, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == -32601
        || ["method not found", "method not supported", "does not exist/is not available", "not whitelisted"]
            .iter()
            .any(|needle| m.contains(needle))
}

/// A cap on requests a second, for either family's reader in the
/// background (reconciliation): each request waits for its turn, one every
/// `1 / rate` seconds, however many callers ask at once.
#[derive(Debug, Clone)]
pub struct Pace {
    gap: std::time::Duration,
    next: std::sync::Arc<tokio::sync::Mutex<tokio::time::Instant>>,
}

impl Pace {
    /// `per_second` requests a second at most (at least one).
    pub fn new(per_second: u32) -> Self {
        let gap = std::time::Duration::from_secs(1) / per_second.max(1);
        Pace { gap, next: std::sync::Arc::new(tokio::sync::Mutex::new(tokio::time::Instant::now())) }
    }

    /// Waits for the next request's turn.
    pub async fn turn(&self) {
        let turn = {
            let mut next = self.next.lock().await;
            let turn = (*next).max(tokio::time::Instant::now());
            *next = turn + self.gap;
            turn
        };
        tokio::time::sleep_until(turn).await;
    }
}
