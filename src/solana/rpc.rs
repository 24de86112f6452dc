//! The Solana JSON-RPC edge: solana-client's nonblocking `RpcClient` per URL,
//! failover in order, retries with backoff on transient failures, and errors
//! with every URL reduced to its host.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::{
    client_error::{Error as ClientError, ErrorKind},
    config::{RpcBlockConfig, RpcSignaturesForAddressConfig, RpcTransactionConfig},
    request::{RpcError, RpcRequest},
    response::RpcConfirmedTransactionStatusWithSignature,
};
use solana_transaction_status_client_types::{
    EncodedConfirmedTransactionWithStatusMeta, TransactionDetails, UiConfirmedBlock, UiTransactionEncoding,
};

use crate::{
    chain::Chain,
    redact::{RpcUrl, redact_urls},
};

/// JSON-RPC codes a node answers for slots it does not have: skipped
/// (-32007), missing from long-term storage (-32009), not yet available
/// (-32004) or cleaned up (-32001).
const SLOT_UNAVAILABLE: [i64; 4] = [-32001, -32004, -32007, -32009];

#[derive(Debug, thiserror::Error)]
#[error("rpc {method} failed on {chain}: {message}")]
pub struct RpcFailure {
    pub chain: Chain,
    pub method: &'static str,
    pub message: String,
    /// What went wrong, for metrics: see [`crate::watcher::WatchError::kind`].
    pub kind: &'static str,
    /// The node answered that it has no block for the slot.
    pub slot_unavailable: bool,
}

pub struct SolanaRpc {
    chain: Chain,
    clients: Vec<RpcClient>,
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
        Self { chain, clients }
    }

    /// Sends `request` to the first URL that answers, retrying transient
    /// failures (rate limits and 5xx are already retried by the client).
    async fn call<T: DeserializeOwned>(&self, request: RpcRequest, params: Value) -> Result<T, RpcFailure> {
        let attempt = || async {
            let mut last = None;
            for client in &self.clients {
                match client.send::<T>(request, params.clone()).await {
                    Ok(value) => return Ok(value),
                    Err(error) if answered(&error) => return Err(self.failure(request, &error)),
                    Err(error) => last = Some(self.failure(request, &error)),
                }
            }
            Err(last.unwrap_or_else(|| RpcFailure {
                chain: self.chain,
                method: "none",
                message: "no rpc url".into(),
                kind: "unreachable",
                slot_unavailable: false,
            }))
        };
        let backoff =
            ExponentialBuilder::default().with_min_delay(Duration::from_millis(200)).with_max_times(3);
        attempt.retry(backoff).when(|e: &RpcFailure| !e.slot_unavailable).await
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
            slot_unavailable: code.is_some_and(|c| SLOT_UNAVAILABLE.contains(&c)),
        }
    }

    pub async fn genesis_hash_of(chain: Chain, url: &RpcUrl) -> Result<String, RpcFailure> {
        Self::new(chain, std::slice::from_ref(url)).call(RpcRequest::GetGenesisHash, Value::Null).await
    }

    pub async fn slot(&self, commitment: CommitmentConfig) -> Result<u64, RpcFailure> {
        self.call(RpcRequest::GetSlot, json!([commitment])).await
    }

    /// Slots in `start..=end` that hold a block at `commitment`.
    pub async fn blocks(
        &self,
        start: u64,
        end: u64,
        commitment: CommitmentConfig,
    ) -> Result<Vec<u64>, RpcFailure> {
        self.call(RpcRequest::GetBlocks, json!([start, end, commitment])).await
    }

    /// A block with every transaction in `json` encoding, version 0 included.
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
            max_supported_transaction_version: Some(0),
        };
        self.call(RpcRequest::GetBlock, json!([slot, config])).await
    }

    /// One page of an address's signatures, newest first.
    pub async fn signatures(
        &self,
        address: &str,
        before: Option<&str>,
        until: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RpcConfirmedTransactionStatusWithSignature>, RpcFailure> {
        let config = RpcSignaturesForAddressConfig {
            before: before.map(String::from),
            until: until.map(String::from),
            limit: Some(limit),
            commitment: Some(CommitmentConfig::confirmed()),
            min_context_slot: None,
        };
        self.call(RpcRequest::GetSignaturesForAddress, json!([address, config])).await
    }

    pub async fn transaction(
        &self,
        signature: &str,
    ) -> Result<Option<EncodedConfirmedTransactionWithStatusMeta>, RpcFailure> {
        let config = RpcTransactionConfig {
            encoding: Some(UiTransactionEncoding::Json),
            commitment: Some(CommitmentConfig::confirmed()),
            max_supported_transaction_version: Some(0),
        };
        self.call(RpcRequest::GetTransaction, json!([signature, config])).await
    }

    /// A wallet's lamports at `confirmed`.
    pub async fn balance(&self, address: &str) -> Result<u64, RpcFailure> {
        let response: Value =
            self.call(RpcRequest::GetBalance, json!([address, { "commitment": "confirmed" }])).await?;
        response.get("value").and_then(Value::as_u64).ok_or_else(|| self.malformed("getBalance", &response))
    }

    /// A wallet's token balances under a token program at `confirmed`:
    /// `(mint, amount in base units)` per token account.
    pub async fn token_balances(&self, owner: &str, program: &str) -> Result<Vec<(String, u64)>, RpcFailure> {
        let filter = json!({ "programId": program });
        let config = json!({ "encoding": "jsonParsed", "commitment": "confirmed" });
        let response: Value =
            self.call(RpcRequest::GetTokenAccountsByOwner, json!([owner, filter, config])).await?;
        let accounts = response.get("value").and_then(Value::as_array).cloned().unwrap_or_default();
        accounts
            .iter()
            .map(|account| {
                let info = &account["account"]["data"]["parsed"]["info"];
                let mint = info["mint"].as_str();
                let amount = info["tokenAmount"]["amount"].as_str().and_then(|a| a.parse().ok());
                mint.zip(amount)
                    .map(|(mint, amount)| (mint.to_string(), amount))
                    .ok_or_else(|| self.malformed("getTokenAccountsByOwner", account))
            })
            .collect()
    }

    fn malformed(&self, method: &'static str, value: &Value) -> RpcFailure {
        RpcFailure {
            chain: self.chain,
            method,
            message: format!("unexpected answer {value}"),
            kind: "bad_response",
            slot_unavailable: false,
        }
    }

    /// Token accounts a wallet owns under a token program.
    pub async fn token_accounts(&self, owner: &str, program: &str) -> Result<Vec<String>, RpcFailure> {
        let filter = json!({ "programId": program });
        let config = json!({ "encoding": "base64", "commitment": "confirmed", "dataSlice": { "offset": 0, "length": 0 } });
        let response: Value =
            self.call(RpcRequest::GetTokenAccountsByOwner, json!([owner, filter, config])).await?;
        let accounts = response.get("value").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(accounts.iter().filter_map(|a| a.get("pubkey")?.as_str().map(String::from)).collect())
    }
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
        RpcRequest::GetSignaturesForAddress => "getSignaturesForAddress",
        RpcRequest::GetTransaction => "getTransaction",
        RpcRequest::GetTokenAccountsByOwner => "getTokenAccountsByOwner",
        RpcRequest::GetBalance => "getBalance",
        _ => "rpc",
    }
}
