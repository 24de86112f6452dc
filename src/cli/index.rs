//! The indexing commands: `run` (watchers, transfer senders and the API),
//! `serve` (the API alone) and `backfill`.

use std::{io::IsTerminal, net::SocketAddr, sync::Arc};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info, info_span, warn};

use super::ApiOptions;
use crate::{
    api::{self, ApiState},
    chain::{Chain, Family},
    config::{ChainConfig, Chains, Strategy},
    coverage::{self, History},
    environment::{Configured, Environment},
    events::{self, delivery::DeliveryConfig, url::Policy},
    evm::{EvmSender, EvmWatcher},
    keys::{MNEMONIC_ENV, MNEMONIC_FILE_ENV, MnemonicSigner, Signer},
    lease::Leases,
    pii,
    redact::redact_urls,
    solana::{SolanaSender, SolanaWatcher},
    store::{Store, StoreError, WorkerKind},
    telemetry,
    transfers::run_sender,
    watcher::{BackfillReport, WatchError},
};

/// What `run` runs: the chains to follow and how to serve and deliver.
pub struct Service {
    pub chains: Chains,
    /// Only these chains (empty: every one).
    pub only: Vec<Chain>,
    pub api: ApiOptions,
    pub delivery: super::webhooks::DeliveryOptions,
    pub events: super::events::EventOptions,
    pub instance: super::instance::InstanceOptions,
}

/// `run`: watchers, senders, webhook delivery and the API on the store at
/// `url` until SIGINT or SIGTERM. `dev` runs it too, with its own launch.
pub async fn run_service(url: &str, service: Service, launch: Launch) -> anyhow::Result<()> {
    let Service { chains, only, api, delivery, events, instance } = service;
    // Listening from the first moment: a signal while the store opens or
    // migrates stops `run` cleanly instead of killing it.
    let shutdown = match launch.shutdown.clone() {
        Some(shutdown) => shutdown,
        None => cancel_on_signal()?,
    };
    let lock = super::instance::sqlite_lock(url)?;
    let opening = async {
        let store = Store::open(url).await?;
        // Renewals on connections of their own, never queued behind API work.
        let apart = store.apart(2).await?;
        Ok::<_, anyhow::Error>((store, apart))
    };
    let Some((store, apart)) = until_signal(opening, &shutdown).await? else {
        return Ok(());
    };
    let leases = Leases::new(apart, instance.worker_lease, lock.is_some());
    let outbox = Outbox { delivery: delivery.config()?, events };
    run(Opened { store, leases, shutdown }, chains, only, api, outbox, launch).await?;
    drop(lock);
    Ok(())
}

/// What `run` starts with besides its options: its keys, the webhook URL
/// policy, and whom to tell the API's address once it listens. `run`
/// takes them from the environment; `dev` gives its own.
pub struct Launch {
    pub signer: Option<Arc<dyn Signer>>,
    pub pii: Option<pii::Key>,
    pub webhook_policy: Policy,
    pub on_listen: Option<Box<dyn FnOnce(SocketAddr) + Send>>,
    /// Cancelled by the first signal, when the caller already listens for
    /// them ([`cancel_on_signal`]); `None`: `run_service` starts listening.
    /// A signal that came before `run_service` then stops it at once
    /// instead of being lost between two listeners.
    pub shutdown: Option<CancellationToken>,
}

impl Launch {
    /// The keys and the policy the environment configures.
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self {
            signer: signer()?,
            pii: pii::Key::from_env()?,
            webhook_policy: Policy::from_env(),
            on_listen: None,
            shutdown: None,
        })
    }
}

/// Where `run` sends the outbox's events: webhooks, and the sinks.
pub struct Outbox {
    pub delivery: DeliveryConfig,
    pub events: super::events::EventOptions,
}

/// What `run` works in: its store, its instance's leases, and the token
/// a signal cancels.
struct Opened {
    store: Store,
    leases: Leases,
    shutdown: CancellationToken,
}

async fn run(
    opened: Opened,
    chains: Chains,
    only: Vec<Chain>,
    api: ApiOptions,
    outbox: Outbox,
    launch: Launch,
) -> anyhow::Result<()> {
    let Opened { store, leases, shutdown } = opened;
    let Outbox { mut delivery, events: sinks } = outbox;
    let selected: Vec<ChainConfig> = if only.is_empty() {
        chains.iter().cloned().collect()
    } else {
        only.iter().map(|c| chains.get(*c).cloned()).collect::<Result<_, _>>()?
    };
    if selected.is_empty() {
        bail!("no chain to index");
    }
    let (store, environment, followed) = start(store, api.environment, launch.pii, (&chains, &only)).await?;
    let selected: Vec<ChainConfig> = selected.into_iter().filter(|c| followed.contains(&c.chain)).collect();
    if selected.is_empty() {
        bail!("no chain to index: a sandbox follows test chains only, and none is configured");
    }
    crate::issuance::decimals::verify_at_start(&selected).await?;
    telemetry::prometheus();
    let listener = api::bind(api.listen).await?;
    let required = selected.iter().map(|c| c.chain).collect();
    let signer = launch.signer;
    let webhook_policy = launch.webhook_policy.within(environment);
    let state = api_state(&store, chains, required, &api, signer.clone(), environment)?
        .with_webhook_policy(webhook_policy);
    delivery.policy = webhook_policy;
    if let Some(on_listen) = launch.on_listen {
        on_listen(listener.local_addr()?);
    }

    let mut tasks = tokio::task::JoinSet::new();
    let server = shutdown.clone();
    tasks.spawn(async move { api::serve(listener, state, server).await.context("the HTTP API stopped") });
    if delivery.concurrency > 0 {
        let (store, shutdown) = (store.clone(), shutdown.clone());
        tasks.spawn(async move {
            events::delivery::run(store, delivery, shutdown).await;
            Ok(())
        });
    }
    super::events::spawn(&mut tasks, &store, sinks, leases.owner(), &shutdown);
    for config in selected.iter().filter(|_| signer.is_some()) {
        let (signer, store, shutdown, leases) =
            (signer.clone().expect("filtered"), store.clone(), shutdown.clone(), leases.clone());
        let span = info_span!("sender", chain = %config.chain);
        let config = config.clone();
        let chain = config.chain;
        tasks.spawn(
            async move {
                let send = |fence, stop| {
                    let (config, store, signer) = (config.clone(), store.clone(), signer.clone());
                    async move {
                        match config.family() {
                            Family::Evm => {
                                run_sender(EvmSender::new(config, store.fenced(fence), signer), stop).await
                            }
                            Family::Solana => {
                                run_sender(SolanaSender::new(config, store.fenced(fence), signer), stop).await
                            }
                        }
                        Ok::<(), anyhow::Error>(())
                    }
                };
                leases.hold(WorkerKind::Sender, chain, &shutdown, send).await
            }
            .instrument(span),
        );
    }
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
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        let result = joined.map_err(anyhow::Error::from).and_then(|r| r);
        if let Err(error) = result {
            error!(error = format!("{error:#}"), "stopping every watcher");
            shutdown.cancel();
            failure.get_or_insert(error);
        }
    }
    store.close().await;
    match failure {
        Some(error) => Err(error),
        None => {
            info!("stopped cleanly");
            Ok(())
        }
    }
}

/// Follows a chain until `stop`, with a store handle fenced by this
/// instance's watcher lease of the chain. A watcher that cannot continue
/// stops its chain (see [`stop_chain`]); one refused at its start (an RPC
/// URL of another chain) fails `run`, a configuration to correct.
async fn watch(config: ChainConfig, store: Store, stop: CancellationToken) -> anyhow::Result<()> {
    let chain = config.chain;
    let outcome = match config.family() {
        Family::Evm => match connect(config.clone(), store.clone(), &stop, EvmWatcher::connect).await? {
            Some(watcher) => {
                let history = EvmWatcher::history(config, store.clone());
                with_gaps(watcher.run(stop.clone()), Some(history), &stop).await
            }
            None => Ok(()),
        },
        Family::Solana => {
            match connect(config.clone(), store.clone(), &stop, SolanaWatcher::connect).await? {
                Some(watcher) => {
                    // The signatures strategy reads each address's whole history
                    // on first sight: it has no gaps.
                    let history = (config.strategy == Strategy::Blocks)
                        .then(|| SolanaWatcher::history(config, store.clone()));
                    with_gaps(watcher.run(stop.clone()), history, &stop).await
                }
                None => Ok(()),
            }
        }
    };
    if let Err(error) = outcome {
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
    match store.stop_chain(chain, kind, &reason, instance).await {
        Ok(()) => error!(
            %chain, kind, %reason,
            "the watcher cannot continue: chain STOPPED on every instance until `custody-indexer chains resume {chain}`; \
             the other chains, the senders and the API keep running"
        ),
        Err(StoreError::Conflict(lost)) => {
            warn!(%chain, kind, %reason, %lost, "the watcher cannot continue, but its lease was lost: the new holder decides")
        }
        Err(failure) => error!(
            %chain, kind, %reason, error = format!("{:#}", anyhow::Error::from(failure)),
            "the watcher cannot continue, and the store refused its stop; running it again"
        ),
    }
}

/// Follows a chain while the gaps of late-registered addresses are scanned
/// beside it; the gap scan stops with the watcher.
async fn with_gaps<H: History + 'static>(
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

pub async fn serve(url: &str, chains: Chains, required: Vec<Chain>, api: ApiOptions) -> anyhow::Result<()> {
    let shutdown = cancel_on_signal()?;
    for chain in &required {
        chains.get(*chain)?;
    }
    let Some(store) = until_signal(async { Ok(Store::open(url).await?) }, &shutdown).await? else {
        return Ok(());
    };
    let (store, environment, _) =
        start(store, api.environment, pii::Key::from_env()?, (&chains, &[])).await?;
    crate::issuance::decimals::verify_at_start(chains.iter()).await?;
    telemetry::prometheus();
    let listener = api::bind(api.listen).await?;
    let state = api_state(&store, chains, required, &api, signer()?, environment)?
        .with_webhook_policy(Policy::from_env().within(environment));
    api::serve(listener, state, shutdown).await.context("the HTTP API stopped")?;
    store.close().await;
    info!("stopped cleanly");
    Ok(())
}

/// The chains `run` follows in `environment`, of those `only` names (all
/// when empty); refuses a sandbox that could move real money (see
/// [`crate::environment::chains_to_follow`]).
fn followed(chains: &Chains, only: &[Chain], environment: Environment) -> anyhow::Result<Vec<Chain>> {
    let configured: Vec<Configured<'_>> = chains
        .iter()
        .map(|c| Configured {
            chain: c.chain,
            source: &c.source,
            mainnet: c.chain.is_mainnet() || Chain::mainnet_network(c.chain_id, c.genesis_hash.as_deref()),
            issued: c.assets.iter().filter(|a| a.issued).map(|a| a.symbol.as_str()).collect(),
        })
        .collect();
    Ok(crate::environment::chains_to_follow(environment, &configured, only)?)
}

/// What `run` and `serve` serve the API with.
fn api_state(
    store: &Store,
    chains: Chains,
    required: Vec<Chain>,
    api: &ApiOptions,
    signer: Option<Arc<dyn Signer>>,
    environment: Environment,
) -> anyhow::Result<ApiState> {
    if environment == Environment::Sandbox && api.receiving_bank.is_some() {
        anyhow::bail!(
            "--receiving-bank is for production: a sandbox shows its own sandbox bank, never real wiring \
             instructions"
        );
    }
    // A sandbox's API takes nothing on a chain it does not follow.
    let chains = match environment {
        Environment::Sandbox => chains.only(&followed(&chains, &[], environment)?),
        Environment::Production => chains,
    };
    Ok(ApiState::new(store.clone(), chains, required, api.rate_limit())
        .with_transfers(signer, api.gas.usd_micros)
        .with_compliance(environment, api.compliance())
        .with_receiving_bank(api.receiving_bank()?)
        .with_conversions(api.pricing.settings())
        .with_limits(api.limits.limits())
        .with_operator_token(api.operator_token.clone()))
}

/// The environment this process runs in, `requested` or the store's
/// (see [`crate::environment::on_start`]), with the store unlocked for
/// personal data by `given` or the key that environment takes (see
/// [`pii::key_source`]); stamps a store that has none. Production without
/// `CUSTODY_INDEXER_PII_KEY`, and a sandbox whose `chains` could move real
/// money, are refused before the store is stamped. Also returns the chains
/// followed of those named (see [`followed`]).
async fn start(
    store: Store,
    requested: Option<Environment>,
    given: Option<pii::Key>,
    (chains, only): (&Chains, &[Chain]),
) -> anyhow::Result<(Store, Environment, Vec<Chain>)> {
    let stored = store.environment().await?;
    let decisions = stored.is_none() && store.holds_sandbox_decisions().await?;
    let chosen = crate::environment::on_start(stored, requested, decisions)?;
    let followed = followed(chains, only, chosen)?;
    let source = pii::key_source(chosen, given)?;
    let stamped = store.stamp_environment(chosen).await?;
    // Another process stamped the store meanwhile: judged against its stamp.
    let environment = crate::environment::on_start(Some(stamped), Some(chosen), false)?;
    let store = store.unlock_pii(source).await?;
    info!(%environment, "environment");
    Ok((store, environment, followed))
}

/// The signing keys the environment configures; without them transfers are
/// refused and nothing is sent.
fn signer() -> anyhow::Result<Option<Arc<dyn Signer>>> {
    let signer = MnemonicSigner::from_env()?;
    if signer.is_none() {
        info!("no signing keys ({MNEMONIC_ENV} or {MNEMONIC_FILE_ENV}): transfers are disabled");
    }
    Ok(signer.map(|s| Arc::new(s) as Arc<dyn Signer>))
}

/// Connects a watcher, retrying while no RPC URL answers; `None` on shutdown.
async fn connect<W, F>(
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
                if let Err(e) = store.record_failure(chain, error.kind(), &error.to_string()).await {
                    warn!(%chain, error = %e, "cannot record the watcher's health");
                }
            }
            Err(error) => {
                // Recorded for `health` (another process) before `run` stops.
                if let Err(e) = store.record_failure(chain, error.kind(), &error.to_string()).await {
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

/// Opens what `opening` opens, unless a signal comes first: a store that
/// does not answer holds the process no longer than that (a migration cut
/// short rolls back). `None` after a signal.
async fn until_signal<T>(
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
pub(crate) fn cancel_on_signal() -> anyhow::Result<CancellationToken> {
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

/// What `backfill --address` read: the history as of the slot every page was
/// asked at (or a later one), and the slot of its oldest signature.
fn history_line(address: &str, report: &BackfillReport) -> String {
    let span = match report.blocks {
        0 => "no signatures".to_string(),
        n => format!("{n} signatures from slot {} on", report.from),
    };
    format!(
        "read the history of {address} as of slot {} or later ({span}, in {:.3} s): {} deposits found, {} new or updated",
        report.to,
        report.elapsed.as_secs_f64(),
        report.deposits_found,
        report.deposits_changed
    )
}

/// What `backfill` reads.
pub enum Range {
    Blocks { from: u64, to: Option<u64> },
    Address { address: String, before: Option<String>, until: Option<String> },
}

pub async fn backfill(store: Store, config: ChainConfig, range: Range) -> anyhow::Result<()> {
    let chain = config.chain;
    let expected = match &range {
        Range::Blocks { from, to: Some(to) } => to.saturating_sub(*from) + 1,
        _ => 0,
    };
    let bar = ProgressBar::new(expected);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos}/{len} [{elapsed_precise}] {per_sec} {msg}")
            .expect("static template"),
    );
    let progress = |done: u64, found: usize| {
        bar.set_position(done);
        bar.set_message(format!("{found} deposits"));
    };
    let (report, unit) = match (config.family(), range) {
        (Family::Evm, Range::Blocks { from, to }) => {
            (EvmWatcher::connect(config, store).await?.backfill(from, to, &progress).await?, "blocks")
        }
        (Family::Evm, Range::Address { .. }) => bail!("{chain}: --address applies to Solana chains only"),
        (Family::Solana, Range::Blocks { from, to }) => {
            (SolanaWatcher::connect(config, store).await?.backfill_slots(from, to, &progress).await?, "slots")
        }
        (Family::Solana, Range::Address { address, before, until }) => {
            let mut watcher = SolanaWatcher::connect(config, store).await?;
            let report = watcher.backfill_address(&address, before, until, &progress).await?;
            bar.finish_and_clear();
            println!("{chain}: {}", history_line(&address, &report));
            return Ok(());
        }
    };
    bar.finish_and_clear();
    let seconds = report.elapsed.as_secs_f64().max(1e-9);
    println!(
        "{chain}: scanned {unit} {}..={} ({} {unit} in {:.3} s, {:.0} {unit}/s): {} deposits found, {} new or updated",
        report.from,
        report.to,
        report.blocks,
        seconds,
        report.blocks as f64 / seconds,
        report.deposits_found,
        report.deposits_changed
    );
    Ok(())
}
