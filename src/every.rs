//! A worker's loop: one pass, then a pause, until stopped. A pass that
//! fails is logged and tried again after the pause: a worker never stops
//! on an error its next pass may not meet.

use std::{fmt::Display, future::Future, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    config::ChainConfig,
    keys::{KeyError, KeyRef, Signer},
};

/// What a worker's passes are logged as.
pub struct Logged {
    /// Logged with the count when a pass moved something.
    pub moved: &'static str,
    /// Logged with the error when a pass failed, before the retry.
    pub failed: &'static str,
}

/// Runs `pass` every `period` until `stop`; each pass answers how many
/// things it moved on.
pub async fn every<F, Fut, E>(period: Duration, stop: &CancellationToken, logged: Logged, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<usize, E>>,
    E: Display,
{
    loop {
        // A pass runs to its end: stopping waits for it.
        match pass().await {
            Ok(0) => {}
            Ok(moved) => info!(moved, "{}", logged.moved),
            Err(error) => warn!(error = format!("{error:#}"), "{}; retrying", logged.failed),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
    }
}

/// [`every`] for a wing's pass on one chain: every poll interval of
/// `config`'s chain until `stop`, `pass` is given the address of `key` on
/// that chain (a key `signer` cannot derive fails the pass).
pub async fn every_on_chain<F, Fut, E>(
    config: &ChainConfig,
    (signer, key): (&dyn Signer, KeyRef),
    stop: &CancellationToken,
    logged: Logged,
    mut pass: F,
) where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<usize, E>>,
    E: Display + From<KeyError>,
{
    every(config.poll_interval, stop, logged, move || {
        let started = crate::family::keys::key_address(signer, config.family(), key).map(&mut pass);
        async move {
            match started {
                Ok(pass) => pass.await,
                Err(error) => Err(E::from(error)),
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A pass that fails is tried again; the loop ends when stopped, after
    /// the pass under way.
    #[tokio::test]
    async fn a_failed_pass_is_tried_again_and_stop_ends_the_loop() {
        let stop = CancellationToken::new();
        let passes = AtomicUsize::new(0);
        let logged = Logged { moved: "moved", failed: "failed" };
        let (passes_ref, stop_ref) = (&passes, &stop);
        let worker = every(Duration::from_millis(1), &stop, logged, move || async move {
            let pass = passes_ref.fetch_add(1, Ordering::SeqCst) + 1;
            match pass {
                1 => Err("the store did not answer"),
                3 => {
                    stop_ref.cancel();
                    Ok(1)
                }
                _ => Ok(0),
            }
        });
        tokio::time::timeout(Duration::from_secs(30), worker).await.expect("the loop ends once stopped");
        assert_eq!(
            passes.load(Ordering::SeqCst),
            3,
            "the pass after the failure ran, and none after the stop"
        );
    }
}
