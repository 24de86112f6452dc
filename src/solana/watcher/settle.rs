//! Settling pending deposits: `CONFIRMED` once their slot is finalized,
//! `FAILED` only once the cluster provably skipped it.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt, stream};
use solana_commitment_config::CommitmentConfig;
use tracing::{debug, warn};

use super::{
    super::finality::{self, Verdict},
    SolanaWatcher,
};
use crate::deposits::{commit, watcher::WatchError};

/// `getSignatureStatuses` takes at most this many signatures per call.
const STATUSES_PER_CALL: usize = 256;

impl SolanaWatcher {
    /// Pending deposits at or below the finalized slot become `CONFIRMED` when
    /// an answer lists their slot among finalized blocks, `FAILED` only when
    /// the cluster provably skipped it (see [`super::super::finality`]) and
    /// no node says the transaction landed; otherwise they stay `PENDING` and
    /// are asked about again next step. The slots are read in small ranges
    /// around the pending ones, none wider than `getBlocks` accepts, however
    /// old the deposits are.
    pub(super) async fn settle(&self, finalized: u64) -> Result<(), WatchError> {
        let chain = self.config.chain;
        let pending = self.store.pending_through(chain, finalized).await?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut slots: Vec<u64> = pending.iter().map(|(_, slot, _)| *slot).collect();
        slots.sort_unstable();
        slots.dedup();
        let verdicts = self.verdicts(&slots, finalized).await?;
        let with = |wanted: Verdict| -> Vec<(String, String)> {
            let judged = pending.iter().filter(|(_, slot, _)| verdicts.get(slot) == Some(&wanted));
            judged.map(|(id, _, hash)| (id.clone(), hash.clone())).collect()
        };
        let confirmed: Vec<String> = with(Verdict::Final).into_iter().map(|(id, _)| id).collect();
        let failed = self.without_status(with(Verdict::Skipped)).await?;
        let changed = commit::settle(&self.store, &confirmed, &failed).await?;
        if !failed.is_empty() {
            warn!(%chain, failed = failed.len(), "deposits in slots the cluster skipped are FAILED");
        }
        let waiting = pending.len() - confirmed.len() - failed.len();
        debug!(%chain, finalized, changed = changed.len(), waiting, "settled");
        Ok(())
    }

    /// What the `getBlocks` answers around `slots` prove of each.
    async fn verdicts(&self, slots: &[u64], finalized: u64) -> Result<HashMap<u64, Verdict>, WatchError> {
        let reads: Vec<_> = finality::windows(slots, finalized)
            .into_iter()
            .map(|(start, end)| async move {
                self.rpc.blocks(start, end, CommitmentConfig::finalized()).await.map(|b| (start, end, b))
            })
            .collect();
        let answers: Vec<(u64, u64, Vec<u64>)> =
            stream::iter(reads).buffered(self.config.concurrency).try_collect().await?;
        let mut verdicts: HashMap<u64, Verdict> = HashMap::new();
        for (start, end, listed) in &answers {
            for slot in slots.iter().filter(|s| (*start..=*end).contains(*s)) {
                let verdict = finality::verdict(*slot, listed);
                let known = verdicts.entry(*slot).or_insert(Verdict::Unknown);
                if *known != Verdict::Final && verdict != Verdict::Unknown {
                    *known = verdict;
                }
            }
        }
        Ok(verdicts)
    }

    /// Of deposits `(id, signature)` whose slot an answer showed skipped,
    /// those whose transaction no node says landed. A node with a hole in
    /// its ledger (restored from a snapshot, a gap in its blockstore) lists
    /// blocks on both sides of a slot it lacks, which reads as a skip; the
    /// signature's status, searched in the transaction history, tells such
    /// a hole from a skip. A deposit whose transaction has a status stays
    /// `PENDING`: the next answer may list its slot.
    async fn without_status(&self, skipped: Vec<(String, String)>) -> Result<Vec<String>, WatchError> {
        let mut failed = Vec::with_capacity(skipped.len());
        for chunk in skipped.chunks(STATUSES_PER_CALL) {
            let signatures: Vec<&str> = chunk.iter().map(|(_, hash)| hash.as_str()).collect();
            let statuses = self.rpc.signature_statuses(&signatures).await?;
            for ((id, hash), status) in chunk.iter().zip(statuses.values) {
                match status {
                    None => failed.push(id.clone()),
                    Some(status) => {
                        warn!(chain = %self.config.chain, deposit = %id, signature = %hash, landed_at = status.slot, "a slot read as skipped holds a transaction that landed; keeping the deposit PENDING");
                    }
                }
            }
        }
        Ok(failed)
    }
}
