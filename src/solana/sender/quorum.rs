//! A transfer's settlement on a quorum of providers (`confirm_quorum`
//! above 1): the status the sender would settle on must be served alike by
//! that many RPC URLs, each asked on its own for its own status of the
//! signature (the same slot, the same success) and the blockhash of that
//! slot, at the chain's commitment. Until they agree the transfer keeps
//! its state, and the wait counts toward no window, expiry or re-signing:
//! a signature with a status is never expired.

use futures::future::join_all;
use solana_commitment_config::CommitmentConfig;
use tracing::{error, warn};

use super::{SolanaSender, Standing};
use crate::{
    config::{ChainConfig, Confirmation},
    deposits::quorum::{Answer, Decision, reference_hash, verdict},
    solana::rpc::{Cause, RpcFailure, SignatureStatus, SolanaRpc},
    transfers::SendError,
};

/// Each RPC URL on its own, the URL as logs show it; none when one URL's
/// word settles a transfer.
pub(super) struct Witnesses(Vec<(String, SolanaRpc)>);

impl Witnesses {
    pub(super) fn of(config: &ChainConfig) -> Self {
        if config.confirm_quorum <= 1 {
            return Witnesses(Vec::new());
        }
        let one = |url| SolanaRpc::new(config.chain, std::slice::from_ref(url));
        Witnesses(config.rpc_urls.iter().map(|url| (url.to_string(), one(url))).collect())
    }
}

impl SolanaSender {
    /// Whether a quorum of providers serves `status` of `signature` as the
    /// sender read it, each at `finalized` when `final_only` (the chain's
    /// policy, or an off-ramp's collect) else at `confirmed`: `Confirm` (or
    /// one URL's word is enough), `Wait` (too few answered, or they serve
    /// different blocks there), or `Fail` (too many serve that slot
    /// without it).
    pub(super) async fn status_on_quorum(
        &self,
        signature: &str,
        status: &SignatureStatus,
        final_only: bool,
    ) -> Result<Decision, SendError> {
        if self.witnesses.0.is_empty() {
            return Ok(Decision::Confirm);
        }
        let commitment = match final_only || self.config.confirmation == Confirmation::Finalized {
            true => CommitmentConfig::finalized(),
            false => CommitmentConfig::confirmed(),
        };
        let chain = self.config.chain;
        let asked = self.witnesses.0.iter().map(|(url, rpc)| async move {
            let answer = witness(rpc, commitment, signature, status).await.unwrap_or_else(|failure| {
                warn!(%chain, url, %failure, "quorum: the provider did not answer about a transaction");
                Answer::Silent
            });
            (url.clone(), answer)
        });
        let answers = join_all(asked).await;
        let only: Vec<Answer> = answers.iter().map(|(_, a)| a.clone()).collect();
        let judged_by = reference_hash("", &only);
        let judged = verdict(&judged_by, &only, self.config.confirm_quorum);
        if judged.disputed {
            metrics::counter!("custody_indexer_provider_disputes_total", "chain" => chain.as_str())
                .increment(1);
            let said: Vec<String> =
                answers.iter().map(|(u, a)| format!("{u}: {}", a.describe(&judged_by))).collect();
            error!(%chain, signature, slot = status.slot, ?said, "providers disagree about a transfer's transaction");
        }
        Ok(judged.decision)
    }
}

impl SolanaSender {
    /// Whether enough URLs prove, each on its own, that the transfer's
    /// last blockhash expired with no status for any of its signatures:
    /// `Expired` when `confirm_quorum` of them do (or one URL's word is
    /// enough) and no URL claims a status a quorum does not refute;
    /// `Landed` with such a claim (settled only on a quorum in turn); else
    /// `Unagreed`. A URL answering first cannot get a transaction that
    /// landed signed again or dropped, and one claiming a status the others
    /// serve no block for cannot hold back an expiry.
    pub(super) async fn expired_on_quorum(
        &self,
        signatures: &[&str],
        last_valid: u64,
    ) -> Result<Standing, SendError> {
        if self.witnesses.0.is_empty() {
            return Ok(Standing::Expired);
        }
        let asked =
            self.witnesses.0.iter().map(|(url, rpc)| async move {
                (url, super::standing_on(rpc, signatures, last_valid).await)
            });
        let (mut expired, mut claims) = (0, Vec::new());
        for (url, standing) in join_all(asked).await {
            match standing {
                Ok(Standing::Expired) => expired += 1,
                Ok(Standing::Landed(i, status)) => claims.push((url, i, status)),
                Ok(_) => {}
                Err(failure) => {
                    warn!(chain = %self.config.chain, url, %failure, "quorum: the provider did not answer about an expiry")
                }
            }
        }
        for (url, i, status) in claims {
            // A claim a quorum refutes (too many URLs serve its slot
            // without it) holds nothing back; any other waits for them.
            let Some(signature) = signatures.get(i) else { continue };
            match self.status_on_quorum(signature, &status, true).await? {
                Decision::Fail => {
                    warn!(chain = %self.config.chain, url, signature, slot = status.slot, "a provider claims a status a quorum refutes")
                }
                _ => return Ok(Standing::Landed(i, status)),
            }
        }
        Ok(if expired >= self.config.confirm_quorum {
            Standing::Expired
        } else {
            Standing::Unagreed { expired }
        })
    }
}

/// What the provider behind `rpc` serves of `signature`: held when its own
/// status names `status`'s slot and outcome; the blockhash of that slot;
/// `Behind` until that slot reached `commitment` there.
async fn witness(
    rpc: &SolanaRpc,
    commitment: CommitmentConfig,
    signature: &str,
    status: &SignatureStatus,
) -> Result<Answer, RpcFailure> {
    if rpc.slot(commitment).await? < status.slot {
        return Ok(Answer::Behind);
    }
    let own = rpc.signature_statuses(&[signature]).await?.values.into_iter().next().flatten();
    let hash = match rpc.block_hash(status.slot, commitment).await {
        Ok(hash) => hash,
        // Absent only where its own finalized ledger proves the slot
        // skipped and it has no status; else a hole, or a backend behind.
        Err(failure) if failure.cause == Cause::SlotUnavailable => {
            let finalized = rpc.slot(CommitmentConfig::finalized()).await?;
            let proven = finalized >= status.slot && rpc.proves_skipped(status.slot, finalized).await?;
            return Ok(if proven && own.is_none() { Answer::Skipped } else { Answer::Silent });
        }
        Err(failure) => return Err(failure),
    };
    let holds = own.is_some_and(|own| own.slot == status.slot && own.failed == status.failed);
    Ok(Answer::Serves { hash, holds })
}
