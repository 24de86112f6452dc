//! The issuance worker: settles the wires the bank has decided on (the
//! sandbox's delayed and returned wires; a wire whose settlement a crash
//! interrupted), moves each mint on with its transfer's settlement, and
//! completes the mints whose deposit is `CONFIRMED`.
//! Every instance may run it: a mint changes only from the status it was
//! read in, under its row lock, so two instances change it once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::store::{Store, now_micros};

/// How often the worker looks for wires to settle.
const POLL: Duration = Duration::from_millis(500);

/// Settles due wires until `shutdown`; `approval` says when a settled
/// wire's mint waits for a second operator.
pub async fn settle_due(store: Store, approval: super::Approval, shutdown: CancellationToken) {
    loop {
        match settle_once(&store, &approval).await {
            Ok(0) => {}
            Ok(moved) => info!(moved, "mints moved on"),
            Err(error) => warn!(error = format!("{error:#}"), "cannot settle wires now; retrying"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(POLL) => {}
        }
    }
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
            Err(crate::store::StoreError::Conflict(_)) => {}
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
