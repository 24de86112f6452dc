//! Sends gas-sponsored transfers on one EVM chain.
//!
//! Every transaction is signed, persisted with its nonce and only then
//! broadcast, so a crash at any point is recovered by sending the same bytes
//! again: a nonce is never used for two different purposes nor skipped. One
//! instance sends on a chain at a time (a lease in the store), which makes the
//! per-sender nonce counter single-writer ([`crate::transfers::run_sender`]).
//!
//! A transfer's transfer transaction and its replacements share one nonce: a
//! replacement with a higher fee when it is not included after
//! `rebroadcast_after`, and at the window's end a zero-value self-transfer
//! (the cancellation). Whichever of them is included decides: the transfer is
//! `CONFIRMED` (or `FAILED` if it reverted), or `DROPPED` if the cancellation
//! won. It can never be both.

mod authorization;
mod broadcast;
mod estimate;
pub(super) use estimate::{MAX_TRANSACTION_GAS, about_transaction, allowance_beyond_cap};
mod gaps;
mod outcome;
mod plan;
mod pricing;
mod quorum;

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use alloy::{
    consensus::TxEip1559,
    primitives::{Address, Bytes, TxKind, U256},
    rpc::types::BlockNumberOrTag,
};
use tracing::{info, warn};

use self::{broadcast::NonceUse, plan::decode, pricing::replaces};
use super::rpc::{Broadcast, EvmRpc};
use crate::deposits::quorum::Decision;
use crate::{
    config::{ChainConfig, Confirmation},
    keys::{KeyRef, Signer},
    store::{Store, now_micros},
    transfers::{
        Lineage, Outgoing, Route, SendError, Sender, SentTransaction, TransferStatus, TxRole, TxState,
        after_step, expire_if_unsent, failure, holds_address, record::record, submit_within_micros,
        transactions, waiting,
    },
};

/// Gas of a plain value transfer, the cancellation's.
const TRANSFER_GAS: u64 = 21_000;

pub struct EvmSender {
    config: ChainConfig,
    rpc: EvmRpc,
    store: Store,
    signer: Arc<dyn Signer>,
    /// Hashes this process broadcast; any other still pending is sent again
    /// at once (it may never have left before a restart).
    broadcast: Mutex<HashSet<String>>,
    /// Hashes this process signed that every node it asked refused, with no
    /// answer before that could hide a node taking it: no node holds them,
    /// so they can never be mined (see [`EvmSender::refused`]).
    only_refused: Mutex<HashSet<String>>,
    /// Each RPC URL on its own, when a quorum settles a transfer.
    witnesses: quorum::Witnesses,
}

impl EvmSender {
    pub fn new(config: ChainConfig, store: Store, signer: Arc<dyn Signer>) -> Self {
        let rpc = EvmRpc::new(config.chain, &config.rpc_urls, 1, config.batch_size, 1);
        let witnesses = quorum::Witnesses::of(&config);
        Self {
            config,
            rpc,
            store,
            signer,
            broadcast: Mutex::default(),
            only_refused: Mutex::default(),
            witnesses,
        }
    }

    /// Moves every transfer of the chain that is not terminal one step on.
    pub async fn step_once(&self) -> Result<usize, SendError> {
        let transfers = self.store.outgoing(self.config.chain).await?;
        if transfers.is_empty() {
            return Ok(0);
        }
        let confirmed = self.confirmed_block().await?;
        if let Err(error) = self.fill_gaps(&transfers, confirmed).await {
            warn!(chain = %self.config.chain, %error, "cannot fill nonce gaps; retrying");
        }
        // A topped-up address starts its next transfer once the one before
        // is included (see [`holds_address`]).
        let mut busy: HashSet<&str> =
            transfers.iter().filter(|t| holds_address(t)).map(|t| t.source_address.as_str()).collect();
        for transfer in &transfers {
            if transfer.route == Route::TopUp
                && transfer.status == TransferStatus::Accepted
                && transfer.transactions.is_empty()
                && !busy.insert(&transfer.source_address)
            {
                continue;
            }
            if waiting(&self.config, transfer) {
                continue;
            }
            let outcome = match transfer.status {
                TransferStatus::Accepted => self.submit(transfer).await,
                TransferStatus::Submitted => self.follow(transfer, confirmed).await,
                _ => Ok(()),
            };
            if let Some(reason) = after_step(&self.store, &self.config, transfer, outcome).await? {
                self.fail(transfer, &reason.code, &reason.message).await?;
            }
        }
        Ok(transfers.len())
    }

    /// The newest block final under the chain's confirmation policy.
    async fn confirmed_block(&self) -> Result<Option<u64>, SendError> {
        Ok(match self.config.confirmation {
            Confirmation::Depth(depth) => self.rpc.head().await?.checked_sub(depth),
            Confirmation::Finalized => self.rpc.tagged(BlockNumberOrTag::Finalized).await?,
        })
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
        // Unless it waited behind its address's previous transfer meanwhile
        // (that wait does not count), or an authorization of it was handed
        // out (it may execute until its validBefore): then it goes on.
        if t.transactions.is_empty()
            && t.authorization_nonce.is_none()
            && now_micros() - t.created_at > submit_within_micros(&self.config)
            && expire_if_unsent(&self.store, &self.config, &t.id).await?
        {
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
                    None => return self.top_up_pending(t, &pending).await,
                }
            }
        }

        let call = self.plan(t).await?;
        let Some((nonce, ends)) = call.authorization else {
            return self.start(t, call).await;
        };
        // From here on the authorization can leave the process (the gas
        // estimate, the broadcast): a lasting error ends the transfer only as
        // the authorization allows.
        let t = &Outgoing {
            authorization_nonce: Some(format!("{nonce:#x}")),
            window_ends_at: Some(ends),
            ..t.clone()
        };
        match self.start(t, call).await {
            Err(error) if !error.is_retryable() => {
                let failure =
                    error.failure().unwrap_or_else(|| failure("INVALID_TRANSFER", &error.to_string()));
                self.end_unsent_authorization(t, &failure.code, &failure.message).await
            }
            outcome => outcome,
        }
    }

    /// Signs, persists and broadcasts the first transaction of `t`, an
    /// `ACCEPTED` transfer making `call`: a gas top-up if the route needs
    /// one first, the transfer transaction otherwise.
    async fn start(&self, t: &Outgoing, call: plan::Call) -> Result<(), SendError> {
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
        match self.check_funds(call.from, gas_limit, max_fee, call.value).await {
            // An issuer or a settlement wallet short of gas is funded by its
            // operator: the mint or refund waits (within the chain's
            // submit_within_secs) rather than fail.
            Err(SendError::Invalid(message)) if t.route.is_platform_own() => {
                return Err(SendError::Undecided(format!(
                    "the {} wallet cannot pay for its transaction yet: {message}",
                    if t.route == Route::Mint { "issuer" } else { "settlement" }
                )));
            }
            funds => funds?,
        }
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
        let transfer = (t.id.as_str(), self.config.chain);
        let window_ends_at = Some(window_ends_at);
        record(&self.store, transfer, &sent, Lineage::Start, window_ends_at, authorization.as_deref())
            .await?;
        self.broadcast_first(t, &sent).await
    }

    /// Sends `amount` of gas money from the sponsor to `to`.
    async fn top_up(&self, t: &Outgoing, to: Address, amount: U256) -> Result<(), SendError> {
        let sponsor = self.signer.evm_address(KeyRef::Sponsor)?;
        let (max_fee, tip) = self.fees(None, self.cap()).await?;
        self.check_funds(sponsor, TRANSFER_GAS, max_fee, amount).await?;
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
        record(&self.store, (&t.id, self.config.chain), &sent, Lineage::Start, None, None).await?;
        info!(chain = %self.config.chain, transfer = %t.id, hash = %sent.hash, %amount, "topping up gas");
        match self.send(&sent).await? {
            Broadcast::Accepted => Ok(()),
            Broadcast::Unknown(reason) => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %sent.hash, reason, "the top-up's broadcast answer decides nothing; sending it again");
                Ok(())
            }
            Broadcast::Refused(reason) => self.refused(t, &sent, &reason).await,
        }
    }

    /// Top-ups of `t` not included yet: kept moving, unless their nonce went
    /// to another transaction at a final block; then none can ever land and
    /// they are set aside, so that the next step tops up again.
    async fn top_up_pending(&self, t: &Outgoing, pending: &[&SentTransaction]) -> Result<(), SendError> {
        let last = *pending.last().expect("a non-empty group");
        if self.nonce_use(last, pending, None).await? == NonceUse::Other {
            warn!(chain = %self.config.chain, transfer = %t.id, nonce = last.nonce, "the top-up's nonce went to another transaction at a final block; topping up again");
            for tx in pending {
                transactions::reject_transaction(&self.store, self.config.chain, tx).await?;
            }
            return Ok(());
        }
        self.keep_alive(t, pending, KeyRef::Sponsor, self.cap()).await
    }

    /// A `SUBMITTED` transfer: settles it once one of its transactions is
    /// included deep enough (see [`EvmSender::decide`]), or once their nonce
    /// went to another transaction at a final block; otherwise
    /// re-broadcasts, bumps the fee, or cancels at the window's end.
    async fn follow(&self, t: &Outgoing, confirmed: Option<u64>) -> Result<(), SendError> {
        // Refused ones included: what the chain says outranks what a node said.
        let signed: Vec<&SentTransaction> =
            t.transactions.iter().filter(|x| matches!(x.role, TxRole::Transfer | TxRole::Cancel)).collect();
        let group: Vec<&SentTransaction> =
            signed.iter().copied().filter(|x| x.state != TxState::Rejected).collect();
        let Some(last) = group.last().copied() else {
            return Err(SendError::Invalid("a submitted transfer without a transaction".into()));
        };
        if let Some((tx, receipt)) = self.included(&signed).await? {
            if confirmed.is_none_or(|c| receipt.block_number.to::<u64>() > c) {
                return self.record_inclusion(tx, &receipt).await;
            }
            // Deep enough: it decides only from the canonical chain; a
            // receipt from another fork is taken as no inclusion at all.
            if self.canonical(&receipt).await? {
                match self.receipt_on_quorum(tx, &receipt).await? {
                    Decision::Confirm => {
                        self.record_inclusion(tx, &receipt).await?;
                        return self.decide(t, tx, &receipt, confirmed).await;
                    }
                    // Included: it waits for the providers, never cancelled.
                    Decision::Wait => return self.record_inclusion(tx, &receipt).await,
                    // A receipt the providers deny decides nothing, and
                    // nothing is cancelled or signed again on its word.
                    Decision::Fail => {
                        warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, "a quorum of providers does not serve the receipt: the transfer waits");
                        return Ok(());
                    }
                }
            }
            warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, block = %receipt.block_hash, "the receipt's block is not the canonical one at its number: taken as not included");
        }
        // A transaction recorded as included whose receipt is gone was reorged out.
        for tx in &group {
            if tx.state != TxState::Sent {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %tx.hash, "included transaction reorged out; sending it again");
                transactions::update_transaction(&self.store, &tx.hash, TxState::Sent, None, None).await?;
            }
        }
        if self.nonce_use(last, &signed, confirmed).await? == NonceUse::Other {
            return self.lost(t, confirmed).await;
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
            let cancel = self.self_transfer(from, last.nonce, max_fee, tip);
            info!(chain = %self.config.chain, transfer = %t.id, nonce = last.nonce, "window over; cancelling");
            return self.replace(t, key, cancel, TxRole::Cancel, &last.hash).await;
        }
        self.keep_alive(t, &group, key, self.cap()).await
    }

    /// A zero-value transfer of `from` to itself at `nonce`: what cancels a
    /// transfer at its nonce, and what fills a nonce gap.
    fn self_transfer(&self, from: Address, nonce: u64, max_fee: u128, tip: u128) -> TxEip1559 {
        TxEip1559 {
            chain_id: self.chain_id(),
            nonce,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip.min(max_fee),
            to: TxKind::Call(from),
            value: U256::ZERO,
            access_list: Default::default(),
            input: Bytes::new(),
        }
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
        // Newest first: the latest decision (a higher fee, a cancellation at
        // the window's end) is what the node should hold; an older version
        // sent after it is refused as underpriced, never included first.
        for tx in group.iter().rev() {
            let sent = self.broadcast.lock().expect("broadcast set").contains(&tx.hash);
            if !sent {
                match self.send(tx).await? {
                    Broadcast::Accepted => {}
                    Broadcast::Refused(reason) | Broadcast::Unknown(reason) => {
                        warn!(chain = %self.config.chain, hash = %tx.hash, reason, "a re-broadcast was not taken; sending it again later");
                    }
                }
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
        record(&self.store, (&t.id, self.config.chain), &sent, lineage, None, None).await?;
        match self.send(&sent).await? {
            Broadcast::Accepted => {}
            // Its predecessor lives at the nonce: refusing the replacement
            // releases nothing.
            Broadcast::Refused(reason) => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %sent.hash, reason, "node refused a replacement");
                transactions::reject_transaction(&self.store, self.config.chain, &sent).await?;
            }
            Broadcast::Unknown(reason) => {
                warn!(chain = %self.config.chain, transfer = %t.id, hash = %sent.hash, reason, "the replacement's broadcast answer decides nothing; sending it again");
            }
        }
        Ok(())
    }
}

impl Sender for EvmSender {
    fn config(&self) -> &ChainConfig {
        &self.config
    }

    fn store(&self) -> &Store {
        &self.store
    }

    /// Against a plain transaction (a top-up's 21,000 gas) at today's fee:
    /// a sponsor short of that sends nothing at all.
    async fn sponsor_funds(&self) -> Result<crate::transfers::sponsor::Funds, SendError> {
        let sponsor = self.signer.evm_address(KeyRef::Sponsor)?;
        let (max_fee, _) = self.fees(None, self.cap()).await?;
        let balance = self.rpc.balance(sponsor).await?;
        let need = U256::from(TRANSFER_GAS) * U256::from(max_fee);
        Ok(crate::transfers::sponsor::Funds {
            sponsor: sponsor.to_checksum(None),
            balance,
            need,
            unit: "wei",
        })
    }

    async fn step(&self) -> Result<usize, SendError> {
        self.step_once().await
    }
}
