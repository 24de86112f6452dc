//! What became of a transfer's EIP-3009 authorization. It is public once
//! broadcast: anyone, the account holder included, can submit it before the
//! sponsor's call lands, and then the sponsor's call reverts although the
//! funds moved. Whether the funds moved is therefore read from the token
//! (`authorizationState`, the `AuthorizationUsed` log), never from the
//! sponsor's transaction alone.

use alloy::{
    primitives::{Address, B256, Bytes},
    rpc::types::BlockNumberOrTag,
    sol_types::{SolCall, SolEvent},
};

use super::{
    EvmSender,
    plan::{AuthorizationUsed, authorizationStateCall},
};
use tracing::warn;

use crate::transfers::{Outgoing, SendError, TransferStatus};

/// Whether the authorization was used, and by which transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AuthorizationUse {
    Unused,
    /// Used by the transaction `hash`, included in block `block`
    /// (`block_hash`), which decides only once it is canonical.
    UsedBy {
        hash: String,
        block: u64,
        block_hash: B256,
    },
    /// The token says it is used; the log that says by whom is not served
    /// (yet): decide nothing.
    UsedUnseen,
}

impl EvmSender {
    /// What became of `t`'s authorization, as the token says at the latest block.
    pub(super) async fn authorization_use(&self, t: &Outgoing) -> Result<AuthorizationUse, SendError> {
        let (token, owner, nonce) = self.authorization_of(t)?;
        let call = authorizationStateCall { authorizer: owner, nonce };
        let answer = self.rpc.call(token, Bytes::from(call.abi_encode())).await?;
        let used = authorizationStateCall::abi_decode_returns(&answer).map_err(|e| {
            SendError::Invalid(format!("{} has no authorizationState: {e}", t.currency_symbol))
        })?;
        if !used {
            return Ok(AuthorizationUse::Unused);
        }
        // Newest blocks first, back to the one before the authorization was
        // signed: with its first transaction, or its terms (a window before
        // its validBefore) when it has none.
        let window = self.config.transfers.window().as_micros() as i64;
        let signed_at = t
            .transactions
            .first()
            .map(|x| x.created_at)
            .or(t.window_ends_at.map(|ends| ends - window))
            .unwrap_or(0);
        let signed_at = (signed_at.max(0) / 1_000_000) as u64;
        let topics = [AuthorizationUsed::SIGNATURE_HASH, owner.into_word(), nonce];
        let range = self.config.max_block_range.max(1);
        let mut to = self.rpc.head().await?;
        loop {
            let from = to.saturating_sub(range - 1);
            let logs = self.rpc.logs_with_topics(token, &topics, from, to).await?;
            if let Some(log) = logs.iter().find(|l| !l.removed) {
                let (Some(hash), Some(block), Some(block_hash)) =
                    (log.transaction_hash, log.block_number, log.block_hash)
                else {
                    return Ok(AuthorizationUse::UsedUnseen);
                };
                return Ok(AuthorizationUse::UsedBy { hash: format!("{hash:#x}"), block, block_hash });
            }
            if from == 0 || self.rpc.block_time(from).await? < signed_at {
                return Ok(AuthorizationUse::UsedUnseen);
            }
            to = from - 1;
        }
    }

    /// Whether `t`'s authorization can never move funds: unused at a block
    /// whose timestamp reached its `validBefore` (timestamps only grow). The
    /// token is asked at that block, by number, so both answers are of one
    /// state: a backend behind, which lacks the block, errors instead of
    /// saying "unused" from before the authorization was used.
    pub(super) async fn authorization_void(&self, t: &Outgoing) -> Result<bool, SendError> {
        let Some(valid_before) = t.window_ends_at.map(|micros| (micros / 1_000_000) as u64) else {
            return Ok(false);
        };
        let head = self.rpc.head().await?;
        if self.rpc.block_time(head).await? < valid_before {
            return Ok(false);
        }
        let (token, owner, nonce) = self.authorization_of(t)?;
        let call = authorizationStateCall { authorizer: owner, nonce };
        let answer =
            self.rpc.call_at(token, Bytes::from(call.abi_encode()), BlockNumberOrTag::Number(head)).await?;
        let used = authorizationStateCall::abi_decode_returns(&answer).map_err(|e| {
            SendError::Invalid(format!("{} has no authorizationState: {e}", t.currency_symbol))
        })?;
        Ok(!used)
    }

    /// Ends `t`, an authorization transfer with no transaction of its own
    /// live, after a lasting error (`code`, `message`): its authorization
    /// may have left the process (a gas estimate, a refused broadcast), and a
    /// node that saw it can execute it until `validBefore`. Used by anyone
    /// at a final block, the transfer is `CONFIRMED` with that transaction;
    /// it fails only once the authorization can never move funds; until
    /// then the step is tried again ([`SendError::Undecided`]), funds held.
    pub(super) async fn end_unsent_authorization(
        &self,
        t: &Outgoing,
        code: &str,
        message: &str,
    ) -> Result<(), SendError> {
        match self.authorization_use(t).await? {
            AuthorizationUse::UsedBy { hash, block, block_hash } => {
                if self.confirmed_block().await?.is_some_and(|c| block <= c)
                    && self.canonical_at(block, block_hash).await?
                {
                    warn!(chain = %self.config.chain, transfer = %t.id, used_by = %hash, "the authorization was used by a transaction the sponsor did not send; it confirms the transfer");
                    return self.settle(t, TransferStatus::Confirmed, Some(&hash), None).await;
                }
                Err(SendError::Undecided(format!(
                    "{message}; the authorization was used by {hash}, not final yet"
                )))
            }
            AuthorizationUse::Unused if self.authorization_void(t).await? => {
                self.fail(t, code, message).await
            }
            _ => Err(SendError::Undecided(format!("{message}; the authorization can still execute"))),
        }
    }

    /// The token, the authorizer and the nonce of `t`'s authorization.
    fn authorization_of(&self, t: &Outgoing) -> Result<(Address, Address, B256), SendError> {
        let invalid = |what: &str| SendError::Invalid(format!("transfer {}: {what}", t.id));
        let token = self
            .config
            .assets
            .iter()
            .find(|a| a.symbol == t.currency_symbol)
            .and_then(|a| a.contract_address.parse().ok())
            .ok_or_else(|| invalid("its token is no longer listed"))?;
        let owner = t.source_address.parse().map_err(|_| invalid("bad source address"))?;
        let nonce = t
            .authorization_nonce
            .as_deref()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| invalid("no authorization nonce recorded"))?;
        Ok((token, owner, nonce))
    }
}
