//! What the senders and the balance reader ask a Solana node: the latest
//! blockhash, the bank's tip, accounts and balances, signature statuses,
//! and the broadcast of a signed transaction.

use serde_json::{Value, json};
use solana_commitment_config::CommitmentConfig;
use solana_rpc_client_api::{
    client_error::ErrorKind,
    request::{RpcError, RpcRequest},
};

use super::{RpcFailure, SignatureStatus, SolanaBroadcast, SolanaRpc, Statuses, Tip};

impl SolanaRpc {
    /// The latest blockhash at `confirmed` and the last block height at which
    /// a transaction using it can be included.
    pub async fn latest_blockhash(&self) -> Result<(String, u64), RpcFailure> {
        let response: Value =
            self.call(RpcRequest::GetLatestBlockhash, json!([{ "commitment": "confirmed" }])).await?;
        let value = &response["value"];
        value["blockhash"]
            .as_str()
            .zip(value["lastValidBlockHeight"].as_u64())
            .map(|(hash, height)| (hash.to_string(), height))
            .ok_or_else(|| self.malformed("getLatestBlockhash", &response))
    }

    /// The slot and block height of the node's bank at `commitment`, from
    /// one answer (`getEpochInfo`): `getSlot` and `getBlockHeight` are two
    /// answers that two backends behind one URL can give at different heights.
    pub async fn tip(&self, commitment: CommitmentConfig) -> Result<Tip, RpcFailure> {
        let info: Value = self.call(RpcRequest::GetEpochInfo, json!([commitment])).await?;
        info["absoluteSlot"]
            .as_u64()
            .zip(info["blockHeight"].as_u64())
            .map(|(slot, block_height)| Tip { slot, block_height })
            .ok_or_else(|| self.malformed("getEpochInfo", &info))
    }

    /// The hash of the block at `slot` (`getBlock` without its
    /// transactions), at `commitment`.
    pub async fn block_hash(&self, slot: u64, commitment: CommitmentConfig) -> Result<String, RpcFailure> {
        let config = json!({ "transactionDetails": "none", "rewards": false, "commitment": commitment.commitment,
            "maxSupportedTransactionVersion": 0 });
        let block: Value = self.call(RpcRequest::GetBlock, json!([slot, config])).await?;
        block["blockhash"].as_str().map(String::from).ok_or_else(|| self.malformed("getBlock", &block))
    }

    /// Whether an account exists at `confirmed`.
    pub async fn account_exists(&self, address: &str) -> Result<bool, RpcFailure> {
        let config = json!({ "encoding": "base64", "commitment": "confirmed", "dataSlice": { "offset": 0, "length": 0 } });
        let response: Value = self.call(RpcRequest::GetAccountInfo, json!([address, config])).await?;
        Ok(!response["value"].is_null())
    }

    /// Where each signature stands, its whole history searched: `None` when
    /// the node has no status for it, else its slot, its error (`Some` when
    /// it failed on chain) and its confirmation level (`processed`,
    /// `confirmed` or `finalized`); with the slot the node answered at.
    pub async fn signature_statuses(&self, signatures: &[&str]) -> Result<Statuses, RpcFailure> {
        let response: Value = self
            .call(RpcRequest::GetSignatureStatuses, json!([signatures, { "searchTransactionHistory": true }]))
            .await?;
        let malformed = || self.malformed("getSignatureStatuses", &response);
        let slot = response["context"]["slot"].as_u64().ok_or_else(malformed)?;
        let values = response["value"].as_array().ok_or_else(malformed)?;
        let values = values
            .iter()
            .map(|v| {
                (!v.is_null()).then(|| SignatureStatus {
                    slot: v["slot"].as_u64().unwrap_or_default(),
                    failed: !v["err"].is_null(),
                    confirmation: v["confirmationStatus"].as_str().unwrap_or("processed").to_string(),
                })
            })
            .collect();
        Ok(Statuses { slot, values })
    }

    /// Sends a signed transaction (base64) with preflight: the node refusing
    /// it for a fault of its own (a failed simulation, a bad signature) is
    /// `Rejected`; a signature it has already processed counts as accepted;
    /// an answer about the node itself (behind, unhealthy, a blockhash it has
    /// not seen, see [`crate::solana::send_answers::about_node`]) refuses nothing and
    /// is a failure, as no answer is, once every URL gave one.
    pub async fn send_transaction(&self, base64: &str) -> Result<SolanaBroadcast, RpcFailure> {
        let params = json!([base64, { "encoding": "base64", "preflightCommitment": "confirmed" }]);
        let mut last = None;
        for client in &self.clients {
            match client.send::<String>(RpcRequest::SendTransaction, params.clone()).await {
                Ok(_) => return Ok(SolanaBroadcast::Accepted),
                Err(error) => match error.kind.as_ref() {
                    ErrorKind::RpcError(RpcError::RpcResponseError { code, message, data, .. }) => {
                        let text = format!("{message} {data:?}");
                        if text.contains("AlreadyProcessed") || text.contains("already been processed") {
                            return Ok(SolanaBroadcast::Accepted);
                        }
                        if crate::solana::send_answers::about_node(*code, &text) {
                            last = Some(self.failure(RpcRequest::SendTransaction, &error));
                            continue;
                        }
                        return Ok(SolanaBroadcast::Rejected(message.clone()));
                    }
                    _ => last = Some(self.failure(RpcRequest::SendTransaction, &error)),
                },
            }
        }
        Err(last.unwrap_or_else(|| self.malformed("sendTransaction", &Value::Null)))
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
