//! The Solana JSON-RPC edge: solana-client's nonblocking `RpcClient` per URL,
//! failover in order, retries with backoff on transient failures, and errors
//! with every URL reduced to its host.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use backon::{ExponentialBuilder, Retryable};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::{
    client_error::{Error as ClientError, ErrorKind},
    config::{RpcBlockConfig, RpcSignaturesForAddressConfig, RpcTransactionConfig},
    custom_error::{
        JSON_RPC_SERVER_ERROR_BLOCK_CLEANED_UP, JSON_RPC_SERVER_ERROR_BLOCK_NOT_AVAILABLE,
        JSON_RPC_SERVER_ERROR_LONG_TERM_STORAGE_SLOT_SKIPPED,
        JSON_RPC_SERVER_ERROR_MIN_CONTEXT_SLOT_NOT_REACHED, JSON_RPC_SERVER_ERROR_SLOT_SKIPPED,
        JSON_RPC_SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION,
    },
    request::{RpcError, RpcRequest},
    response::RpcConfirmedTransactionStatusWithSignature,
};
use solana_transaction_status_client_types::{
    EncodedConfirmedTransactionWithStatusMeta, TransactionDetails, UiConfirmedBlock, UiTransactionEncoding,
};

mod balances;
mod sending;

pub use balances::{ACCOUNTS_PER_CALL, AtSlot};

use super::decode::{self, UnreadableTransaction};
use crate::{
    chain::Chain,
    redact::{RpcUrl, redact_urls},
};

/// JSON-RPC codes a node answers for slots it does not have: skipped
/// (-32007), missing from long-term storage (-32009), not yet available
/// (-32004) or cleaned up (-32001).
const SLOT_UNAVAILABLE: [i64; 4] = [
    JSON_RPC_SERVER_ERROR_BLOCK_CLEANED_UP,
    JSON_RPC_SERVER_ERROR_BLOCK_NOT_AVAILABLE,
    JSON_RPC_SERVER_ERROR_SLOT_SKIPPED,
    JSON_RPC_SERVER_ERROR_LONG_TERM_STORAGE_SLOT_SKIPPED,
];

/// How often an answer from a backend behind (-32016) is asked again at once;
/// then the call fails, without the backoff other failures get, and its
/// caller decides whether to wait: with half the backends behind, nine
/// answers in a row from them come once in 512 calls.
const BEHIND_AT_ONCE: usize = 8;

/// The JSON-RPC code a node answers when it has not reached the request's
/// `minContextSlot` (-32016): a backend behind, whose answer would be short.
const MIN_CONTEXT_SLOT_NOT_REACHED: i64 = JSON_RPC_SERVER_ERROR_MIN_CONTEXT_SLOT_NOT_REACHED;

pub use super::finality::MAX_BLOCKS_RANGE;

/// The JSON-RPC code a node answers when a transaction (for `getBlock`: any
/// transaction of the slot) is of a version newer than the request declared.
const UNSUPPORTED_TRANSACTION_VERSION: i64 = JSON_RPC_SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION;

use crate::rpc::Pace;
pub use crate::rpc::{Cause, RpcFailure};

/// A signature's status, as `getSignatureStatuses` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureStatus {
    pub slot: u64,
    pub failed: bool,
    pub confirmation: String,
}

/// Signatures' statuses as one node saw them: `slot` is the answer's
/// `context.slot`, the slot that node had processed when it answered. A
/// node behind the slot where a transaction landed answers no status for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statuses {
    pub slot: u64,
    /// `None` where the node has no status for the signature.
    pub values: Vec<Option<SignatureStatus>>,
}

/// A block the chain reached at a commitment, as one answer tells it: its
/// slot and its block height belong to the same bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tip {
    pub slot: u64,
    pub block_height: u64,
}

/// What became of `sendTransaction`.
#[derive(Debug)]
pub enum SolanaBroadcast {
    Accepted,
    Rejected(String),
}

pub struct SolanaRpc {
    chain: Chain,
    clients: Vec<RpcClient>,
    /// The highest slot seen (`getSlot` answers, signature listings, the
    /// head a restart recorded): a backend behind it answers
    /// `minContextSlot` requests with -32016 instead of less.
    freshest: AtomicU64,
    /// A cap on requests a second, for a reader in the background.
    pace: Option<Pace>,
}

impl SolanaRpc {
    pub fn new(chain: Chain, urls: &[RpcUrl]) -> Self {
        let clients = urls
            .iter()
            .map(|u| {
                RpcClient::new_with_timeout_and_commitment(
                    u.expose().to_string(),
                    Duration::from_secs(30),
                    CommitmentConfig::confirmed(),
                )
            })
            .collect();
        Self { chain, clients, freshest: AtomicU64::new(0), pace: None }
    }

    /// A client of `urls` that sends at most `per_second` requests a
    /// second: for a reader in the background that must leave the
    /// providers' rate to the watcher.
    pub fn paced(chain: Chain, urls: &[RpcUrl], per_second: u32) -> Self {
        Self { pace: Some(Pace::new(per_second)), ..Self::new(chain, urls) }
    }

    /// The highest slot seen so far (see the field).
    pub fn freshest(&self) -> u64 {
        self.freshest.load(Ordering::Relaxed)
    }

    /// Records a slot the chain is known to have reached (another process's
    /// answer, kept in the store).
    pub fn saw(&self, slot: u64) {
        self.freshest.fetch_max(slot, Ordering::Relaxed);
    }

    /// Sends `request` to the first URL that answers, retrying transient
    /// failures (rate limits and 5xx are already retried by the client). An
    /// answer from a backend behind `minContextSlot` is asked again at once,
    /// up to [`BEHIND_AT_ONCE`] times: behind one load-balanced URL, each
    /// request reaches whichever backend the balancer picks.
    async fn call<T: DeserializeOwned>(&self, request: RpcRequest, params: Value) -> Result<T, RpcFailure> {
        let attempt = || async {
            let mut last = None;
            for client in &self.clients {
                for _ in 0..=BEHIND_AT_ONCE {
                    if let Some(pace) = &self.pace {
                        pace.turn().await;
                    }
                    match client.send::<T>(request, params.clone()).await {
                        Ok(value) => return Ok(value),
                        Err(error) if answered(&error) => return Err(self.failure(request, &error)),
                        Err(error) => {
                            let failure = self.failure(request, &error);
                            let behind = failure.kind == "behind";
                            last = Some(failure);
                            if !behind {
                                break;
                            }
                        }
                    }
                }
            }
            Err(last
                .unwrap_or_else(|| RpcFailure::new(self.chain, "none", "unreachable", "no rpc url".into())))
        };
        let backoff =
            ExponentialBuilder::default().with_min_delay(Duration::from_millis(200)).with_max_times(3);
        attempt.retry(backoff).when(RpcFailure::retryable).await
    }

    fn failure(&self, request: RpcRequest, error: &ClientError) -> RpcFailure {
        let code = match error.kind.as_ref() {
            ErrorKind::RpcError(RpcError::RpcResponseError { code, .. }) => Some(*code),
            _ => None,
        };
        RpcFailure {
            chain: self.chain,
            method: method_name(request),
            message: redact_urls(&error.to_string()),
            kind: error_kind(error),
            code,
            cause: if code.is_some_and(|c| SLOT_UNAVAILABLE.contains(&c)) {
                Cause::SlotUnavailable
            } else {
                Cause::Other
            },
        }
    }

    /// `failure` naming the slot and signature of the transaction it is about
    /// when the node refused its version (`-32015`) or the decoder cannot
    /// read it.
    fn unreadable(&self, method: &'static str, unreadable: UnreadableTransaction) -> RpcFailure {
        RpcFailure {
            message: unreadable.to_string(),
            cause: Cause::Unreadable(Box::new(unreadable)),
            ..RpcFailure::new(self.chain, method, "unsupported_version", String::new())
        }
    }

    pub async fn genesis_hash_of(chain: Chain, url: &RpcUrl) -> Result<String, RpcFailure> {
        Self::new(chain, std::slice::from_ref(url)).call(RpcRequest::GetGenesisHash, Value::Null).await
    }

    pub async fn slot(&self, commitment: CommitmentConfig) -> Result<u64, RpcFailure> {
        let slot = self.call(RpcRequest::GetSlot, json!([commitment])).await?;
        self.saw(slot);
        Ok(slot)
    }

    /// Slots in `start..=end` that hold a block at `commitment`, as one
    /// answer: a node lists blocks only up to its own height, so callers
    /// judge each answer on its own and page ranges wider than
    /// [`MAX_BLOCKS_RANGE`] themselves.
    pub async fn blocks(
        &self,
        start: u64,
        end: u64,
        commitment: CommitmentConfig,
    ) -> Result<Vec<u64>, RpcFailure> {
        self.call(RpcRequest::GetBlocks, json!([start, end, commitment])).await
    }

    /// The first slot at or after `start` that holds a block at `commitment`,
    /// as the answering node knows it (`getBlocksWithLimit` with limit 1):
    /// every slot between `start` and it is provably empty on that node.
    pub async fn first_block(
        &self,
        start: u64,
        commitment: CommitmentConfig,
    ) -> Result<Option<u64>, RpcFailure> {
        Ok(self.blocks_with_limit(start, 1, commitment).await?.first().copied())
    }

    /// The block after `block` at `commitment`, from one answer that lists
    /// `block` itself (`getBlocksWithLimit` with limit 2): that node holds
    /// `block`, so every slot between the two is provably empty there. `None`
    /// when the answer does not show both.
    pub async fn block_after(
        &self,
        block: u64,
        commitment: CommitmentConfig,
    ) -> Result<Option<u64>, RpcFailure> {
        Ok(match self.blocks_with_limit(block, 2, commitment).await?.as_slice() {
            [first, next, ..] if *first == block && *next > block => Some(*next),
            _ => None,
        })
    }

    async fn blocks_with_limit(
        &self,
        start: u64,
        limit: usize,
        commitment: CommitmentConfig,
    ) -> Result<Vec<u64>, RpcFailure> {
        self.call(RpcRequest::GetBlocksWithLimit, json!([start, limit, commitment])).await
    }

    /// A block's estimated production time, in seconds since the epoch.
    pub async fn block_time(&self, slot: u64) -> Result<u64, RpcFailure> {
        let time: Option<i64> = self.call(RpcRequest::GetBlockTime, json!([slot])).await?;
        time.map(|t| t.max(0) as u64).ok_or_else(|| self.malformed("getBlockTime", &Value::Null))
    }

    /// The lowest slot the node still holds a block for.
    pub async fn first_available_block(&self) -> Result<u64, RpcFailure> {
        self.call(RpcRequest::GetFirstAvailableBlock, Value::Null).await
    }

    /// A block with every transaction in `json` encoding, versions up to
    /// [`decode::READABLE_VERSION`] included. A slot holding a transaction
    /// this release cannot read fails as a whole, naming the slot (and the
    /// transaction when the node served it): the cursor never passes it.
    pub async fn block(
        &self,
        slot: u64,
        commitment: CommitmentConfig,
    ) -> Result<UiConfirmedBlock, RpcFailure> {
        let config = RpcBlockConfig {
            encoding: Some(UiTransactionEncoding::Json),
            transaction_details: Some(TransactionDetails::Full),
            rewards: Some(false),
            commitment: Some(commitment),
            max_supported_transaction_version: Some(decode::READABLE_VERSION),
        };
        let block: UiConfirmedBlock = match self.call(RpcRequest::GetBlock, json!([slot, config])).await {
            Err(failure) if unsupported_version(&failure) => {
                let unreadable = decode::refused(Some(slot), None, &failure.message);
                return Err(self.unreadable("getBlock", unreadable));
            }
            answer => answer?,
        };
        for tx in block.transactions.iter().flatten() {
            decode::readable(slot, tx).map_err(|u| self.unreadable("getBlock", u))?;
        }
        Ok(block)
    }

    /// Whether this node's own finalized ledger proves `slot` skipped:
    /// its `getBlocks` answer around the slot lists blocks on both sides
    /// and not the slot (see [`super::finality::verdict`]). `finalized` is
    /// the node's finalized slot, at or above `slot`.
    pub async fn proves_skipped(&self, slot: u64, finalized: u64) -> Result<bool, RpcFailure> {
        let Some((start, end)) = super::finality::windows(&[slot], finalized).first().copied() else {
            return Ok(false);
        };
        let listed = self.blocks(start, end, CommitmentConfig::finalized()).await?;
        Ok(super::finality::verdict(slot, &listed) == super::finality::Verdict::Skipped)
    }

    /// One page of an address's signatures, newest first, as known at the
    /// freshest slot seen or `floor`, whichever is higher (`minContextSlot`):
    /// a backend behind it answers -32016 rather than a history without the
    /// newest signatures. Callers pass the slot of the signatures they name
    /// (`before`, `until`) as `floor`: a node that does not know `before`
    /// answers an empty page, and one that does not know `until` lists the
    /// history down to its first block.
    pub async fn signatures(
        &self,
        address: &str,
        (before, until): (Option<&str>, Option<&str>),
        limit: usize,
        floor: u64,
    ) -> Result<Vec<RpcConfirmedTransactionStatusWithSignature>, RpcFailure> {
        let config = RpcSignaturesForAddressConfig {
            before: before.map(String::from),
            until: until.map(String::from),
            limit: Some(limit),
            commitment: Some(CommitmentConfig::confirmed()),
            min_context_slot: Some(self.freshest().max(floor)).filter(|slot| *slot > 0),
        };
        let page: Vec<RpcConfirmedTransactionStatusWithSignature> =
            self.call(RpcRequest::GetSignaturesForAddress, json!([address, config])).await?;
        if let Some(newest) = page.first() {
            self.saw(newest.slot);
        }
        Ok(page)
    }

    /// A transaction by signature in `json` encoding, versions up to
    /// [`decode::READABLE_VERSION`] included. One this release cannot read is
    /// an error naming its signature and slot (the slot from
    /// `getSignatureStatuses` when the node refused to serve it).
    pub async fn transaction(
        &self,
        signature: &str,
    ) -> Result<Option<EncodedConfirmedTransactionWithStatusMeta>, RpcFailure> {
        let config = RpcTransactionConfig {
            encoding: Some(UiTransactionEncoding::Json),
            commitment: Some(CommitmentConfig::confirmed()),
            max_supported_transaction_version: Some(decode::READABLE_VERSION),
        };
        let answer: Option<EncodedConfirmedTransactionWithStatusMeta> =
            match self.call(RpcRequest::GetTransaction, json!([signature, config])).await {
                Err(failure) if unsupported_version(&failure) => {
                    let slot = self
                        .signature_statuses(&[signature])
                        .await
                        .ok()
                        .and_then(|s| s.values.into_iter().next().flatten());
                    let slot = slot.map(|s| s.slot);
                    let unreadable = decode::refused(slot, Some(signature), &failure.message);
                    return Err(self.unreadable("getTransaction", unreadable));
                }
                answer => answer?,
            };
        if let Some(tx) = &answer {
            decode::readable(tx.slot, &tx.transaction).map_err(|u| self.unreadable("getTransaction", u))?;
        }
        Ok(answer)
    }

    fn malformed(&self, method: &'static str, value: &Value) -> RpcFailure {
        RpcFailure::new(self.chain, method, "bad_response", format!("unexpected answer {value}"))
    }
}

/// The node answered `-32015`: the request declared an older transaction
/// version than the answer holds. Asking again cannot help.
fn unsupported_version(failure: &RpcFailure) -> bool {
    failure.kind == "unsupported_version"
}

/// The node answered with a JSON-RPC error: asking another URL would not help.
fn answered(error: &ClientError) -> bool {
    matches!(error.kind.as_ref(), ErrorKind::RpcError(RpcError::RpcResponseError { code, .. }) if SLOT_UNAVAILABLE.contains(code))
}

/// A short label of what failed, for the `kind` of error metrics.
fn error_kind(error: &ClientError) -> &'static str {
    match error.kind.as_ref() {
        ErrorKind::Reqwest(e) if e.status().is_some_and(|s| s.as_u16() == 429) => "rate_limited",
        ErrorKind::Reqwest(e) if e.is_timeout() => "timeout",
        ErrorKind::Reqwest(e) if e.status().is_some() => "http_status",
        ErrorKind::Reqwest(_) => "unreachable",
        ErrorKind::RpcError(RpcError::RpcResponseError { code, .. }) if SLOT_UNAVAILABLE.contains(code) => {
            "missing_data"
        }
        ErrorKind::RpcError(RpcError::RpcResponseError { code: UNSUPPORTED_TRANSACTION_VERSION, .. }) => {
            "unsupported_version"
        }
        ErrorKind::RpcError(RpcError::RpcResponseError { code: MIN_CONTEXT_SLOT_NOT_REACHED, .. }) => {
            "behind"
        }
        ErrorKind::RpcError(RpcError::RpcResponseError { code, message, .. })
            if crate::rpc::refuses_method(*code, message) =>
        {
            "method_unsupported"
        }
        ErrorKind::RpcError(RpcError::RpcResponseError { .. }) => "rpc_error",
        ErrorKind::SerdeJson(_) | ErrorKind::RpcError(_) => "bad_response",
        _ => "other",
    }
}

fn method_name(request: RpcRequest) -> &'static str {
    match request {
        RpcRequest::GetGenesisHash => "getGenesisHash",
        RpcRequest::GetSlot => "getSlot",
        RpcRequest::GetBlocks => "getBlocks",
        RpcRequest::GetBlock => "getBlock",
        RpcRequest::GetBlocksWithLimit => "getBlocksWithLimit",
        RpcRequest::GetBlockTime => "getBlockTime",
        RpcRequest::GetFirstAvailableBlock => "getFirstAvailableBlock",
        RpcRequest::GetSignaturesForAddress => "getSignaturesForAddress",
        RpcRequest::GetTransaction => "getTransaction",
        RpcRequest::GetTokenAccountsByOwner => "getTokenAccountsByOwner",
        RpcRequest::GetBalance => "getBalance",
        RpcRequest::GetLatestBlockhash => "getLatestBlockhash",
        RpcRequest::GetEpochInfo => "getEpochInfo",
        RpcRequest::GetAccountInfo => "getAccountInfo",
        RpcRequest::GetSignatureStatuses => "getSignatureStatuses",
        RpcRequest::SendTransaction => "sendTransaction",
        _ => "rpc",
    }
}
