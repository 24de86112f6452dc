//! Sends sponsored transfers on Solana: the sponsor is the fee payer (and
//! pays the rent of a destination token account it must create); the
//! account's key, or the omnibus wallet's, signs as the owner.
//!
//! A signed transaction is persisted (with its blockhash's last valid block
//! height) before it is sent, and re-sent until that blockhash expires. Only
//! once the finalized block height has passed it with no status for any of
//! the transfer's signatures, from a node that had reached that finalized
//! slot, is it provably never going to land; then it is re-signed with a
//! fresh blockhash, or `DROPPED` when the window is over. A transfer can
//! never land twice.
//!
//! A node's refusal or silence decides nothing before that: the transfer is
//! `SUBMITTED` and its transaction sent again (a lagging node's preflight
//! answers "Blockhash not found" for a blockhash the cluster knows). Only a
//! transaction every send of which this process saw refused for a reason
//! of its own (a failed simulation), expired with no status, fails the
//! transfer with that reason.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use solana_hash::Hash;
use solana_instruction::Instruction;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_transaction::Transaction;
use tracing::{info, warn};

use super::{
    decode::TOKEN_PROGRAM,
    instructions::{ata, create_ata, mint_to_checked, transfer_checked, transfer_sol},
    rpc::{RpcFailure, SignatureStatus, SolanaBroadcast, SolanaRpc},
};
use crate::{
    config::{ChainConfig, Confirmation},
    deposits::quorum::Decision,
    keys::{KeyRef, Signer},
    store::{Store, now_micros},
    transfers::{
        FailureDetails, Fee, Lineage, Outgoing, Route, SendError, Sender, SentTransaction, TransferStatus,
        TxRole, TxState, after_step, expire_if_unsent, failure, listed_asset, past_submit_window,
        record::record, settle, submit_within_micros, transactions, waiting,
    },
};

mod quorum;
mod standing;

use standing::{Standing, standing_on};

pub struct SolanaSender {
    config: ChainConfig,
    rpc: SolanaRpc,
    store: Store,
    signer: Arc<dyn Signer>,
    /// When this process last sent each signature.
    sent: Mutex<HashMap<String, Instant>>,
    /// Why a node refused each signature it never took: a refusal decides
    /// nothing before the blockhash expires (a lagging node's preflight does
    /// not know the blockhash yet), and once it expired with no status it
    /// names the failure.
    refused: Mutex<HashMap<String, String>>,
    /// Each RPC URL on its own, when a quorum must agree.
    witnesses: quorum::Witnesses,
}

impl SolanaSender {
    pub fn new(config: ChainConfig, store: Store, signer: Arc<dyn Signer>) -> Self {
        let rpc = SolanaRpc::new(config.chain, &config.rpc_urls);
        let witnesses = quorum::Witnesses::of(&config);
        Self { config, rpc, store, signer, sent: Mutex::default(), refused: Mutex::default(), witnesses }
    }

    async fn step_once(&self) -> Result<usize, SendError> {
        let transfers = self.store.outgoing(self.config.chain).await?;
        for transfer in transfers.iter().filter(|t| !waiting(&self.config, t)) {
            let outcome = match transfer.status {
                TransferStatus::Accepted => self.submit(transfer).await,
                TransferStatus::Submitted => self.follow(transfer).await,
                _ => Ok(()),
            };
            if let Some(reason) = after_step(&self.store, &self.config, transfer, outcome).await? {
                self.fail(transfer, &reason.code, &reason.message).await?;
            }
        }
        Ok(transfers.len())
    }

    /// An `ACCEPTED` transfer: sign, persist and send its first transaction.
    async fn submit(&self, t: &Outgoing) -> Result<(), SendError> {
        if let Some(tx) = t.transactions.iter().rev().find(|x| x.state == TxState::Sent) {
            return self.send_first(t, tx).await;
        }
        if t.transactions.is_empty()
            && now_micros() - t.created_at > submit_within_micros(&self.config)
            && past_submit_window(&self.store, &self.config, t.created_at).await?
        {
            // Unless another sender recorded a transaction meanwhile.
            expire_if_unsent(&self.store, &self.config, &t.id).await?;
            return Ok(());
        }
        let window_ends_at = now_micros() + self.config.transfers.window().as_micros() as i64;
        let sent = self.sign(t).await?;
        record(&self.store, (&t.id, self.config.chain), &sent, Lineage::Start, Some(window_ends_at), None)
            .await?;
        self.send_first(t, &sent).await
    }

    /// Sends a transfer's first transaction; the transfer is `SUBMITTED`
    /// whatever the node answered: until its blockhash provably expired the
    /// transaction may land (see [`SolanaSender::follow`]), so funds stay held.
    async fn send_first(&self, t: &Outgoing, tx: &SentTransaction) -> Result<(), SendError> {
        let outcome = self.send(tx).await;
        match &outcome {
            Ok(SolanaBroadcast::Accepted) => {
                info!(chain = %self.config.chain, transfer = %t.id, signature = %tx.hash, "transfer submitted")
            }
            Ok(SolanaBroadcast::Rejected(reason)) => {
                warn!(chain = %self.config.chain, transfer = %t.id, signature = %tx.hash, reason, "node refused the transaction; held and sent again until its blockhash expires")
            }
            Err(error) => {
                warn!(chain = %self.config.chain, transfer = %t.id, signature = %tx.hash, %error, "no answer to the transaction's broadcast; held and sent again")
            }
        }
        transactions::mark_submitted(&self.store, &t.id).await?;
        outcome.map(|_| ())
    }

    /// A `SUBMITTED` transfer: settle it once a signature lands at the
    /// chain's commitment; re-send while its blockhash is valid; re-sign or
    /// drop once it provably expired.
    async fn follow(&self, t: &Outgoing) -> Result<(), SendError> {
        let group: Vec<&SentTransaction> =
            t.transactions.iter().filter(|x| x.state != TxState::Rejected).collect();
        let Some(last) = group.last().copied() else {
            return Err(SendError::Invalid("a submitted transfer without a transaction".into()));
        };
        let signatures: Vec<&str> = group.iter().map(|x| x.hash.as_str()).collect();
        match self.standing(&signatures, last.nonce).await? {
            Standing::Landed(i, status) => self.landed(t, group[i], &status).await,
            Standing::Expired => self.expired(t, last, &signatures).await,
            Standing::Unproven { finalized_slot, answered_at } => {
                info!(chain = %self.config.chain, transfer = %t.id, finalized_slot, answered_at, "blockhash expired but the statuses came from a node behind the finalized slot; asking again");
                Ok(())
            }
            Standing::Unagreed { expired } => {
                warn!(chain = %self.config.chain, transfer = %t.id, expired, quorum = self.config.confirm_quorum, "too few providers prove the blockhash expired; asking again");
                Ok(())
            }
            Standing::Live => {
                let due = self
                    .sent
                    .lock()
                    .expect("sent map")
                    .get(&last.hash)
                    .is_none_or(|at| at.elapsed() >= self.config.transfers.rebroadcast_after());
                if due && let SolanaBroadcast::Rejected(reason) = self.send(last).await? {
                    warn!(chain = %self.config.chain, signature = %last.hash, reason, "node refused a re-send");
                }
                Ok(())
            }
        }
    }

    /// Where a transfer's signatures stand, from answers that agree: the
    /// finalized slot and block height first, as one answer
    /// ([`SolanaRpc::tip`]), then the statuses. No status proves nothing by
    /// itself: a node behind the slot where a transaction landed has none,
    /// and behind one load-balanced URL (or among the configured ones) the
    /// statuses and the height can come from different nodes. So the
    /// blockhash expired only when the node that answered the statuses had
    /// reached the finalized slot whose height passed `last_valid`
    /// (`context.slot` at or past it): every block the transaction could
    /// have landed in was then before that node.
    /// Under a quorum, expiry must also be proven by enough URLs on their
    /// own (see [`SolanaSender::expired_on_quorum`]).
    async fn standing(&self, signatures: &[&str], last_valid: u64) -> Result<Standing, SendError> {
        match standing_on(&self.rpc, signatures, last_valid).await? {
            Standing::Expired => self.expired_on_quorum(signatures, last_valid).await,
            other => Ok(other),
        }
    }

    /// A transfer whose last blockhash provably expired with no status for
    /// any of its signatures: failed when every send of the last one was
    /// refused for a reason of its own, `DROPPED` once the window is over,
    /// else signed again with a fresh blockhash. The chain is asked again
    /// right before the outcome is recorded (signing takes calls and time):
    /// anything but expired again leaves the transfer to the next step.
    async fn expired(
        &self,
        t: &Outgoing,
        last: &SentTransaction,
        signatures: &[&str],
    ) -> Result<(), SendError> {
        let refusal = self.refusal(&last.hash);
        let over = t.window_ends_at.is_some_and(|end| now_micros() >= end);
        let next = if refusal.is_none() && !over { Some(self.sign(t).await?) } else { None };
        if !matches!(self.standing(signatures, last.nonce).await?, Standing::Expired) {
            return Ok(());
        }
        if let Some(reason) = refusal {
            return self.fail(t, "REJECTED_BY_NODE", &reason).await;
        }
        let Some(sent) = next else {
            info!(chain = %self.config.chain, transfer = %t.id, "window over and the last blockhash expired");
            return self.settle(t, TransferStatus::Dropped, None).await;
        };
        info!(chain = %self.config.chain, transfer = %t.id, signature = %sent.hash, "blockhash expired; signed again");
        let lineage = Lineage::After(&last.hash);
        record(&self.store, (&t.id, self.config.chain), &sent, lineage, None, None).await?;
        if let SolanaBroadcast::Rejected(reason) = self.send(&sent).await? {
            warn!(chain = %self.config.chain, signature = %sent.hash, reason, "node refused the transaction; sending it again until its blockhash expires");
        }
        Ok(())
    }

    /// A signature with a status: settled once at the chain's commitment.
    async fn landed(
        &self,
        t: &Outgoing,
        tx: &SentTransaction,
        status: &SignatureStatus,
    ) -> Result<(), SendError> {
        let finalized = status.confirmation == "finalized";
        let settled = match self.config.confirmation {
            Confirmation::Finalized => finalized,
            Confirmation::Depth(_) => status.confirmation != "processed",
        };
        // An off-ramp's collect is confirmed as deposits are, at
        // `finalized` whatever the policy: the bank pays dollars on it.
        let collect = self.store.collects_off_ramp(&t.id).await?;
        if !settled || (!finalized && collect) {
            return Ok(());
        }
        match self.status_on_quorum(&tx.hash, status, collect || finalized).await? {
            Decision::Confirm => {}
            // Landed: it waits for the providers, never expired or signed again.
            Decision::Wait => return Ok(()),
            Decision::Fail => {
                warn!(chain = %self.config.chain, transfer = %t.id, signature = %tx.hash, "a quorum of providers does not serve the transaction's status: the transfer waits");
                return Ok(());
            }
        }
        let (state, outcome, reason) = if status.failed {
            (
                TxState::Reverted,
                TransferStatus::Failed,
                Some(failure("REVERTED", "the transaction failed on chain")),
            )
        } else {
            (TxState::Mined, TransferStatus::Confirmed, None)
        };
        let fees = self.fees(&tx.hash).await?;
        let total = fees.iter().fold(alloy::primitives::U256::ZERO, |sum, f| sum + f.amount);
        transactions::update_transaction(&self.store, &tx.hash, state, Some((status.slot, "")), Some(total))
            .await?;
        settle(&self.store, &self.config, &t.id, outcome, Some(&tx.hash), reason, fees).await?;
        Ok(())
    }

    /// What the fee payer paid for a landed transaction: the fee, and rent
    /// (its balance fell by more than the fee when it created an account).
    async fn fees(&self, signature: &str) -> Result<Vec<Fee>, SendError> {
        // A node can report a status before it serves the transaction: a
        // retried failure, never a reason to fail the transfer.
        let not_served = || {
            let message = format!("{signature} has a status but is not served yet");
            SendError::Rpc(RpcFailure::new(self.config.chain, "getTransaction", "missing_data", message))
        };
        let tx = self.rpc.transaction(signature).await?.ok_or_else(not_served)?;
        let meta = tx.transaction.meta.ok_or_else(not_served)?;
        let paid = meta
            .pre_balances
            .first()
            .copied()
            .unwrap_or_default()
            .saturating_sub(meta.post_balances.first().copied().unwrap_or_default());
        let mut fees = vec![Fee {
            transaction_hash: signature.to_string(),
            kind: "NETWORK_FEE",
            amount: alloy::primitives::U256::from(meta.fee),
        }];
        if paid > meta.fee {
            fees.push(Fee {
                transaction_hash: signature.to_string(),
                kind: "RENT",
                amount: alloy::primitives::U256::from(paid - meta.fee),
            });
        }
        Ok(fees)
    }

    /// Ends a transfer none of whose signatures landed: nothing was paid.
    async fn settle(
        &self,
        t: &Outgoing,
        status: TransferStatus,
        failure: Option<FailureDetails>,
    ) -> Result<(), SendError> {
        settle(&self.store, &self.config, &t.id, status, None, failure, Vec::new()).await?;
        Ok(())
    }

    async fn fail(&self, t: &Outgoing, code: &str, message: &str) -> Result<(), SendError> {
        self.settle(t, TransferStatus::Failed, Some(failure(code, message))).await
    }

    /// The instructions moving `amount` of `t`'s asset from `owner` to
    /// `destination`: SOL, a token transfer, or the issuer's mint; with the
    /// destination's token account created first (the sponsor pays its rent)
    /// when it does not exist.
    async fn instructions(
        &self,
        t: &Outgoing,
        (owner, sponsor, destination): (&Pubkey, &Pubkey, &Pubkey),
        amount: u64,
    ) -> Result<Vec<Instruction>, SendError> {
        let mut instructions: Vec<Instruction> = Vec::new();
        if t.currency_symbol == self.config.native.symbol {
            if t.route == Route::Mint {
                return Err(SendError::Invalid("the native coin is not minted".into()));
            }
            instructions.push(transfer_sol(owner, destination, amount));
        } else {
            let asset = listed_asset(&self.config, t)?;
            let program = asset.token_program.as_deref().unwrap_or(TOKEN_PROGRAM);
            let mint = pubkey(&asset.contract_address)?;
            let target = ata(destination, &mint, program);
            if !self.rpc.account_exists(&target.to_string()).await? {
                instructions.push(create_ata(sponsor, destination, &mint, program));
            }
            if t.route == Route::Mint {
                // The issuer is the mint's authority: it signs the mint.
                instructions.push(mint_to_checked(program, &mint, &target, owner, amount, asset.decimals));
            } else {
                let source = ata(owner, &mint, program);
                instructions.push(transfer_checked(
                    program,
                    &source,
                    &mint,
                    &target,
                    owner,
                    amount,
                    asset.decimals,
                ));
            }
        }
        Ok(instructions)
    }

    /// The transfer's instructions with a fresh blockhash, signed by the
    /// sponsor (fee payer) and the owner.
    async fn sign(&self, t: &Outgoing) -> Result<SentTransaction, SendError> {
        let owner_key = match t.route {
            Route::Omnibus => KeyRef::Omnibus,
            Route::Mint => KeyRef::Issuer,
            Route::Settlement => KeyRef::Settlement,
            _ => KeyRef::Account(t.key_index.ok_or_else(|| SendError::Invalid("no account key".into()))?),
        };
        let owner = pubkey(&self.signer.solana_address(owner_key)?)?;
        if owner.to_string() != t.source_address {
            return Err(SendError::Invalid(format!(
                "the key held for {} does not sign for {}",
                t.account_id, t.source_address
            )));
        }
        let sponsor = pubkey(&self.signer.solana_address(KeyRef::Sponsor)?)?;
        let destination = pubkey(&t.destination_address)?;
        let amount = u64::try_from(t.amount).map_err(|_| SendError::Invalid("amount exceeds u64".into()))?;
        let instructions = self.instructions(t, (&owner, &sponsor, &destination), amount).await?;
        let (blockhash, last_valid) = self.rpc.latest_blockhash().await?;
        let blockhash: Hash = blockhash.parse().map_err(|_| SendError::Invalid("bad blockhash".into()))?;
        let message = Message::new_with_blockhash(&instructions, Some(&sponsor), &blockhash);
        let mut tx = Transaction::new_unsigned(message);
        let data = tx.message_data();
        let signers = tx.message.header.num_required_signatures as usize;
        let keys: Vec<Pubkey> = tx.message.account_keys[..signers].to_vec();
        for (position, key) in keys.into_iter().enumerate() {
            let which = if key == sponsor {
                KeyRef::Sponsor
            } else if key == owner {
                owner_key
            } else {
                return Err(SendError::Invalid(format!("unexpected signer {key}")));
            };
            let signature = self.signer.sign_solana(which, data.clone()).await?;
            tx.signatures[position] = signature.into();
        }
        let bytes = wincode::serialize(&tx).map_err(|e| SendError::Invalid(format!("cannot encode: {e}")))?;
        Ok(SentTransaction {
            hash: tx.signatures[0].to_string(),
            role: TxRole::Transfer,
            sender: sponsor.to_string(),
            // The blockhash's last valid block height takes the nonce's place.
            nonce: last_valid,
            gas_limit: 0,
            value: alloy::primitives::U256::ZERO,
            max_fee_per_gas: 0,
            max_priority_fee_per_gas: 0,
            raw: BASE64.encode(bytes),
            state: TxState::Sent,
            block_number: None,
            block_hash: None,
            fee: None,
            created_at: now_micros(),
        })
    }

    /// The refusal that ends a transfer whose last signature expired with no
    /// status: a node refused it every time this process sent it, for a
    /// reason in the transaction, not in the node's view of the chain.
    fn refusal(&self, signature: &str) -> Option<String> {
        let reason = self.refused.lock().expect("refused map").get(signature).cloned()?;
        let lagging = reason.contains("Blockhash not found") || reason.contains("BlockhashNotFound");
        (!lagging && !self.sent.lock().expect("sent map").contains_key(signature)).then_some(reason)
    }

    /// Sends the signed bytes. No answer is no refusal: it is retried as a
    /// failure of the chain, the transaction left as it is.
    async fn send(&self, tx: &SentTransaction) -> Result<SolanaBroadcast, SendError> {
        let mut outcome = self.rpc.send_transaction(&tx.raw).await?;
        if let SolanaBroadcast::Rejected(reason) = &outcome
            && self.rpc.signature_statuses(&[tx.hash.as_str()]).await?.values.iter().any(Option::is_some)
        {
            // Sent before (an answer lost, a crash) and already landed: its
            // blockhash may have expired since, which is no refusal.
            info!(chain = %self.config.chain, signature = %tx.hash, reason, "the chain already has this transaction");
            outcome = SolanaBroadcast::Accepted;
        }
        match &outcome {
            SolanaBroadcast::Accepted => {
                self.sent.lock().expect("sent map").insert(tx.hash.clone(), Instant::now());
            }
            SolanaBroadcast::Rejected(reason) => {
                self.refused.lock().expect("refused map").insert(tx.hash.clone(), reason.clone());
            }
        }
        Ok(outcome)
    }
}

fn pubkey(text: &str) -> Result<Pubkey, SendError> {
    text.parse().map_err(|_| SendError::Invalid(format!("{text} is not a Solana address")))
}

/// The base fee of a transaction signed by the sponsor and the owner.
const TWO_SIGNATURES_FEE: u64 = 2 * 5_000;

/// The rent-exempt minimum of an account holding no data, which a fee
/// payer must keep after paying.
const RENT_EXEMPT_EMPTY_ACCOUNT: u64 = 890_880;

impl Sender for SolanaSender {
    fn config(&self) -> &ChainConfig {
        &self.config
    }

    fn store(&self) -> &Store {
        &self.store
    }

    /// Against the base fee of one transfer (two signatures) above the
    /// rent-exempt minimum a fee payer keeps: a sponsor short of that pays
    /// for nothing. (A transfer that also opens a token account needs its
    /// rent too; such a transfer waits with its own error.)
    async fn sponsor_funds(&self) -> Result<crate::transfers::sponsor::Funds, SendError> {
        let sponsor = self.signer.solana_address(KeyRef::Sponsor)?;
        let balance = self.rpc.balance(&sponsor).await?;
        Ok(crate::transfers::sponsor::Funds {
            sponsor,
            balance: alloy::primitives::U256::from(balance),
            need: alloy::primitives::U256::from(RENT_EXEMPT_EMPTY_ACCOUNT + TWO_SIGNATURES_FEE),
            unit: "lamports",
        })
    }

    async fn step(&self) -> Result<usize, SendError> {
        self.step_once().await
    }
}
