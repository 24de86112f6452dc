//! Outbound crypto transfers, in one place: the resource the API serves,
//! its states and the events that announce them (here); the domain types
//! the store takes and returns (`model`); the pure rules, route, limits'
//! scale and fee valuation (`rules`); acceptance of a request, whatever
//! asked (`accept`); and the sender loop with its one error (`send`,
//! [`run_sender`]). The chain families' senders are `evm::EvmSender` and
//! `solana::SolanaSender`; the SQL is in `store`.

mod accept;
pub mod held;
pub mod hold;
pub mod model;
pub mod resource;
pub mod rules;
mod send;
pub mod sponsor;
pub mod start_check;

pub use crate::family::rules::{BadDestination, destination};
pub use crate::store::Refusal;
pub use accept::{AcceptError, Acceptance, Request};
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

use std::{future::Future, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    config::{ChainConfig, Chains},
    store::{Store, StoreError, Tx, gas_ledger, now_micros, transfer_lineage},
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
    store.settle_transfer(id, &settlement).await
}

/// Fails, until `shutdown`, every transfer of `chains` still `ACCEPTED` with
/// no transaction `submit_within_secs` after it was accepted: no instance
/// sends on its chain (none runs it, or its sender never took the
/// transfer), and its funds must not stay held. The API server runs this, so
/// whatever accepts transfers also ends those no sender takes; any number of
/// instances may run it at once ([`Store::expire_unsent`]).
pub async fn expire_unsent(store: Store, chains: Chains, shutdown: CancellationToken) {
    let shortest =
        chains.iter().map(|c| c.transfers.submit_within_secs).min().unwrap_or(Duration::from_secs(60));
    let poll = (shortest / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        for config in chains.iter() {
            if let Err(error) = expire_chain(&store, config).await {
                warn!(chain = %config.chain, error = %error, "cannot expire unsent transfers; retrying");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

async fn expire_chain(store: &Store, config: &ChainConfig) -> Result<(), StoreError> {
    // A chain without a price accepts no transfers.
    if config.transfers.native_usd_micros().is_none() {
        return Ok(());
    }
    let before = unsent_before(store, config).await?;
    for id in store.expire_unsent(config.chain, before, &unsent(config)).await? {
        warn!(chain = %config.chain, transfer = %id, "transfer failed: no sender took it in time");
    }
    Ok(())
}

/// Fails the transfer `id` if it is still `ACCEPTED` with no transaction
/// (its sender found it past `submit_within_secs`) and the time the
/// signer did not answer leaves it past still; whether it did. A
/// transaction another sender recorded meanwhile keeps it alive.
pub async fn expire_if_unsent(store: &Store, config: &ChainConfig, id: &str) -> Result<bool, StoreError> {
    let expired = store.expire_if_unsent(id, unsent_before(store, config).await?, &unsent(config)).await?;
    if expired {
        warn!(chain = %config.chain, transfer = %id, "transfer failed: not submitted in time");
    }
    Ok(expired)
}

/// Fails the transfer `id` with `settlement` inside `tx` (its holds
/// released, its event written) if it is still `ACCEPTED` with no
/// transaction recorded, judged under its row lock as a sender recording a
/// transaction judges it; whether it did.
pub async fn fail_if_unsent(tx: &mut Tx, id: &str, settlement: &Settlement) -> Result<bool, StoreError> {
    if !transfer_lineage::lock_unsent(tx, id).await? {
        return Ok(false);
    }
    gas_ledger::settle_in(tx, id, settlement).await?;
    Ok(true)
}

/// Transfers accepted before this (microseconds) are past
/// `submit_within_secs`, not counting the time the signer did not answer
/// (as recorded by every instance's senders; see [`rules::unsent_cutoff`]).
async fn unsent_before(store: &Store, config: &ChainConfig) -> Result<i64, StoreError> {
    let outages = store.signer_outages().await?;
    Ok(rules::unsent_cutoff(now_micros(), submit_within_micros(config), &outages))
}

/// Whether a transfer accepted at `created_at` is past `submit_within_secs`,
/// the time the signer did not answer not counted.
pub async fn past_submit_window(
    store: &Store,
    config: &ChainConfig,
    created_at: i64,
) -> Result<bool, StoreError> {
    Ok(created_at < unsent_before(store, config).await?)
}

/// `submit_within_secs` in microseconds.
pub fn submit_within_micros(config: &ChainConfig) -> i64 {
    i64::try_from(config.transfers.submit_within_secs.as_micros()).unwrap_or(i64::MAX)
}

/// The failure of a transfer not submitted within `submit_within_secs`.
fn unsent(config: &ChainConfig) -> Settlement {
    let message = format!(
        "not submitted within submit_within_secs ({} s): no sender on {} took the transfer",
        config.transfers.submit_within_secs.as_secs_f64(),
        config.chain
    );
    Settlement {
        status: TransferStatus::Failed,
        transaction_hash: None,
        failure: Some(failure("NOT_SUBMITTED", &message)),
        fees: Vec::new(),
        native_symbol: config.native.symbol.clone(),
        native_decimals: config.native.decimals,
        usd_micros_per_coin: config.transfers.native_usd_micros().unwrap_or_default(),
    }
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
