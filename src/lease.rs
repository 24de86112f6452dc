//! Singleton workers shared by instances. A chain's live watcher and its
//! transfer sender each run on one instance at a time: the one holding the
//! `(kind, chain)` lease in the store ([`crate::store::Fence`]). The holder
//! renews it in the background every third of its time to live; every write
//! the worker makes checks it in the write's own transaction. When a renewal
//! finds the lease taken over (or cannot renew before it lapses), the worker
//! is stopped; an instance that dies leaves its workers to whichever
//! instance takes the lapsed lease first, within the time to live plus a
//! third of it.

use std::{future::Future, time::Duration};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    chain::Chain,
    store::{Fence, Store, WorkerKind},
};

/// How long a lease lasts without renewal by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// This process's leases.
#[derive(Debug, Clone)]
pub struct Leases {
    store: Store,
    owner: String,
    ttl: Duration,
    /// The process knows it is the store's only instance (SQLite's lock):
    /// a lease still live in the store belongs to a process that died, and
    /// is taken at once.
    sole: bool,
}

impl Leases {
    pub fn new(store: Store, ttl: Duration, sole: bool) -> Self {
        Self { store, owner: instance_id(), ttl, sole }
    }

    /// The instance name leases record: host, process id and a random tag.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs `work` whenever this instance holds the `(kind, chain)` lease,
    /// until `shutdown`. `work` gets the holding's fence and a token that is
    /// cancelled when the lease is lost or at shutdown; it must stop then.
    /// Each takeover runs `work` afresh under a new epoch. An error from
    /// `work` gives the lease up and is returned.
    pub async fn hold<E, F, Fut>(
        &self,
        kind: WorkerKind,
        chain: Chain,
        shutdown: &CancellationToken,
        mut work: F,
    ) -> Result<(), E>
    where
        F: FnMut(Fence, CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let ttl = micros(self.ttl);
        let mut waiting_logged = false;
        while !shutdown.is_cancelled() {
            // The database's expiry counts from the take; ours from before it.
            let asked = Instant::now();
            match self.store.take_lease(kind, chain, &self.owner, ttl, self.sole).await {
                Ok(Some(fence)) => {
                    info!(%chain, %kind, epoch = fence.epoch, instance = %self.owner, "took the lease: running here");
                    let stop = shutdown.child_token();
                    let renewal =
                        renew(self.store.clone(), fence.clone(), asked + self.ttl, self.ttl, stop.clone());
                    let renewal = tokio::spawn(renewal);
                    let outcome = work(fence.clone(), stop.clone()).await;
                    stop.cancel();
                    // Unless another instance took it over, give it up: a
                    // renewal cut off at the lease's end may still have
                    // extended it, and nobody should wait for that to lapse.
                    let taken_over = renewal.await.unwrap_or(false);
                    if !taken_over {
                        self.release(&fence).await;
                    }
                    outcome?;
                    waiting_logged = false;
                }
                Ok(None) if !waiting_logged => {
                    info!(%chain, %kind, "another instance holds the lease; standing by");
                    waiting_logged = true;
                }
                Ok(None) => {}
                Err(error) => warn!(%chain, %kind, %error, "cannot take the lease"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.ttl / 3) => {}
            }
        }
        Ok(())
    }

    /// Gives `fence` up, waiting no longer than a lease lasts.
    async fn release(&self, fence: &Fence) {
        let (chain, kind) = (fence.chain, fence.kind);
        match tokio::time::timeout(self.ttl, self.store.release_lease(fence)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => warn!(%chain, %kind, %error, "cannot release the lease; it lapses on its own"),
            Err(_) => warn!(%chain, %kind, "releasing the lease timed out; it lapses on its own"),
        }
    }
}

/// Renews `fence` every third of `ttl` until `stop`, the lease held until
/// `held_until` (local time, from before the request that took or last
/// renewed it); cancels `stop` when the lease is taken over, or when it
/// ends without a successful renewal, whatever a renewal still waits for.
/// Whether it was taken over.
async fn renew(
    store: Store,
    fence: Fence,
    mut held_until: Instant,
    ttl: Duration,
    stop: CancellationToken,
) -> bool {
    loop {
        let next = (Instant::now() + ttl / 3).min(held_until);
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep_until(next) => {}
        }
        let asked = Instant::now();
        let renewal = tokio::time::timeout_at(held_until, store.renew_lease(&fence, micros(ttl)));
        match renewal.await {
            Ok(Ok(true)) => held_until = asked + ttl,
            Ok(Ok(false)) => {
                warn!(chain = %fence.chain, kind = %fence.kind, epoch = fence.epoch, "lease taken over: stopping here");
                stop.cancel();
                return true;
            }
            Ok(Err(error)) => {
                warn!(chain = %fence.chain, kind = %fence.kind, %error, "cannot renew the lease; retrying")
            }
            Err(_) => {
                warn!(chain = %fence.chain, kind = %fence.kind, epoch = fence.epoch, "lease lapsed unrenewed: stopping here");
                stop.cancel();
                return false;
            }
        }
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// `host/pid/tag`: readable in `health`, distinct for every process.
fn instance_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let tag = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}/{}/{}", std::process::id(), &tag[..6])
}
