//! The issuance worker: settles the wires the bank has decided on (the
//! sandbox's delayed and returned wires; a wire whose settlement a crash
//! interrupted), moves each mint on with its transfer's settlement, and
//! completes the mints whose deposit is `CONFIRMED`.
//! Every instance may run it: a mint changes only from the status it was
//! read in, under its row lock, so two instances change it once.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::{
    config::ChainConfig,
    every::{Logged, every, every_on_chain},
    keys::{KeyRef, Signer},
    store::{Store, now_micros},
};

/// How often the worker looks for wires to settle.
const POLL: Duration = Duration::from_millis(500);

/// Settles due wires until `shutdown`; `approval` says when a settled
/// wire's mint waits for a second operator.
pub async fn settle_due(store: Store, approval: super::Approval, shutdown: CancellationToken) {
    let logged = Logged { moved: "mints moved on", failed: "cannot settle wires now" };
    let (store, approval) = (&store, &approval);
    every(POLL, &shutdown, logged, move || settle_once(store, approval)).await
}

/// Starts the transfers of `config`'s chain's `MINTING` mints, from the
/// address of `signer`'s issuer key, every poll interval of the chain until
/// `stop` (see [`super::onchain::start_mints`]). The service runs it beside
/// the chain's sender, under the same lease.
pub async fn start_mints(
    store: Store,
    config: ChainConfig,
    signer: Arc<dyn Signer>,
    stop: CancellationToken,
) {
    let logged = Logged { moved: "mints started", failed: "cannot start mints now" };
    let (store, config) = (&store, &config);
    let issuer = (&*signer, KeyRef::Issuer);
    every_on_chain(config, issuer, &stop, logged, move |issuer| async move {
        super::onchain::start_mints(store, config, &issuer).await
    })
    .await
}

/// One pass: the mints it moved on.
pub async fn settle_once(
    store: &Store,
    approval: &super::Approval,
) -> Result<usize, crate::store::StoreError> {
    let mut settled = 0;
    for id in store.due_mints(now_micros(), 100).await? {
        match super::wires::settle(store, &id, approval).await {
            Ok(Some(_)) => settled += 1,
            Ok(None) => {}
            // Another instance settled it between the read and the write.
            Err(crate::store::StoreError::Raced(_) | crate::store::StoreError::Refused(_)) => {}
            // One mint that cannot settle keeps the others moving.
            Err(error @ (crate::store::StoreError::NotFound(_) | crate::store::StoreError::Corrupt(_))) => {
                warn!(mint = %id, %error, "a wire cannot be settled; it waits");
            }
            Err(error) => return Err(error),
        }
    }
    settled += super::onchain::follow_mints(store).await?;
    settled += super::onchain::complete_mints(store).await?;
    Ok(settled)
}
