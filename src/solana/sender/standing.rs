//! Where a transfer's signatures stand, as one node answers: landed, live,
//! expired, or not proven either way.

use solana_commitment_config::CommitmentConfig;

use crate::solana::rpc::{RpcFailure, SignatureStatus, SolanaRpc};

/// Where `signatures` stand as the node behind `rpc` answers: see
/// [`super::SolanaSender::standing`].
pub(super) async fn standing_on(
    rpc: &SolanaRpc,
    signatures: &[&str],
    last_valid: u64,
) -> Result<Standing, RpcFailure> {
    let finalized = rpc.tip(CommitmentConfig::finalized()).await?;
    let statuses = rpc.signature_statuses(signatures).await?;
    let answered_at = statuses.slot;
    // Never more answers than signatures asked, whatever the node says.
    let values = statuses.values.into_iter().take(signatures.len());
    if let Some((i, status)) = values.enumerate().find_map(|(i, s)| Some((i, s?))) {
        return Ok(Standing::Landed(i, status));
    }
    Ok(if finalized.block_height <= last_valid {
        Standing::Live
    } else if answered_at < finalized.slot {
        Standing::Unproven { finalized_slot: finalized.slot, answered_at }
    } else {
        Standing::Expired
    })
}

/// Where a transfer's signatures stand: see [`super::SolanaSender::standing`].
pub(super) enum Standing {
    /// One of them has a status: its position in the transfer's group.
    Landed(usize, SignatureStatus),
    /// The finalized chain has not passed the last blockhash: it may land.
    Live,
    /// The finalized chain passed it, but the node that answered the
    /// statuses was behind that finalized slot: its silence proves nothing.
    Unproven { finalized_slot: u64, answered_at: u64 },
    /// The finalized chain passed every blockhash the transfer used, and a
    /// node at or past that point has no status for any of its signatures.
    Expired,
    /// Under a quorum, fewer URLs than the quorum prove it expired on their
    /// own: nothing is signed again or dropped on the others' word.
    Unagreed { expired: usize },
}
