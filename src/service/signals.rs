//! Signals: `run`, `serve` and `dev` stop cleanly on the first SIGTERM,
//! SIGINT or SIGHUP, from their first moment.

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Opens what `opening` opens, unless a signal comes first: a store that
/// does not answer holds the process no longer than that (a migration cut
/// short rolls back). `None` after a signal.
pub(super) async fn until_signal<T>(
    opening: impl Future<Output = anyhow::Result<T>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<T>> {
    tokio::select! {
        opened = opening => opened.map(Some),
        () = shutdown.cancelled() => {
            info!("stopped before the store was open");
            Ok(None)
        }
    }
}

/// A token cancelled on the first SIGTERM, SIGINT or SIGHUP. The handlers
/// are in place when it returns, so no signal from then on ends the
/// process before it has stopped cleanly.
pub fn cancel_on_signal() -> anyhow::Result<CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int, mut hup) = (
        signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
        signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?,
    );
    let shutdown = CancellationToken::new();
    let cancel = shutdown.clone();
    // SIGHUP (a closed terminal) would otherwise end the process with no
    // clean stop: `dev`'s nodes would outlive it.
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => info!("SIGTERM: shutting down"),
            _ = int.recv() => info!("SIGINT: shutting down"),
            _ = hup.recv() => info!("SIGHUP: shutting down"),
        }
        cancel.cancel();
    });
    Ok(shutdown)
}
