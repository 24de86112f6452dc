//! Waking delivery workers when events are committed. Every transaction
//! that appends events on PostgreSQL also sends `NOTIFY custody_outbox`,
//! which the server delivers at commit (never for a transaction rolled
//! back) to every process listening, so a worker of any instance claims at
//! once whatever kind of event was written. On SQLite, where one process
//! writes, the scan commit wakes its own process's workers after it
//! commits deposits' events; other events wait for the worker's poll.

use std::time::Duration;

use sqlx::{
    Any, Transaction,
    postgres::{PgConnectOptions, PgListener, PgPoolOptions},
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::redact::redact_urls;
use crate::store::{Backend, Store, StoreError};

/// The channel of the notifications, and the statement that notifies it.
const CHANNEL: &str = "custody_outbox";
const NOTIFY: &str = "NOTIFY custody_outbox";

/// Asks PostgreSQL to wake the listeners once `tx` commits (one
/// notification per transaction, however many events it appends).
pub(in crate::store) async fn on_commit(tx: &mut Transaction<'static, Any>) -> Result<(), StoreError> {
    if Backend::of(tx) == Backend::Postgres {
        sqlx::query(NOTIFY).execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// Returns once events were committed since the last call returned (at
    /// once when they were meanwhile): on PostgreSQL any event of any
    /// process while [`Store::listen_outbox`] runs, and deposits' events
    /// this process committed on either store.
    pub async fn outbox_written(&self) {
        self.outbox.notified().await
    }

    /// Wakes this process's delivery worker: a delivery is due now.
    pub fn wake_deliveries(&self) {
        self.outbox.notify_one();
    }

    /// Wakes [`Store::outbox_written`] on PostgreSQL's notifications until
    /// `shutdown`, on a connection of its own that is made again when lost
    /// (a wake-up lost meanwhile costs a worker's poll, nothing else). Returns
    /// at once on SQLite, and at `shutdown` even while connecting.
    pub async fn listen_outbox(&self, shutdown: CancellationToken) {
        if self.backend != Backend::Postgres {
            return;
        }
        let mut failing = false;
        loop {
            let error = tokio::select! {
                _ = shutdown.cancelled() => return,
                error = self.listen(&mut failing) => error,
            };
            if !std::mem::replace(&mut failing, true) {
                let error = redact_urls(&format!("{:#}", anyhow::Error::from(error)));
                warn!(%error, "cannot follow committed events; delivery polls until it can");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        }
    }

    /// Listens until the listener fails, which it reports. `failing` is
    /// cleared once it listens again.
    async fn listen(&self, failing: &mut bool) -> StoreError {
        let mut listener = match self.listener().await {
            Ok(listener) => listener,
            Err(error) => return error,
        };
        if std::mem::take(failing) {
            info!("delivery follows committed events again");
        }
        loop {
            match listener.recv().await {
                Ok(_) => self.outbox.notify_one(),
                Err(error) => return error.into(),
            }
        }
    }

    async fn listener(&self) -> Result<PgListener, StoreError> {
        let options = PgConnectOptions::try_from(&*self.pool.connect_options())?;
        let pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(options);
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(listener)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_notification_goes_to_the_channel_listened_to() {
        assert_eq!(super::NOTIFY, format!("NOTIFY {}", super::CHANNEL));
    }
}
