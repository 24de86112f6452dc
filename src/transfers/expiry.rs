//! The end of transfers no sender took: each still `ACCEPTED` with no
//! transaction `submit_within_secs` after it was accepted (the time the
//! signer did not answer not counted) fails `NOT_SUBMITTED`, its hold
//! released, judged under its row lock as a sender recording a transaction
//! judges it; any number of instances may run it at once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{Settlement, TransferStatus, failure, rules};
use crate::{
    chain::Chain,
    config::{ChainConfig, Chains},
    store::{Store, StoreError, Tx, gas_ledger, now_micros, transfer_lineage as rows},
};

/// Transfers expired in one pass at most; the next pass takes the rest.
const EXPIRY_BATCH: i64 = 100;

/// Fails, until `shutdown`, every transfer of `chains` still `ACCEPTED` with
/// no transaction `submit_within_secs` after it was accepted: no instance
/// sends on its chain (none runs it, or its sender never took the
/// transfer), and its funds must not stay held. The API server runs this, so
/// whatever accepts transfers also ends those no sender takes; any number of
/// instances may run it at once ([`expire_before`]).
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
    for id in expire_before(store, config.chain, before, &unsent(config)).await? {
        warn!(chain = %config.chain, transfer = %id, "transfer failed: no sender took it in time");
    }
    Ok(())
}

/// Fails the transfer `id` if it is still `ACCEPTED` with no transaction
/// (its sender found it past `submit_within_secs`) and the time the
/// signer did not answer leaves it past still; whether it did. A
/// transaction another sender recorded meanwhile keeps it alive.
pub async fn expire_if_unsent(store: &Store, config: &ChainConfig, id: &str) -> Result<bool, StoreError> {
    let expired = expire_one(store, id, unsent_before(store, config).await?, &unsent(config)).await?;
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
    if !rows::lock_unsent(tx, id).await? {
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

/// Ends with `settlement` (a failure, no fees) every transfer of `chain`
/// still `ACCEPTED` with no transaction recorded (nor an authorization
/// handed out, see [`super::record::reserve_authorization`]) that was
/// created before `created_before` (microseconds): no sender took it in
/// time, and its hold is released. Each in its own transaction with its
/// event, after locking its row and reading its transactions again, so a
/// sender that recorded one meanwhile keeps it, and instances running this
/// at once expire each transfer once. Returns the ids it expired.
pub async fn expire_before(
    store: &Store,
    chain: Chain,
    created_before: i64,
    settlement: &Settlement,
) -> Result<Vec<String>, StoreError> {
    let mut expired = Vec::new();
    for id in rows::unsent(store, chain, created_before, EXPIRY_BATCH).await? {
        if expire_one(store, &id, created_before, settlement).await? {
            expired.push(id);
        }
    }
    Ok(expired)
}

/// Ends one transfer with `settlement` if it is still `ACCEPTED` with no
/// transaction recorded, judged under its row lock, and does not wait in
/// its topped-up address's queue (an earlier `TOP_UP` transfer of the
/// address in flight, or ended at or after `created_before`: the queue's
/// wait does not count against it); whether it did.
pub async fn expire_one(
    store: &Store,
    id: &str,
    created_before: i64,
    settlement: &Settlement,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    if !rows::lock_unsent(&mut tx, id).await? || rows::queued(&mut tx, id, created_before).await? {
        return Ok(false);
    }
    gas_ledger::settle_in(&mut tx, id, settlement).await?;
    tx.commit().await?;
    Ok(true)
}
