//! Following a chain: its watcher connected (again while no RPC URL
//! answers) and run with the gap scans of late-registered addresses beside
//! it. Each family's `watch` (see [`crate::family::seam::ChainFamily`]) is
//! these two steps over its own watcher.

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{
    commit,
    coverage::{self, History},
    watcher::WatchError,
};
use crate::{config::ChainConfig, store::Store};

/// Follows a chain while the gaps of late-registered addresses are scanned
/// beside it; the gap scan stops with the watcher.
pub async fn with_gaps<H: History + 'static>(
    follow: impl Future<Output = Result<(), WatchError>>,
    history: Option<H>,
    shutdown: &CancellationToken,
) -> Result<(), WatchError> {
    let stop = shutdown.child_token();
    let gaps = history.map(|history| tokio::spawn(coverage::fill_gaps(history, stop.clone())));
    let outcome = follow.await;
    stop.cancel();
    if let Some(gaps) = gaps {
        let _ = gaps.await;
    }
    outcome
}

/// Connects a watcher, retrying while no RPC URL answers; `None` on shutdown.
pub async fn connect<W, F>(
    config: ChainConfig,
    store: Store,
    shutdown: &CancellationToken,
    connect: impl Fn(ChainConfig, Store) -> F,
) -> anyhow::Result<Option<W>>
where
    F: std::future::Future<Output = Result<W, WatchError>>,
{
    let chain = config.chain;
    let mut delay = std::time::Duration::from_secs(1);
    loop {
        match connect(config.clone(), store.clone()).await {
            Ok(watcher) => return Ok(Some(watcher)),
            Err(error) if error.is_retryable() => {
                warn!(%chain, %error, retry_in_s = delay.as_secs(), "cannot start the watcher yet");
                if let Err(e) = commit::record_failure(&store, chain, error.kind(), &error.to_string()).await
                {
                    warn!(%chain, error = %e, "cannot record the watcher's health");
                }
            }
            Err(error) => {
                // Recorded for `health` (another process) before `run` stops.
                if let Err(e) = commit::record_failure(&store, chain, error.kind(), &error.to_string()).await
                {
                    warn!(%chain, error = %e, "cannot record the watcher's health");
                }
                return Err(error.into());
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(std::time::Duration::from_secs(60));
    }
}
