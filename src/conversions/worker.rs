//! The conversions worker: opens the virtual accounts the bank has decided
//! on, walks each `ON_RAMP` conversion behind its mint, and each
//! `OFF_RAMP` behind its legs, handing its payout to the bank when due. Every instance
//! may run it: a conversion changes only from the status it was read in,
//! under its row lock, so two instances change it once.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::{
    bank::Bank,
    config::ChainConfig,
    every::{Logged, every, every_on_chain},
    keys::{KeyRef, Signer},
    store::{Store, StoreError, now_micros},
    transfers::SendError,
};

/// How often the worker looks for work.
const POLL: Duration = Duration::from_millis(500);

/// Runs [`follow_once`] with `bank` until `shutdown`.
pub async fn follow(store: Store, bank: Arc<dyn Bank>, shutdown: CancellationToken) {
    let logged = Logged { moved: "conversions moved on", failed: "cannot move conversions on now" };
    let (store, bank) = (&store, &bank);
    every(POLL, &shutdown, logged, move || follow_once(store, bank)).await
}

/// Creates, on `config`'s chain, the refund transfers of the off-ramps
/// whose payout was refused or returned, from the address of `signer`'s
/// settlement key, every poll interval of the chain until `stop` (see
/// [`super::off_ramp::refunds::start`]). The service runs it beside the
/// chain's sender, under the same lease.
pub async fn start_refunds(
    store: Store,
    config: ChainConfig,
    signer: Arc<dyn Signer>,
    stop: CancellationToken,
) {
    let logged = Logged { moved: "off-ramp refunds started", failed: "cannot start off-ramp refunds now" };
    let (store, chain) = (&store, config.chain);
    let settlement = (&*signer, KeyRef::Settlement);
    every_on_chain(&config, settlement, &stop, logged, move |settlement| async move {
        Ok::<_, SendError>(super::off_ramp::refunds::start(store, chain, &settlement).await?)
    })
    .await
}

/// One pass: the virtual accounts opened or refused and the conversion
/// status changes it made, off-ramps' payouts handed to `bank` when due.
pub async fn follow_once(store: &Store, bank: &Arc<dyn Bank>) -> Result<usize, StoreError> {
    let opened = super::virtual_account::open_due(store, now_micros()).await?;
    let mut moved = 0;
    for id in super::on_ramp::behind(store).await? {
        moved += step(&id, super::on_ramp::follow(store, &id).await)?;
    }
    for id in super::off_ramp::behind(store).await? {
        moved += step(&id, super::payout::follow(store, bank, &id).await)?;
    }
    Ok(opened + moved)
}

/// The changes one conversion's step made; a step another instance beat,
/// or one that cannot be taken now, made none.
fn step(id: &str, outcome: Result<usize, StoreError>) -> Result<usize, StoreError> {
    match outcome {
        Ok(steps) => Ok(steps),
        // Another instance moved it between the read and the write.
        Err(StoreError::Raced(_)) => Ok(0),
        Err(error @ (StoreError::NotFound(_) | StoreError::Corrupt(_))) => {
            warn!(conversion = %id, %error, "a conversion cannot follow its legs; it waits");
            Ok(0)
        }
        Err(error) => Err(error),
    }
}
