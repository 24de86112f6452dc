//! A transfer's settlement on a quorum of providers (`confirm_quorum`
//! above 1): the receipt the sender would decide on must be served alike
//! by that many RPC URLs, each asked on its own for the block at the
//! receipt's height and its own receipt of the transaction. Until they
//! agree the transfer keeps its state, and the wait counts toward no
//! window, expiry or cancellation.

use alloy::{primitives::B256, rpc::types::BlockNumberOrTag};
use futures::future::join_all;
use tracing::{error, warn};

use super::EvmSender;
use crate::{
    config::{ChainConfig, Confirmation},
    deposits::quorum::{Answer, Decision, verdict},
    evm::rpc::{EvmRpc, FeeReceipt, RpcFailure},
    transfers::{SendError, SentTransaction},
};

/// Each RPC URL on its own, the URL as logs show it; none when one URL's
/// word settles a transfer.
pub(super) struct Witnesses(Vec<(String, EvmRpc)>);

impl Witnesses {
    pub(super) fn of(config: &ChainConfig) -> Self {
        if config.confirm_quorum <= 1 {
            return Witnesses(Vec::new());
        }
        Witnesses(
            config.rpc_urls.iter().map(|url| (url.to_string(), EvmRpc::single(config.chain, url))).collect(),
        )
    }
}

impl EvmSender {
    /// Whether a quorum of providers serves `receipt` of `tx` as the
    /// sender read it: `Confirm` (or one URL's word is enough), `Wait`
    /// (too few answered), or `Fail` (too many serve that height without
    /// it: the receipt is not the chain's).
    pub(super) async fn receipt_on_quorum(
        &self,
        tx: &SentTransaction,
        receipt: &FeeReceipt,
    ) -> Result<Decision, SendError> {
        if self.witnesses.0.is_empty() {
            return Ok(Decision::Confirm);
        }
        let hash: B256 = tx.hash.parse().map_err(|_| SendError::Invalid("bad hash".into()))?;
        let asked = self.witnesses.0.iter().map(|(url, rpc)| async move {
            let answer = witness(rpc, self.config.confirmation, hash, receipt).await.unwrap_or_else(|failure| {
                warn!(chain = %self.config.chain, url, %failure, "quorum: the provider did not answer about a receipt");
                Answer::Silent
            });
            (url.clone(), answer)
        });
        let answers = join_all(asked).await;
        let recorded = format!("{:#x}", receipt.block_hash);
        let only: Vec<Answer> = answers.iter().map(|(_, a)| a.clone()).collect();
        let judged = verdict(&recorded, &only, self.config.confirm_quorum);
        if judged.disputed {
            let chain = self.config.chain;
            metrics::counter!("custody_indexer_provider_disputes_total", "chain" => chain.as_str())
                .increment(1);
            let said: Vec<String> =
                answers.iter().map(|(u, a)| format!("{u}: {}", a.describe(&recorded))).collect();
            error!(%chain, transaction = %tx.hash, block = %recorded, ?said, "providers disagree about a transfer's receipt");
        }
        Ok(judged.decision)
    }
}

/// What the provider behind `rpc` serves of the transaction `hash`, held
/// when its block at `receipt`'s height and its receipt are `receipt`'s;
/// `Behind` until that height is final by its own chain.
async fn witness(
    rpc: &EvmRpc,
    confirmation: Confirmation,
    hash: B256,
    receipt: &FeeReceipt,
) -> Result<Answer, RpcFailure> {
    let number = receipt.block_number.to::<u64>();
    let vouched = match confirmation {
        Confirmation::Depth(depth) => rpc.head().await?.checked_sub(depth),
        Confirmation::Finalized => rpc.tagged(BlockNumberOrTag::Finalized).await?,
    };
    if vouched.is_none_or(|height| height < number) {
        return Ok(Answer::Behind);
    }
    let Some(header) = rpc.headers(&[number]).await?.into_iter().next() else { return Ok(Answer::Behind) };
    let own = rpc.fee_receipt(hash).await?;
    let holds =
        own.is_some_and(|own| own.block_hash == receipt.block_hash && own.succeeded() == receipt.succeeded());
    Ok(Answer::Serves { hash: format!("{:#x}", header.hash), holds })
}
