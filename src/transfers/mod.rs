//! Outbound crypto transfers, in one place: the resource the API serves,
//! its states and the events that announce them (here); the domain types
//! the store takes and returns (`model`); the pure rules, route, limits'
//! scale and fee valuation (`rules`); acceptance of a request, whatever
//! asked (`accept`); the sender loop with its one error (`send`,
//! [`run_sender`]); and what senders write, each write in a transaction of
//! its own (`record`, `transactions`, `retries`, `fillers`, `settle`). The
//! chain families' senders are `evm::EvmSender` and `solana::SolanaSender`;
//! the SQL is in `store`.

mod accept;
pub mod expiry;
pub mod fillers;
pub mod held;
pub mod hold;
pub mod limit_policies;
pub mod lineage;
pub mod model;
pub mod record;
pub mod recover;
pub mod recovered;
pub mod resource;
pub mod retries;
pub mod rules;
mod send;
pub mod settle;
pub mod sponsor;
pub mod start_check;
pub mod transactions;

pub use crate::family::rules::{BadDestination, destination};
pub use crate::store::Refusal;
pub use accept::{AcceptError, Acceptance, Request};
pub use expiry::{expire_if_unsent, expire_unsent, fail_if_unsent, past_submit_window, submit_within_micros};
pub use model::{
    ChainGas, Created, Fee, GasUsage, LimitPolicy, Lineage, NewTransfer, Outgoing, PlatformCost,
    SentTransaction, Settlement, TxRole, TxState, fingerprint,
};
pub use resource::{
    CRYPTO_TRANSFER_FAILED, CRYPTO_TRANSFER_SUBMITTED, CRYPTO_TRANSFER_UPDATED, FailureDetails, NetworkFee,
    Route, Transfer, TransferStatus, UnknownStatus, failure,
};
pub use rules::{COMMON_DECIMALS, USD_DECIMALS, holds_address, route, scale, usd_micros};
pub use send::{SendError, after_step, listed_asset, waiting};

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    config::ChainConfig,
    store::{Store, StoreError},
};

/// A `request_id` in its one canonical form, lowercase hyphenated: every
/// textual form of one UUID (upper case, braces, no hyphens, `urn:uuid:`) is
/// the same request.
pub fn canonical_request_id(text: &str) -> Option<String> {
    uuid::Uuid::try_parse(text).ok().map(|id| id.hyphenated().to_string())
}

/// A chain family's sender: moves the chain's transfers one step on.
pub trait Sender: Send + Sync {
    fn config(&self) -> &ChainConfig;
    fn store(&self) -> &Store;
    /// What the gas sponsor holds and what it needs to send anything.
    fn sponsor_funds(&self) -> impl Future<Output = Result<sponsor::Funds, SendError>> + Send;
    /// Sends, follows and settles every transfer that is not terminal.
    fn step(&self) -> impl Future<Output = Result<usize, SendError>> + Send;
}

/// Runs `sender` until `stop`. The caller holds the chain's sender lease
/// ([`crate::lease::Leases::hold`]), cancels `stop` when it is lost, and gave
/// the sender a store [`Store::fenced`] by it: a transaction (or a nonce
/// filler) is recorded, and so broadcast, only while the lease is held. A step cut short by `stop` is as safe as a crash:
/// what it recorded is sent again by the next holder.
pub async fn run_sender(sender: impl Sender, stop: CancellationToken) {
    let chain = sender.config().chain;
    let poll = sender.config().poll_interval;
    info!(%chain, "sending transfers on this chain");
    let mut sponsor = sponsor::SponsorWatch::default();
    while !stop.is_cancelled() {
        let step = tokio::select! {
            _ = stop.cancelled() => break,
            step = sender.step() => step,
        };
        match step {
            Ok(waiting) => sponsor.check(&sender, sender.store(), waiting > 0).await,
            Err(error) => warn!(%chain, error = %error, "transfer step failed; retrying"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(poll) => {}
        }
    }
    info!(%chain, "stopped sending transfers on this chain");
}

/// Ends a transfer with `fees` valued at the chain's configured price, and
/// logs it.
pub async fn settle(
    store: &Store,
    config: &ChainConfig,
    id: &str,
    status: TransferStatus,
    transaction_hash: Option<&str>,
    failure: Option<FailureDetails>,
    fees: Vec<Fee>,
) -> Result<(), StoreError> {
    let price = config.transfers.native_usd_micros().unwrap_or_else(|| {
        warn!(chain = %config.chain, "no native_usd price; fees are valued at 0 USD");
        0
    });
    match &failure {
        Some(f) => {
            warn!(chain = %config.chain, transfer = %id, code = %f.code, message = %f.message, "transfer failed")
        }
        None => info!(chain = %config.chain, transfer = %id, status = %status, "transfer settled"),
    }
    let settlement = Settlement {
        status,
        transaction_hash: transaction_hash.map(String::from),
        failure,
        fees,
        native_symbol: config.native.symbol.clone(),
        native_decimals: config.native.decimals,
        usd_micros_per_coin: price,
    };
    settle::settle_transfer(store, id, &settlement).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_uuid_is_one_request_id() {
        let canonical = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
        for form in [
            canonical,
            "6BA7B810-9DAD-11D1-80B4-00C04FD430C8",
            "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}",
            "6ba7b8109dad11d180b400c04fd430c8",
            "urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        ] {
            assert_eq!(canonical_request_id(form).as_deref(), Some(canonical), "{form}");
        }
        assert_eq!(canonical_request_id("not-a-uuid"), None);
        assert_eq!(canonical_request_id(""), None);
    }
}
