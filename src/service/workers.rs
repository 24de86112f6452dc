//! The wings' workers every instance runs beside its API: each moves on
//! what the API accepted, and every instance may run them (each change is
//! made under a row lock, from the status it was read in). The chains'
//! workers (watchers, senders, and the wings' mints and refunds beside
//! each sender) are in [`super::chains`].

use std::time::Duration;

use anyhow::Context;
use tokio::{net::TcpListener, task::JoinSet};
use tokio_util::sync::CancellationToken;

use crate::{
    api::ApiState,
    api_key::requests::purge_request_tokens,
    conversions,
    environment::Environment,
    every::{Logged, every},
    identity::provider,
    issuance,
    people::sign_in::purge_failures,
    transfers,
};

/// How often the `jti`s of request signatures that can no longer be
/// accepted are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(60);

type Tasks = JoinSet<anyhow::Result<()>>;

/// Spawns, into `tasks`, the workers behind `state`'s API until `shutdown`:
/// the end of transfers no sender takes in time, the purge of spent
/// request-signature ids, in a sandbox the sandbox compliance provider's
/// reviews (in production only operators decide), the sending of queued
/// mail when mail is configured, the alarms and lapses of operator
/// suspensions, the settlement of wires and the following of mints, and
/// the conversions' steps and payouts.
pub fn spawn(tasks: &mut Tasks, state: &ApiState, shutdown: &CancellationToken) {
    let (store, stop) = (state.store().clone(), shutdown.clone());
    let chains = state.chains().clone();
    tasks.spawn(finish(transfers::expire_unsent(store.clone(), chains, stop.clone())));
    tasks.spawn(finish(async move {
        let logged =
            Logged { moved: "purged expired request token ids", failed: "cannot purge request token ids" };
        let store = &store;
        every(PURGE_EVERY, &stop, logged, move || async move {
            let purged = purge_request_tokens(store, chrono::Utc::now().timestamp()).await?;
            // And failed console sign-ins no longer counted.
            let kept = i64::try_from(crate::people::rules::FAILURES_KEPT.as_micros()).unwrap_or(i64::MAX);
            let failures = purge_failures(store, crate::store::now_micros().saturating_sub(kept)).await?;
            Ok::<_, crate::store::StoreError>(usize::try_from(purged + failures).unwrap_or(usize::MAX))
        })
        .await
    }));
    let (store, stop) = (state.store().clone(), shutdown.clone());
    if state.environment() == Environment::Sandbox {
        let options = state.compliance();
        let reviewer = provider::Sandbox::new(options.idv_expiry);
        tasks.spawn(finish(provider::worker(store.clone(), reviewer, options, stop.clone())));
    }
    if let Some(mail) = state.mail() {
        tasks.spawn(finish(crate::mail::sender::run(store.clone(), mail.clone(), stop.clone())));
    }
    tasks.spawn(finish(suspensions(store.clone(), stop.clone())));
    tasks.spawn(finish(issuance::settle_due(store.clone(), state.mint_approval(), stop.clone())));
    tasks.spawn(finish(conversions::follow(store, state.bank().clone(), stop)));
}

/// How often suspended operators are alarmed of again, and lapsed
/// suspensions ended.
const SUSPENSIONS_EVERY: Duration = Duration::from_secs(60);

/// Keeps every operator suspension's alarm raised while it lasts, and
/// lapses those past their time (see [`crate::operators::suspension`]).
async fn suspensions(store: crate::store::Store, stop: CancellationToken) {
    let logged =
        Logged { moved: "operator suspensions in force", failed: "cannot review operator suspensions" };
    let store = &store;
    every(SUSPENSIONS_EVERY, &stop, logged, move || async move {
        crate::operators::changes::sweep(store, crate::store::now_micros()).await
    })
    .await
}

/// A worker that ends only when stopped, as a task of the set.
async fn finish(worker: impl Future<Output = ()>) -> anyhow::Result<()> {
    worker.await;
    Ok(())
}

/// Serves `state`'s API on `listener` with its workers (see [`spawn`])
/// until `shutdown`: what `serve` runs. A task that fails stops the others.
pub async fn serve_api(
    listener: TcpListener,
    state: ApiState,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut tasks = Tasks::new();
    spawn(&mut tasks, &state, &shutdown);
    // Without indexing, the restore's witnesses are the log and what `run` found.
    let (store, gate, stop) = (state.store().clone(), state.gate().clone(), shutdown.clone());
    let found = crate::restore::watch::Found::default();
    tasks.spawn(finish(crate::restore::watch::run(store, gate, None, found, stop)));
    let server = shutdown.clone();
    tasks.spawn(async move {
        crate::server::serve(listener, state, server).await.context("the HTTP API stopped")
    });
    super::watch(tasks, &shutdown).await
}
