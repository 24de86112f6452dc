//! The sender's calls: balances, nonces, the fee market, gas estimates,
//! calls against a given state, receipts, and broadcasts.

use alloy::{
    primitives::{Address, B256, Bytes, U64, U256},
    rpc::types::{BlockNumberOrTag, Filter, Log},
    sol,
    sol_types::SolCall,
};

use super::{Broadcast, EvmRpc, FeeHeader, FeeReceipt, RpcFailure};

sol! {
    function balanceOf(address owner) external view returns (uint256);
}

impl EvmRpc {
    /// The native balance of `address` at the latest block, in wei.
    pub async fn balance(&self, address: Address) -> Result<U256, RpcFailure> {
        self.client
            .request("eth_getBalance", (address, BlockNumberOrTag::Latest))
            .await
            .map_err(|e| self.failure("eth_getBalance", e))
    }

    /// The native balance of `address` at the end of block `number`: an
    /// archive read for an old block.
    pub async fn balance_at(&self, address: Address, number: u64) -> Result<U256, RpcFailure> {
        self.client
            .request("eth_getBalance", (address, BlockNumberOrTag::Number(number)))
            .await
            .map_err(|e| self.failure("eth_getBalance", e))
    }

    /// An ERC-20 balance of `owner` at the end of block `number`: nothing
    /// when the token had no code yet at that block (its contract came
    /// later), which the node's `eth_getCode` must confirm.
    pub async fn token_balance_at(
        &self,
        token: Address,
        owner: Address,
        number: u64,
    ) -> Result<U256, RpcFailure> {
        let block = BlockNumberOrTag::Number(number);
        match self.token_balance_in(token, owner, block).await {
            Err(failure) if failure.kind == "bad_response" => {
                let code: Bytes = self
                    .client
                    .request("eth_getCode", (token, block))
                    .await
                    .map_err(|e| self.failure("eth_getCode", e))?;
                if code.is_empty() { Ok(U256::ZERO) } else { Err(failure) }
            }
            answer => answer,
        }
    }

    /// An ERC-20 balance of `owner` at the latest block, in the token's base units.
    pub async fn token_balance(&self, token: Address, owner: Address) -> Result<U256, RpcFailure> {
        self.token_balance_in(token, owner, BlockNumberOrTag::Latest).await
    }

    async fn token_balance_in(
        &self,
        token: Address,
        owner: Address,
        block: BlockNumberOrTag,
    ) -> Result<U256, RpcFailure> {
        let call = serde_json::json!({
            "to": token,
            "data": Bytes::from(balanceOfCall { owner }.abi_encode()),
        });
        let output: Bytes =
            self.client.request("eth_call", (call, block)).await.map_err(|e| self.failure("eth_call", e))?;
        balanceOfCall::abi_decode_returns(&output).map_err(|e| {
            RpcFailure::new(
                self.chain,
                "eth_call",
                "bad_response",
                format!("balanceOf of {token} returned {output}: {e}"),
            )
        })
    }

    /// The number of transactions `address` sent, counting the node's pending
    /// ones when `pending`: the next nonce.
    pub async fn nonce(&self, address: Address, pending: bool) -> Result<u64, RpcFailure> {
        let tag = if pending { BlockNumberOrTag::Pending } else { BlockNumberOrTag::Latest };
        let n: U64 = self
            .client
            .request("eth_getTransactionCount", (address, tag))
            .await
            .map_err(|e| self.failure("eth_getTransactionCount", e))?;
        Ok(n.to())
    }

    /// The latest block's base fee and the node's suggested priority fee, in wei.
    pub async fn fee_market(&self) -> Result<(u128, u128), RpcFailure> {
        let header: Option<FeeHeader> = self
            .client
            .request("eth_getBlockByNumber", (BlockNumberOrTag::Latest, false))
            .await
            .map_err(|e| self.failure("eth_getBlockByNumber", e))?;
        let base = header.and_then(|h| h.base_fee_per_gas).unwrap_or_default();
        let tip: U256 = self
            .client
            .request_noparams("eth_maxPriorityFeePerGas")
            .await
            .map_err(|e| self.failure("eth_maxPriorityFeePerGas", e))?;
        Ok((base.saturating_to(), tip.saturating_to()))
    }

    /// `eth_estimateGas` of a call from `from`; `Err` carries the node's reason
    /// (a revert, for instance).
    pub async fn estimate_gas(
        &self,
        from: Address,
        to: Address,
        value: U256,
        input: &Bytes,
    ) -> Result<u64, RpcFailure> {
        let call = serde_json::json!({ "from": from, "to": to, "value": value, "input": input });
        let gas: U64 = self
            .client
            .request("eth_estimateGas", (call,))
            .await
            .map_err(|e| self.failure("eth_estimateGas", e))?;
        Ok(gas.to())
    }

    /// `eth_call` at the latest block.
    pub async fn call(&self, to: Address, input: Bytes) -> Result<Bytes, RpcFailure> {
        self.call_at(to, input, BlockNumberOrTag::Latest).await
    }

    /// `eth_call` against the state at `block`: by number, a node that
    /// lacks the block errors instead of answering from an older state.
    pub async fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: BlockNumberOrTag,
    ) -> Result<Bytes, RpcFailure> {
        let call = serde_json::json!({ "to": to, "input": input });
        self.client.request("eth_call", (call, block)).await.map_err(|e| self.failure("eth_call", e))
    }

    /// Sends a signed transaction: see [`super::Broadcaster::send_raw`].
    pub async fn send_raw(&self, raw: &Bytes) -> Broadcast {
        self.broadcaster.send_raw(raw).await
    }

    /// The number of transactions `address` sent up to block `number`.
    pub async fn nonce_at(&self, address: Address, number: u64) -> Result<u64, RpcFailure> {
        let n: U64 = self
            .client
            .request("eth_getTransactionCount", (address, BlockNumberOrTag::Number(number)))
            .await
            .map_err(|e| self.failure("eth_getTransactionCount", e))?;
        Ok(n.to())
    }

    /// Logs of `contract` in blocks `from..=to` whose topics start with
    /// `topics`, in one call: for a filter narrow enough to be answered whole.
    pub async fn logs_with_topics(
        &self,
        contract: Address,
        topics: &[B256],
        from: u64,
        to: u64,
    ) -> Result<Vec<Log>, RpcFailure> {
        let mut filter = Filter::new().from_block(from).to_block(to).address(contract);
        for (i, topic) in topics.iter().enumerate() {
            filter.topics[i] = (*topic).into();
        }
        self.client.request("eth_getLogs", (filter,)).await.map_err(|e| self.failure("eth_getLogs", e))
    }

    /// The receipt of a transaction, `None` while it is not included. One
    /// that tells no outcome (neither status nor root) is missing data,
    /// never taken as the transaction's success.
    pub async fn fee_receipt(&self, hash: B256) -> Result<Option<FeeReceipt>, RpcFailure> {
        const METHOD: &str = "eth_getTransactionReceipt";
        let receipt: Option<FeeReceipt> =
            self.client.request(METHOD, (hash,)).await.map_err(|e| self.failure(METHOD, e))?;
        match receipt {
            Some(receipt) if !receipt.outcome_told() => Err(self.missing(
                METHOD,
                format!("the receipt of transaction {hash} holds neither a status nor a root"),
            )),
            receipt => Ok(receipt),
        }
    }
}
