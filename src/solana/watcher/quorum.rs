//! Confirmation on a quorum of providers (`confirm_quorum` above 1): each
//! pending deposit at or below the finalized slot is asked of every RPC
//! URL on its own (its own finalized slot, the blockhash of the deposit's
//! slot, and the deposit found again in that block by the watcher's own
//! decoder: the transaction's success and the wallet's pre- and
//! post-balances), and confirmed, failed or left waiting by
//! [`crate::deposits::quorum::verdict`].

use solana_commitment_config::CommitmentConfig;

use super::{
    super::{
        decode,
        rpc::{Cause, RpcFailure, SolanaRpc},
    },
    SolanaWatcher,
};
use crate::deposits::{
    quorum::{self, Answer, Claimed, Evidence, Quorum},
    watch::WatchSet,
    watcher::WatchError,
};

/// Each RPC URL of the chain with a client of its own.
pub(super) type Providers = quorum::Providers<SolanaRpc>;

pub(super) fn providers(config: &crate::config::ChainConfig) -> Providers {
    Providers::of(config, |url| SolanaRpc::new(config.chain, std::slice::from_ref(url)))
}

impl SolanaWatcher {
    /// Settles the pending deposits of slots up to `finalized` on the
    /// providers' agreement, in one transaction with their disputes.
    pub(super) async fn confirm_on_quorum(&self, finalized: u64) -> Result<(), WatchError> {
        let at = Quorum { chain: self.config.chain, store: &self.store, quorum: self.config.confirm_quorum };
        quorum::confirm_on_quorum(at, &self.providers, self, finalized).await
    }
}

impl Evidence<SolanaRpc> for SolanaWatcher {
    /// What the provider behind `rpc` answers about `deposits`, all of
    /// slot `slot`: each one's [`Answer`], in order.
    async fn evidence(
        &self,
        rpc: &SolanaRpc,
        slot: u64,
        deposits: &[Claimed],
    ) -> Result<Vec<Answer>, RpcFailure> {
        // Each URL vouches only for what its own ledger holds final.
        let finalized = rpc.slot(CommitmentConfig::finalized()).await?;
        if finalized < slot {
            return Ok(vec![Answer::Behind; deposits.len()]);
        }
        let block = match rpc.block(slot, CommitmentConfig::finalized()).await {
            Ok(block) => block,
            Err(failure) if failure.cause == Cause::SlotUnavailable => {
                return skipped(rpc, slot, finalized, deposits).await;
            }
            Err(failure) => return Err(failure),
        };
        let at = decode::Slot {
            chain: self.config.chain,
            slot,
            block_hash: &block.blockhash,
            block_time: block.block_time.unwrap_or_default().max(0) as u64,
        };
        // The wallets the deposits were recorded for, whether watched still or not.
        let watch = WatchSet::build(
            deposits.iter().map(|d| (d.address.clone(), d.account_id.clone())).collect(),
            |a: &str| Some(Box::<str>::from(a)),
        );
        let found: Vec<_> = block
            .transactions
            .iter()
            .flatten()
            .flat_map(|tx| decode::deposits_in_transaction(at, tx, &watch, &self.assets))
            .collect();
        let hash = block.blockhash.clone();
        Ok(deposits
            .iter()
            .map(|d| Answer::Serves { hash: hash.clone(), holds: found.iter().any(|f| d.is(f)) })
            .collect())
    }
}

/// A node without the block of `slot`: the deposits are absent there only
/// when its own ledger proves the slot skipped and it has no status for
/// their transaction (else a hole in its ledger, or a backend behind: no
/// answer, never an absence).
async fn skipped(
    rpc: &SolanaRpc,
    slot: u64,
    finalized: u64,
    deposits: &[Claimed],
) -> Result<Vec<Answer>, RpcFailure> {
    if !rpc.proves_skipped(slot, finalized).await? {
        return Ok(vec![Answer::Silent; deposits.len()]);
    }
    let signatures: Vec<&str> = deposits.iter().map(|d| d.tx_hash.as_str()).collect();
    let statuses = rpc.signature_statuses(&signatures).await?;
    let answer = |status: &Option<_>| if status.is_none() { Answer::Skipped } else { Answer::Silent };
    Ok(statuses.values.iter().map(answer).collect())
}
