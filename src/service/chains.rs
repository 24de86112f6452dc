//! A chain's workers under `run`: its sender, and its watcher, connected
//! (retried while no RPC URL answers), followed with the gap scans of late
//! registrations beside it, and stopped alone when it cannot continue.

use std::sync::Arc;

use anyhow::Context;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info_span, warn};

use crate::{
    chain::Chain,
    config::ChainConfig,
    conversions,
    deposits::commit,
    deposits::watcher::WatchError,
    family, issuance,
    keys::Signer,
    lease::Leases,
    reconcile,
    redact::redact_urls,
    store::{Store, StoreError, WorkerKind},
};

/// Follows a chain until `stop`, with a store handle fenced by this
/// instance's watcher lease of the chain. A watcher that cannot continue
/// stops its chain (see [`stop_chain`]); one refused at its start (an RPC
/// URL of another chain) fails `run`, a configuration to correct.
async fn watch(config: ChainConfig, store: Store, stop: CancellationToken) -> anyhow::Result<()> {
    let chain = config.chain;
    // Each chain is reconciled beside its watcher, under its lease.
    let reconciling = stop.child_token();
    let task = tokio::spawn(reconcile::background::every(config.clone(), store.clone(), reconciling.clone()));
    let watched = family::of(config.family()).watch(config, store.clone(), stop).await;
    reconciling.cancel();
    let _ = task.await;
    if let Err(error) = watched? {
        stop_chain(&store, chain, error).await;
    }
    Ok(())
}

/// Stops `chain` alone: records the stop under the watcher's lease, so that
/// no instance (nor this one restarted) runs the chain's watcher until an
/// operator runs `chains resume`, while the other chains, the senders and
/// the API keep running. A holder that lost its lease stops nothing; a stop
/// the store refuses is not final, and the watcher runs (and stops) again.
async fn stop_chain(store: &Store, chain: Chain, error: WatchError) {
    let kind = error.kind();
    let reason = redact_urls(&format!("{:#}", anyhow::Error::from(error)));
    let instance = store.fence().map_or("", |fence| fence.owner.as_str());
    match commit::stop_chain(store, chain, kind, &reason, instance).await {
        Ok(()) => error!(
            %chain, kind, %reason,
            "the watcher cannot continue: chain STOPPED on every instance until `custody-indexer chains resume {chain}`; \
             the other chains, the senders and the API keep running"
        ),
        Err(StoreError::LeaseLost(lost)) => {
            warn!(%chain, kind, %reason, %lost, "the watcher cannot continue, but its lease was lost: the new holder decides")
        }
        Err(failure) => error!(
            %chain, kind, %reason, error = format!("{:#}", anyhow::Error::from(failure)),
            "the watcher cannot continue, and the store refused its stop; running it again"
        ),
    }
}

/// Where a chain's workers run: the store, this instance's leases, and the
/// token that stops them.
type Within<'a> = (&'a Store, &'a Leases, &'a CancellationToken);

/// A sender per chain, once `gate` is open on it (a restore waits for its
/// recovery), each while this instance holds the chain's sender lease, its store fenced by the lease, with the wings' workers that
/// create the chain's mints and off-ramp refunds beside it.
pub(super) fn spawn_senders(
    tasks: &mut JoinSet<anyhow::Result<()>>,
    selected: &[ChainConfig],
    (signer, gate): (&Arc<dyn Signer>, &crate::restore::gate::Gate),
    (store, leases, shutdown): Within<'_>,
) {
    for config in selected {
        let (signer, store, shutdown, leases, gate) =
            (signer.clone(), store.clone(), shutdown.clone(), leases.clone(), gate.clone());
        let span = info_span!("sender", chain = %config.chain);
        let config = config.clone();
        let chain = config.chain;
        tasks.spawn(
            async move {
                let send = |fence, stop: CancellationToken| {
                    let (config, store, signer) = (config.clone(), store.clone(), signer.clone());
                    async move {
                        let store = store.fenced(fence);
                        // The wings create their own transfers (mints, off-ramp
                        // refunds) on the chain, under the sender's lease.
                        let mints = issuance::start_mints(
                            store.clone(),
                            config.clone(),
                            signer.clone(),
                            stop.clone(),
                        );
                        let refunds = conversions::start_refunds(
                            store.clone(),
                            config.clone(),
                            signer.clone(),
                            stop.clone(),
                        );
                        let sender = family::of(config.family()).send(config, store, signer, stop);
                        tokio::join!(mints, refunds, sender);
                        Ok::<(), anyhow::Error>(())
                    }
                };
                // After a restore, nothing is sent before its recovery: a
                // gate that closes stops the sender until it opens again.
                while !shutdown.is_cancelled() && gate.opened(chain, &shutdown).await {
                    let paused = shutdown.child_token();
                    let closing = tokio::spawn({
                        let (gate, paused) = (gate.clone(), paused.clone());
                        async move {
                            gate.closes(chain).await;
                            paused.cancel();
                        }
                    });
                    let held = leases.hold(WorkerKind::Sender, chain, &paused, &send).await;
                    closing.abort();
                    held?;
                }
                Ok(())
            }
            .instrument(span),
        );
    }
}

/// A watcher per chain, each while this instance holds the chain's watcher
/// lease, its store fenced by the lease.
pub(super) fn spawn_watchers(
    tasks: &mut JoinSet<anyhow::Result<()>>,
    selected: Vec<ChainConfig>,
    (store, leases, shutdown): Within<'_>,
) {
    for config in selected {
        let (store, shutdown, leases) = (store.clone(), shutdown.clone(), leases.clone());
        let span = info_span!("chain", chain = %config.chain);
        let chain = config.chain;
        tasks.spawn(
            async move {
                let watch = |fence, stop| watch(config.clone(), store.fenced(fence), stop);
                leases
                    .hold(WorkerKind::Watcher, chain, &shutdown, watch)
                    .await
                    .with_context(|| format!("{chain} watcher stopped"))
            }
            .instrument(span),
        );
    }
}
