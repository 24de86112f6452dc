//! Singleton workers shared by instances. A chain's live watcher and its
//! transfer sender each run on one instance at a time: the one holding the
//! `(kind, chain)` lease in the store ([`crate::store::Fence`]). The holder
//! renews it in the background every third of its time to live; every write
//! the worker makes checks it in the write's own transaction. When a renewal
//! finds the lease taken over (or cannot renew before it lapses), the worker
//! is stopped; an instance that dies leaves its workers to whichever
//! instance takes the lapsed lease first, within the time to live plus
//! [`STANDBY_LOOK`]; one that stops gives its leases up, and a standby
//! takes each within about [`STANDBY_LOOK`].

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::{
    chain::Chain,
    store::{ChainStop, Fence, Store, StoreError, WorkerKind},
};

/// How long a lease lasts without renewal by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// How often an instance that holds no lease of a worker looks for it
/// free: a lease released at another instance's shutdown is taken within
/// about this (a lapsed one, within its time to live and this).
pub const STANDBY_LOOK: Duration = Duration::from_secs(1);

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
    /// How many leases this process holds now (see [`Leases::holding`]).
    held: Arc<AtomicUsize>,
}

impl Leases {
    pub fn new(store: Store, ttl: Duration, sole: bool) -> Self {
        Self { store, owner: instance_id(), ttl, sole, held: Arc::default() }
    }

    /// How many leases this process holds, kept current: a stopping
    /// instance's listener answers until it reads 0 (its workers have
    /// given their leases up).
    pub fn holding(&self) -> Arc<AtomicUsize> {
        self.held.clone()
    }

    /// The instance name leases record: host, process id and a random tag.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs `work` whenever this instance holds the `(kind, chain)` lease,
    /// until `shutdown`. `work` gets the holding's fence and a token that is
    /// cancelled when the lease is lost or at shutdown; it must stop then.
    /// Each takeover runs `work` afresh under a new epoch. An error from
    /// `work` gives the lease up and is returned. A stopped chain's watcher
    /// lease is not taken: `work` waits until the chain is resumed.
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
        let mut waiting_logged = false;
        let mut stopped_logged = false;
        while !shutdown.is_cancelled() {
            // The database's expiry counts from the take; ours from before it.
            let asked = Instant::now();
            match self.take(kind, chain).await {
                Ok(Take::Stopped(stop)) => {
                    if !stopped_logged {
                        error!(%chain, %kind, reason = %stop.reason, stopped_by = %stop.instance,
                            "chain STOPPED: its watcher runs nowhere until `custody-indexer chains resume {chain}`");
                    }
                    stopped_logged = true;
                }
                Ok(Take::Taken(fence)) => {
                    if std::mem::take(&mut stopped_logged) {
                        info!(%chain, %kind, "chain resumed: running its watcher again");
                    }
                    self.run_held(fence, asked, shutdown, &mut work).await?;
                    waiting_logged = false;
                }
                Ok(Take::Held) if !waiting_logged => {
                    info!(%chain, %kind, "another instance holds the lease; standing by");
                    waiting_logged = true;
                }
                Ok(Take::Held) => {}
                Err(error) => warn!(%chain, %kind, %error, "cannot take the lease"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(STANDBY_LOOK.min(self.ttl / 3)) => {}
            }
        }
        Ok(())
    }

    /// Runs `work` under `fence`, taken at `asked`, renewing it meanwhile;
    /// gives the lease up afterwards unless another instance took it over.
    async fn run_held<E, F, Fut>(
        &self,
        fence: Fence,
        asked: Instant,
        shutdown: &CancellationToken,
        work: &mut F,
    ) -> Result<(), E>
    where
        F: FnMut(Fence, CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let (chain, kind) = (fence.chain, fence.kind);
        info!(%chain, %kind, epoch = fence.epoch, instance = %self.owner, "took the lease: running here");
        // Counted while held, whatever ends the holding (a panic in `work`
        // included): a stopping listener waits for none to be left.
        let _held = Held::count(&self.held);
        let stop = shutdown.child_token();
        let renewal = renew(self.store.clone(), fence.clone(), asked + self.ttl, self.ttl, stop.clone());
        let renewal = tokio::spawn(renewal);
        let outcome = work(fence.clone(), stop.clone()).await;
        stop.cancel();
        // Unless another instance took it over, give it up: a renewal cut
        // off at the lease's end may still have extended it, and nobody
        // should wait for that to lapse.
        let taken_over = renewal.await.unwrap_or(false);
        if !taken_over {
            self.release(&fence).await;
        }
        outcome
    }

    /// Takes the `(kind, chain)` lease unless another instance holds it or
    /// the chain is stopped (watchers only). The stop is read again once the
    /// lease is taken: a holder stops its chain under its lease, so what the
    /// new holder reads then is final.
    async fn take(&self, kind: WorkerKind, chain: Chain) -> Result<Take, StoreError> {
        if let Some(stop) = self.stop(kind, chain).await? {
            return Ok(Take::Stopped(stop));
        }
        let Some(fence) =
            take_lease(&self.store, kind, chain, &self.owner, micros(self.ttl), self.sole).await?
        else {
            return Ok(Take::Held);
        };
        match self.stop(kind, chain).await {
            Ok(None) => Ok(Take::Taken(fence)),
            Ok(Some(stop)) => {
                self.release(&fence).await;
                Ok(Take::Stopped(stop))
            }
            Err(error) => {
                self.release(&fence).await;
                Err(error)
            }
        }
    }

    /// The stop in force on `chain`, which concerns its watcher only.
    async fn stop(&self, kind: WorkerKind, chain: Chain) -> Result<Option<ChainStop>, StoreError> {
        match kind {
            WorkerKind::Watcher => self.store.chain_stop(chain).await,
            WorkerKind::Sender => Ok(None),
        }
    }

    /// Gives `fence` up, waiting no longer than a lease lasts.
    async fn release(&self, fence: &Fence) {
        let (chain, kind) = (fence.chain, fence.kind);
        match tokio::time::timeout(self.ttl, release_lease(&self.store, fence)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => warn!(%chain, %kind, %error, "cannot release the lease; it lapses on its own"),
            Err(_) => warn!(%chain, %kind, "releasing the lease timed out; it lapses on its own"),
        }
    }
}

/// Takes the `(kind, chain)` lease for `owner` for `ttl_micros` if nobody
/// holds it (no row, or its `until` has passed), with the next epoch.
/// `None` while another holding is live. With `force` (a process that
/// knows it is the only one, see SQLite's lock) a live holding is taken
/// too: its holder is a process that no longer runs.
pub async fn take_lease(
    store: &Store,
    kind: WorkerKind,
    chain: Chain,
    owner: &str,
    ttl_micros: i64,
    force: bool,
) -> Result<Option<Fence>, StoreError> {
    let mut tx = store.begin().await?;
    let taken = store.take_lease(&mut tx, kind, chain, owner, ttl_micros, force).await?;
    tx.commit().await?;
    Ok(taken)
}

/// Extends a holding by `ttl_micros` from now; false when the lease has
/// another epoch (it was taken over: the holder must stop). A holder that
/// renews late keeps its lease if nobody took it meanwhile.
pub async fn renew_lease(store: &Store, fence: &Fence, ttl_micros: i64) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let renewed = store.renew_lease(&mut tx, fence, ttl_micros).await?;
    tx.commit().await?;
    Ok(renewed)
}

/// Gives a holding up (a clean stop), so another instance takes the
/// worker over at once.
pub async fn release_lease(store: &Store, fence: &Fence) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    Store::release_lease(&mut tx, fence).await?;
    tx.commit().await?;
    Ok(())
}

/// One lease counted in a process's [`Leases::holding`] until dropped.
struct Held(Arc<AtomicUsize>);

impl Held {
    fn count(held: &Arc<AtomicUsize>) -> Self {
        held.fetch_add(1, Ordering::SeqCst);
        Self(held.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What an attempt to take a lease found.
enum Take {
    Taken(Fence),
    /// Another instance holds it.
    Held,
    /// The chain is stopped: its watcher runs nowhere.
    Stopped(ChainStop),
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
        let renewal = tokio::time::timeout_at(held_until, renew_lease(&store, &fence, micros(ttl)));
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
