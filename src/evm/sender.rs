//! Sends gas-sponsored transfers on one EVM chain.
//!
//! Every transaction is signed, persisted with its nonce and only then
//! broadcast, so a crash at any point is recovered by sending the same bytes
//! again: a nonce is never used for two different purposes nor skipped. One
//! instance sends on a chain at a time (a lease in the store), which makes the
//! per-sender nonce counter single-writer ([`crate::transfer::run_sender`]).
//!
//! A transfer's transfer transaction and its replacements share one nonce: a
//! replacement with a higher fee when it is not included after
//! `rebroadcast_after`, and at the window's end a zero-value self-transfer
//! (the cancellation). Whichever of them is included decides: the transfer is
//! `CONFIRMED` (or `FAILED` if it reverted), or `DROPPED` if the cancellation
//! won. It can never be both.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::{Decodable2718, Encodable2718},
    primitives::{Address, B256, Bytes, TxKind, U256, hex, keccak256},
    rpc::types::BlockNumberOrTag,
    sol,
    sol_types::{SolCall, SolStruct},
};
use tracing::{info, warn};

use super::rpc::{Broadcast, EvmRpc, FeeReceipt, RpcFailure, TxStatus};
use crate::{
    config::{ChainConfig, Confirmation},
    keys::{KeyError, KeyRef, Signer},
    store::{Fee, Fence, Lineage, Outgoing, SentTransaction, Store, StoreError, TxRole, TxState, now_micros},
    transfer::{FailureDetails, Route, Sender, TransferStatus, expire_if_unsent, failure, settle},
};

sol! {
    function transfer(address to, uint256 value) external returns (bool);
    function transferWithAuthorization(
        address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce,
        uint8 v, bytes32 r, bytes32 s
    ) external;
    function DOMAIN_SEPARATOR() external view returns (bytes32);

    /// EIP-3009's typed message.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// Gas of a plain value transfer, the cancellation's.
const TRANSFER_GAS: u64 = 21_000;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Rpc(#[from] RpcFailure),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("{0}")]
    Invalid(String),
}

/// One call a transfer makes, before fees and nonce.
struct Call {
    key: KeyRef,
    from: Address,
    to: Address,
    value: U256,
    input: Bytes,
    /// The EIP-3009 nonce and validBefore (microseconds) it signs, if any.
    authorization: Option<(B256, i64)>,
}

pub struct EvmSender {
    config: ChainConfig,
    rpc: EvmRpc,
    store: Store,
    signer: Arc<dyn Signer>,
    /// The chain's sender lease this sender records its transactions under.
    fence: Fence,
    /// Hashes this process broadcast; any other still pending is sent again
    /// at once (it may never have left before a restart).
    broadcast: Mutex<HashSet<String>>,
}

impl EvmSender {
    pub fn new(config: ChainConfig, store: Store, signer: Arc<dyn Signer>, fence: Fence) -> Self {
        let rpc = EvmRpc::new(config.chain, &config.rpc_urls, 1, config.batch_size, 1);
        Self { config, rpc, store, signer, fence, broadcast: Mutex::default() }
    }

    /// Moves every transfer of the chain that is not terminal one step on.
    pub async fn step_once(&self) -> Result<usize, SendError> {
        let transfers = self.store.outgoing(self.config.chain).await?;
        if transfers.is_empty() {
            return Ok(0);
        }
        let head = self.rpc.head().await?;
        let confirmed = match self.config.confirmation {
            Confirmation::Depth(depth) => head.checked_sub(depth),
            Confirmation::Finalized => self.rpc.tagged(BlockNumberOrTag::Finalized).await?,
        };
        // A topped-up account sends one transfer at a time: its gas budget
        // assumes nothing else spends from the address meanwhile.
        let mut busy: HashSet<&str> = transfers
            .iter()
            .filter(|t| {
                t.route == Route::TopUp
                    && (t.status == TransferStatus::Submitted || !t.transactions.is_empty())
            })
            .map(|t| t.source_address.as_str())
            .collect();
        for transfer in &transfers {
            if transfer.route == Route::TopUp
                && transfer.status == TransferStatus::Accepted
                && transfer.transactions.is_empty()
                && !busy.insert(&transfer.source_address)
            {
                continue;
            }
            let outcome = match transfer.status {
                TransferStatus::Accepted => self.submit(transfer).await,
                TransferStatus::Submitted => self.follow(transfer, confirmed).await,
                _ => Ok(()),
            };
            match outcome {
                Ok(()) => {}
                // The chain or the store is unavailable: try again next step.
                Err(e @ (SendError::Rpc(_) | SendError::Store(_))) => return Err(e),
                Err(SendError::Key(error)) => {
                    self.fail(transfer, "SIGNING_FAILED", &error.to_string()).await?;
                }
                Err(SendError::Invalid(message)) => self.fail(transfer, "INVALID_TRANSFER", &message).await?,
            }
        }
        Ok(transfers.len())
    }

    /// An `ACCEPTED` transfer: top up the sender if it lacks gas, then sign,
    /// persist and broadcast its transfer transaction.
    async fn submit(&self, t: &Outgoing) -> Result<(), SendError> {
        // Signed before a crash or while the node was unreachable: send it again.
        if let Some(tx) =
            t.transactions.iter().rev().find(|x| x.role == TxRole::Transfer && x.state == TxState::Sent)
        {
            return self.broadcast_first(t, tx).await;
        }
        if t.transactions.is_empty()
            && now_micros() - t.created_at > self.config.transfers.submit_within_secs as i64 * 1_000_000
        {
            // Unless another sender recorded a transaction meanwhile.
            expire_if_unsent(&self.store, &self.config, &t.id).await?;
            return Ok(());
        }
        if t.route == Route::TopUp {
            let pending: Vec<&SentTransaction> = t
                .transactions
                .iter()
                .filter(|x| x.role == TxRole::TopUp && x.state == TxState::Sent)
                .collect();
            if !pending.is_empty() {
                match self.included(&pending).await? {
                    Some((tx, receipt)) if receipt.succeeded() => self.record_inclusion(tx, &receipt).await?,
                    Some((tx, receipt)) => {
                        self.record_inclusion(tx, &receipt).await?;
                        return self.fail(t, "REVERTED", "the gas top-up reverted").await;
                    }
                    None => return self.keep_alive(t, &pending, KeyRef::Sponsor, self.cap()).await,
                }
            }
        }

        let call = self.plan(t).await?;
        let (max_fee, tip) = self.fees(None, self.cap()).await?;
        let gas_limit = self.gas_limit(&call).await?;
        if t.route == Route::TopUp {
            // Gas for the transfer and its replacements up to twice today's
            // fee, less what earlier top-ups left at the address: the
            // account's own ether never pays for gas.
            let budget = U256::from(gas_limit) * U256::from(max_fee) * U256::from(2u8);
            let left = self.store.sponsored_gas_left(self.config.chain, &t.source_address).await?;
            if left < budget {
                return self.top_up(t, call.from, budget - left).await;
            }
        }
        let max_fee = max_fee.min(self.replacement_cap(t, gas_limit).await?);
        let tx = TxEip1559 {
            chain_id: self.chain_id(),
            nonce: self.next_nonce(call.from).await?,
            gas_limit,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip.min(max_fee),
            to: TxKind::Call(call.to),
            value: call.value,
            access_list: Default::default(),
            input: call.input,
        };
        let window_ends_at = call
            .authorization
            .map(|(_, ends)| ends)
            .unwrap_or_else(|| now_micros() + self.config.transfers.window().as_micros() as i64);
        let sent = self.sign(call.key, tx, TxRole::Transfer).await?;
        let authorization = call.authorization.map(|(nonce, _)| format!("{nonce:#x}"));
        self.store
            .record_transaction(
                &t.id,
                self.config.chain,
                &sent,
                Lineage::Start,
                Some(window_ends_at),
                authorization.as_deref(),
                &self.fence,
            )
            .await?;
        self.broadcast_first(t, &sent).await
    }

    /// Sends `amount` of gas money from the sponsor to `to`.
    async fn top_up(&self, t: &Outgoing, to: Address, amount: U256) -> Result<(), SendError> {
        let sponsor = self.signer.evm_address(KeyRef::Sponsor)?;
        let (max_fee, tip) = self.fees(None, self.cap()).await?;
        let tx = TxEip1559 {
            chain_id: self.chain_id(),
            nonce: self.next_nonce(sponsor).await?,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip.min(max_fee),
            to: TxKind::Call(to),
            value: amount,
            access_list: Default::default(),
            input: Bytes::new(),
        };
        let sent = self.sign(KeyRef::Sponsor, tx, TxRole::TopUp).await?;
        self.store
            .record_transaction(&t.id, self.config.chain, &sent, Lineage::Start, None, None, &self.fence)
            .await?;
        info!(chain = %self.config.chain, transfer = %t.id, hash = %sent.hash, %amount, "topping up gas");
        match self.send(&sent).await? {
            Broadcast::Accepted => Ok(()),
            Broadcast::Rejected(reason) => {
                self.store.reject_transaction(self.config.chain, &sent).await?;
                self.rejected(t, &sent, &reason).await
            }
        }
    }

    /// Broadcasts a transfer's first transfer transaction; once a node took
    /// it the transfer is `SUBMITTED`.
    async fn broadcast_first(&self, t: &Outgoing, tx: &SentTransaction) -> Result<(), SendError> {
        match self.send(tx).await? {
            Broadcast::Accepted => {
                self.store.mark_submitted(&t.id).await?;
                info!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, nonce = tx.nonce, "transfer submitted");
                Ok(())
            }
            Broadcast::Rejected(reason) => {
                self.store.reject_transaction(self.config.chain, tx).await?;
                self.rejected(t, tx, &reason).await
            }
        }
    }

    /// After a node refused a transaction at a new nonce: a nonce conflict
    /// means someone else sent from the address, so the counter re-syncs and
    /// the transfer is tried again; any other reason fails the transfer.
    async fn rejected(&self, t: &Outgoing, tx: &SentTransaction, reason: &str) -> Result<(), SendError> {
        let lower = reason.to_ascii_lowercase();
        if lower.contains("nonce too low") || lower.contains("underpriced") || lower.contains("already used")
        {
            let from: Address = tx.sender.parse().map_err(|_| SendError::Invalid("bad sender".into()))?;
            let pending = self.rpc.nonce(from, true).await?;
            warn!(chain = %self.config.chain, sender = %tx.sender, nonce = tx.nonce, chain_nonce = pending, reason, "nonce in use; re-syncing with the chain");
            self.store.resync_nonce(self.config.chain, &tx.sender, pending).await?;
            return Ok(());
        }
        self.fail(t, "REJECTED_BY_NODE", reason).await
    }

    /// A `SUBMITTED` transfer: settles it once one of its transactions is
    /// included deep enough; otherwise re-broadcasts, bumps the fee, or
    /// cancels at the window's end.
    async fn follow(&self, t: &Outgoing, confirmed: Option<u64>) -> Result<(), SendError> {
        let group: Vec<&SentTransaction> = t
            .transactions
            .iter()
            .filter(|x| matches!(x.role, TxRole::Transfer | TxRole::Cancel) && x.state != TxState::Rejected)
            .collect();
        let Some(last) = group.last().copied() else {
            return Err(SendError::Invalid("a submitted transfer without a transaction".into()));
        };
        if let Some((tx, receipt)) = self.included(&group).await? {
            self.record_inclusion(tx, &receipt).await?;
            if confirmed.is_some_and(|c| receipt.block_number.to::<u64>() <= c) {
                let (status, reason) = match (tx.role, receipt.succeeded()) {
                    (TxRole::Cancel, _) => (TransferStatus::Dropped, None),
                    (_, true) => (TransferStatus::Confirmed, None),
                    (_, false) => {
                        (TransferStatus::Failed, Some(failure("REVERTED", "the transaction reverted")))
                    }
                };
                return self.settle(t, status, Some(&tx.hash), reason).await;
            }
            return Ok(());
        }
        // A transaction recorded as included whose receipt is gone was reorged out.
        for tx in &group {
            if tx.state != TxState::Sent {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, "included transaction reorged out; sending it again");
                self.store.update_transaction(&tx.hash, TxState::Sent, None, None).await?;
            }
        }

        let key = self.sender_key(t)?;
        let now = now_micros();
        let window_over = t.window_ends_at.is_some_and(|end| now >= end);
        let cancelling = group.iter().any(|x| x.role == TxRole::Cancel);
        if window_over && !cancelling {
            let from: Address = last.sender.parse().map_err(|_| SendError::Invalid("bad sender".into()))?;
            let cap = self.replacement_cap(t, TRANSFER_GAS).await?;
            let (max_fee, tip) = self.fees(Some(last), cap).await?;
            if !replaces(last, max_fee, tip) {
                warn!(chain = %self.config.chain, transfer = %t.id, max_fee, "window over but the fee cap leaves no room for a cancellation; waiting for inclusion");
                return self.keep_alive(t, &group, key, self.cap()).await;
            }
            let cancel = TxEip1559 {
                chain_id: self.chain_id(),
                nonce: last.nonce,
                gas_limit: TRANSFER_GAS,
                max_fee_per_gas: max_fee,
                max_priority_fee_per_gas: tip.min(max_fee),
                to: TxKind::Call(from),
                value: U256::ZERO,
                access_list: Default::default(),
                input: Bytes::new(),
            };
            info!(chain = %self.config.chain, transfer = %t.id, nonce = last.nonce, "window over; cancelling");
            return self.replace(t, key, cancel, TxRole::Cancel, &last.hash).await;
        }
        self.keep_alive(t, &group, key, self.cap()).await
    }

    /// Keeps a group of same-nonce transactions moving: sends again what this
    /// process never sent, and replaces the latest with a higher fee once it
    /// waited `rebroadcast_after`.
    async fn keep_alive(
        &self,
        t: &Outgoing,
        group: &[&SentTransaction],
        key: KeyRef,
        cap: u128,
    ) -> Result<(), SendError> {
        let last = *group.last().expect("a non-empty group");
        let waited = now_micros() - last.created_at;
        if waited >= self.config.transfers.rebroadcast_after().as_micros() as i64 {
            let mut tx = decode(&last.raw)?;
            let cap = if last.role == TxRole::TopUp {
                cap
            } else {
                cap.min(self.replacement_cap(t, tx.gas_limit).await?)
            };
            let (max_fee, tip) = self.fees(Some(last), cap).await?;
            if replaces(last, max_fee, tip) {
                tx.max_fee_per_gas = max_fee;
                tx.max_priority_fee_per_gas = tip.min(max_fee);
                info!(chain = %self.config.chain, transfer = %t.id, nonce = last.nonce, max_fee, "not included yet; raising the fee");
                return self.replace(t, key, tx, last.role, &last.hash).await;
            }
        }
        for tx in group {
            let sent = self.broadcast.lock().expect("broadcast set").contains(&tx.hash);
            if !sent && let Broadcast::Rejected(reason) = self.send(tx).await? {
                warn!(chain = %self.config.chain, hash = %tx.hash, reason, "node refused a re-broadcast");
            }
        }
        Ok(())
    }

    /// Signs, persists and broadcasts a replacement of `previous` at its nonce.
    async fn replace(
        &self,
        t: &Outgoing,
        key: KeyRef,
        tx: TxEip1559,
        role: TxRole,
        previous: &str,
    ) -> Result<(), SendError> {
        let sent = self.sign(key, tx, role).await?;
        let lineage = Lineage::After(previous);
        self.store
            .record_transaction(&t.id, self.config.chain, &sent, lineage, None, None, &self.fence)
            .await?;
        if let Broadcast::Rejected(reason) = self.send(&sent).await? {
            warn!(chain = %self.config.chain, transfer = %t.id, hash = %sent.hash, reason, "node refused a replacement");
            self.store.reject_transaction(self.config.chain, &sent).await?;
        }
        Ok(())
    }

    /// The first transaction of `group` with a receipt, and the receipt.
    async fn included<'a>(
        &self,
        group: &[&'a SentTransaction],
    ) -> Result<Option<(&'a SentTransaction, FeeReceipt)>, SendError> {
        for tx in group {
            let hash: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
            if let Some(receipt) = self.rpc.fee_receipt(hash).await? {
                return Ok(Some((tx, receipt)));
            }
        }
        Ok(None)
    }

    async fn record_inclusion(&self, tx: &SentTransaction, receipt: &FeeReceipt) -> Result<(), SendError> {
        let state = if receipt.succeeded() { TxState::Mined } else { TxState::Reverted };
        let block = format!("{:#x}", receipt.block_hash);
        let number = receipt.block_number.to::<u64>();
        if tx.state != state || tx.block_hash.as_deref() != Some(block.as_str()) {
            let fee = receipt.execution_fee() + receipt.l1_fee.unwrap_or_default();
            self.store.update_transaction(&tx.hash, state, Some((number, &block)), Some(fee)).await?;
        }
        Ok(())
    }

    /// Ends a transfer with every fee its included transactions cost.
    async fn settle(
        &self,
        t: &Outgoing,
        status: TransferStatus,
        hash: Option<&str>,
        failure: Option<FailureDetails>,
    ) -> Result<(), SendError> {
        let mut fees = Vec::new();
        for tx in self.store.transfer_transactions(&t.id).await? {
            if tx.block_number.is_none() {
                continue;
            }
            let parsed: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
            // No receipt: reorged out since, so nothing was paid for it.
            let Some(receipt) = self.rpc.fee_receipt(parsed).await? else { continue };
            fees.push(Fee {
                transaction_hash: tx.hash.clone(),
                kind: "NETWORK_FEE",
                amount: receipt.execution_fee(),
            });
            if let Some(l1) = receipt.l1_fee.filter(|f| !f.is_zero()) {
                fees.push(Fee { transaction_hash: tx.hash.clone(), kind: "L1_DATA_FEE", amount: l1 });
            }
        }
        settle(&self.store, &self.config, &t.id, status, hash, failure, fees).await?;
        Ok(())
    }

    async fn fail(&self, t: &Outgoing, code: &str, message: &str) -> Result<(), SendError> {
        self.settle(t, TransferStatus::Failed, None, Some(failure(code, message))).await
    }

    /// The call that moves the funds, signed by the right key.
    async fn plan(&self, t: &Outgoing) -> Result<Call, SendError> {
        let destination: Address =
            t.destination_address.parse().map_err(|_| SendError::Invalid("bad destination".into()))?;
        let native = t.currency_symbol == self.config.native.symbol;
        let token = if native {
            None
        } else {
            let asset =
                self.config.assets.iter().find(|a| a.symbol == t.currency_symbol).ok_or_else(|| {
                    SendError::Invalid(format!(
                        "{} is no longer listed on {}",
                        t.currency_symbol, self.config.chain
                    ))
                })?;
            Some(
                asset
                    .contract_address
                    .parse::<Address>()
                    .map_err(|_| SendError::Invalid("bad token".into()))?,
            )
        };
        let key = self.sender_key(t)?;
        let (to, value, input) = match token {
            None => (destination, t.amount, Bytes::new()),
            Some(token) => (
                token,
                U256::ZERO,
                Bytes::from(transferCall { to: destination, value: t.amount }.abi_encode()),
            ),
        };
        if t.route != Route::Authorization {
            let from = self.signer.evm_address(key)?;
            if from.to_checksum(None) != t.source_address {
                return Err(SendError::Invalid(format!(
                    "the key held for {} signs for {from}, not {}",
                    t.account_id, t.source_address
                )));
            }
            return Ok(Call { key, from, to, value, input, authorization: None });
        }
        let Some(token) = token else {
            return Err(SendError::Invalid("EIP-3009 applies to tokens only".into()));
        };
        let index = t.key_index.ok_or_else(|| SendError::Invalid("no account key".into()))?;
        let owner = self.signer.evm_address(KeyRef::Account(index))?;
        let window = self.config.transfers.window();
        let ends = now_micros() + window.as_micros() as i64;
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| SendError::Invalid(format!("no randomness: {e}")))?;
        let nonce = B256::from(nonce);
        let message = TransferWithAuthorization {
            from: owner,
            to: destination,
            value: t.amount,
            validAfter: U256::ZERO,
            validBefore: U256::from(ends / 1_000_000),
            nonce,
        };
        let separator = self.rpc.call(token, Bytes::from(DOMAIN_SEPARATORCall {}.abi_encode())).await?;
        let separator = DOMAIN_SEPARATORCall::abi_decode_returns(&separator)
            .map_err(|e| SendError::Invalid(format!("{} has no EIP-712 domain: {e}", t.currency_symbol)))?;
        let mut digest = Vec::with_capacity(66);
        digest.extend_from_slice(b"\x19\x01");
        digest.extend_from_slice(separator.as_slice());
        digest.extend_from_slice(message.eip712_hash_struct().as_slice());
        let signature = self.signer.sign_evm_hash(KeyRef::Account(index), keccak256(&digest)).await?;
        let call = transferWithAuthorizationCall {
            from: owner,
            to: destination,
            value: t.amount,
            validAfter: U256::ZERO,
            validBefore: message.validBefore,
            nonce,
            v: 27 + u8::from(signature.v()),
            r: signature.r().into(),
            s: signature.s().into(),
        };
        let sponsor = self.signer.evm_address(KeyRef::Sponsor)?;
        Ok(Call {
            key: KeyRef::Sponsor,
            from: sponsor,
            to: token,
            value: U256::ZERO,
            input: Bytes::from(call.abi_encode()),
            authorization: Some((nonce, ends)),
        })
    }

    /// The key that signs the transfer's transfer and cancellation transactions.
    fn sender_key(&self, t: &Outgoing) -> Result<KeyRef, SendError> {
        Ok(match t.route {
            Route::Omnibus => KeyRef::Omnibus,
            Route::Authorization => KeyRef::Sponsor,
            Route::TopUp | Route::FeePayer => {
                KeyRef::Account(t.key_index.ok_or_else(|| SendError::Invalid("no account key".into()))?)
            }
        })
    }

    /// The estimate with a fifth on top: token contracts' costs vary with state.
    async fn gas_limit(&self, call: &Call) -> Result<u64, SendError> {
        match self.rpc.estimate_gas(call.from, call.to, call.value, &call.input).await {
            Ok(gas) if call.input.is_empty() && gas == TRANSFER_GAS => Ok(gas),
            Ok(gas) => Ok(gas + gas / 5),
            Err(failure) if failure.kind == "rpc_error" => {
                Err(SendError::Invalid(format!("the transfer would fail: {}", failure.message)))
            }
            Err(failure) => Err(failure.into()),
        }
    }

    /// `(maxFeePerGas, maxPriorityFeePerGas)`: twice the base fee plus the
    /// node's tip, at least `fee_bump_percent` above `previous`, at most `cap`.
    async fn fees(&self, previous: Option<&SentTransaction>, cap: u128) -> Result<(u128, u128), SendError> {
        let (base, tip) = self.rpc.fee_market().await?;
        let mut max_fee = base.saturating_mul(2).saturating_add(tip);
        let mut tip = tip;
        if let Some(previous) = previous {
            let bump = |fee: u128| {
                fee.saturating_mul(100 + u128::from(self.config.transfers.fee_bump_percent)).div_ceil(100)
            };
            max_fee = max_fee.max(bump(previous.max_fee_per_gas));
            tip = tip.max(bump(previous.max_priority_fee_per_gas));
        }
        let max_fee = max_fee.min(cap);
        Ok((max_fee, tip.min(max_fee)))
    }

    fn cap(&self) -> u128 {
        u128::from(self.config.transfers.max_fee_per_gas)
    }

    /// For a topped-up account, the highest fee the sponsor's money left at
    /// its address pays for `gas`; otherwise the configured cap.
    async fn replacement_cap(&self, t: &Outgoing, gas: u64) -> Result<u128, SendError> {
        if t.route != Route::TopUp {
            return Ok(self.cap());
        }
        let left = self.store.sponsored_gas_left(self.config.chain, &t.source_address).await?;
        Ok(self.cap().min((left / U256::from(gas.max(1))).saturating_to()))
    }

    /// The sender's next nonce: the store's counter, moved up to the chain's
    /// pending count if someone else sent from the address.
    async fn next_nonce(&self, sender: Address) -> Result<u64, SendError> {
        let address = sender.to_checksum(None);
        let chain_next = self.rpc.nonce(sender, true).await?;
        match self.store.stored_nonce(self.config.chain, &address).await? {
            Some(stored) if stored >= chain_next => Ok(stored),
            Some(stored) => {
                warn!(chain = %self.config.chain, sender = %address, stored, chain_next, "nonce drift: the address sent elsewhere; re-syncing");
                self.store.resync_nonce(self.config.chain, &address, chain_next).await?;
                Ok(chain_next)
            }
            None => Ok(chain_next),
        }
    }

    fn chain_id(&self) -> u64 {
        self.config.chain_id.unwrap_or_default()
    }

    async fn sign(&self, key: KeyRef, tx: TxEip1559, role: TxRole) -> Result<SentTransaction, SendError> {
        let sender = self.signer.evm_address(key)?;
        let signature = self.signer.sign_evm_hash(key, tx.signature_hash()).await?;
        let (nonce, gas_limit, value) = (tx.nonce, tx.gas_limit, tx.value);
        let (max_fee, tip) = (tx.max_fee_per_gas, tx.max_priority_fee_per_gas);
        let envelope = TxEnvelope::from(tx.into_signed(signature));
        Ok(SentTransaction {
            hash: format!("{:#x}", envelope.tx_hash()),
            role,
            sender: sender.to_checksum(None),
            nonce,
            gas_limit,
            value,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip,
            raw: hex::encode_prefixed(envelope.encoded_2718()),
            state: TxState::Sent,
            block_number: None,
            block_hash: None,
            fee: None,
            created_at: now_micros(),
        })
    }

    async fn send(&self, tx: &SentTransaction) -> Result<Broadcast, SendError> {
        let raw =
            hex::decode(&tx.raw).map_err(|_| SendError::Invalid("stored transaction is not hex".into()))?;
        let mut outcome = self.rpc.send_raw(&Bytes::from(raw)).await?;
        if let Broadcast::Rejected(reason) = &outcome {
            // Sent before (an answer lost, a crash) and already pending or
            // mined: "nonce too low" then means ours was taken, not refused,
            // and must never lead to signing the transfer again.
            let hash: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
            let known = self.rpc.transaction_status(&[hash]).await?;
            if known.get(&hash).is_some_and(|s| *s != TxStatus::Unknown) {
                info!(chain = %self.config.chain, hash = %tx.hash, reason, "the node already has this transaction");
                outcome = Broadcast::Accepted;
            }
        }
        if matches!(outcome, Broadcast::Accepted) {
            self.broadcast.lock().expect("broadcast set").insert(tx.hash.clone());
        }
        Ok(outcome)
    }
}

impl Sender for EvmSender {
    fn config(&self) -> &ChainConfig {
        &self.config
    }

    async fn step(&self) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.step_once().await?)
    }
}

/// Whether fees this high replace `previous` in a node's pool: nodes want
/// both at least a tenth above the pending transaction's.
fn replaces(previous: &SentTransaction, max_fee: u128, tip: u128) -> bool {
    let enough = |new: u128, old: u128| new.saturating_mul(10) >= old.saturating_mul(11) && new > old;
    enough(max_fee, previous.max_fee_per_gas) && enough(tip.min(max_fee), previous.max_priority_fee_per_gas)
}

/// The unsigned EIP-1559 transaction inside stored signed bytes.
fn decode(raw: &str) -> Result<TxEip1559, SendError> {
    let bytes = hex::decode(raw).map_err(|_| SendError::Invalid("stored transaction is not hex".into()))?;
    match TxEnvelope::decode_2718(&mut bytes.as_slice()) {
        Ok(TxEnvelope::Eip1559(signed)) => Ok(signed.strip_signature()),
        _ => Err(SendError::Invalid("stored transaction is not EIP-1559".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(max_fee: u128, tip: u128) -> SentTransaction {
        SentTransaction {
            hash: String::new(),
            role: TxRole::Transfer,
            sender: String::new(),
            nonce: 0,
            gas_limit: TRANSFER_GAS,
            value: U256::ZERO,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip,
            raw: String::new(),
            state: TxState::Sent,
            block_number: None,
            block_hash: None,
            fee: None,
            created_at: 0,
        }
    }

    #[test]
    fn a_replacement_must_raise_both_fees_by_a_tenth() {
        let previous = sent(100, 10);
        assert!(replaces(&previous, 110, 11));
        assert!(!replaces(&previous, 109, 11), "max fee short of +10%");
        assert!(!replaces(&previous, 200, 10), "tip unchanged");
        assert!(!replaces(&previous, 100, 100), "capped at the previous fee");
        // The tip counts only up to the max fee.
        assert!(replaces(&sent(10, 10), 11, 50));
        assert!(!replaces(&sent(100, 100), 120, 105));
    }
}
