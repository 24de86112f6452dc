//! The composition root: what `run` starts (the API with the wings'
//! workers behind it, webhook delivery, the outbox's sinks, a watcher per
//! chain and, with signing keys, a sender per chain with the wings' mints
//! and refunds beside it, each under this instance's leases) and what
//! `serve` starts (the API with the wings' workers). Every task is in one
//! watched set: the first that fails stops the others. The command line
//! and `dev` call it with their options.

mod chains;
pub mod instance;
pub mod options;
pub mod outbox;
mod signals;
pub mod workers;

use std::{net::SocketAddr, sync::Arc};

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use self::signals::cancel_on_signal;
use self::{
    options::{ApiOptions, DeliveryOptions, EventOptions, InstanceOptions},
    signals::until_signal,
};
use crate::{
    api::ApiState,
    api_key::pepper,
    chain::{Chain, Family},
    config::{ChainConfig, Chains},
    environment::{Configured, Environment},
    events::{self, delivery::DeliveryConfig, url::Policy},
    keys::{MNEMONIC_ENV, MNEMONIC_FILE_ENV, SIGNER_ENV, Signer},
    lease::Leases,
    pii,
    store::Store,
    telemetry,
};

/// What `run` runs: the chains to follow and how to serve and deliver.
pub struct Service {
    pub chains: Chains,
    /// Only these chains (empty: every one).
    pub only: Vec<Chain>,
    pub api: ApiOptions,
    pub delivery: DeliveryOptions,
    pub events: EventOptions,
    pub instance: InstanceOptions,
    /// Open the store without migrating it (see [`Store::open_migrated`]).
    pub no_migrate: bool,
}

/// `run`: watchers, senders, webhook delivery and the API on the store at
/// `url` until SIGINT, SIGTERM or SIGHUP. `dev` runs it too, with its own
/// launch.
pub async fn run_service(url: &str, service: Service, launch: Launch) -> anyhow::Result<()> {
    let Service { chains, only, api, delivery, events, instance, no_migrate } = service;
    // Listening from the first moment: a signal while the store opens or
    // migrates stops `run` cleanly instead of killing it.
    let shutdown = match launch.shutdown.clone() {
        Some(shutdown) => shutdown,
        None => cancel_on_signal()?,
    };
    let lock = instance::sqlite_lock(url)?;
    let audit = &instance.audit;
    let every = std::time::Duration::from_secs(audit.audit_checkpoint_secs);
    let checkpoints = crate::audit::schedule::Schedule::from_env(
        every,
        audit.audit_checkpoint_dir.clone(),
        events.nats_url.clone(),
    )?;
    let opening = async {
        let store = if no_migrate { Store::open_migrated(url).await? } else { Store::open(url).await? };
        // Renewals on connections of their own, never queued behind API work.
        let apart = store.apart(2).await?;
        Ok::<_, anyhow::Error>((store, apart))
    };
    let Some((store, apart)) = until_signal(opening, &shutdown).await? else {
        return Ok(());
    };
    let leases = Leases::new(apart, instance.worker_lease, lock.is_some());
    let outbox = Outbox { delivery: delivery.config()?, events };
    run(Opened { store, leases, shutdown, checkpoints }, chains, only, api, outbox, launch).await?;
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
    pub events: EventOptions,
}

/// What `run` works in: its store, its instance's leases, and the token
/// a signal cancels.
struct Opened {
    store: Store,
    leases: Leases,
    shutdown: CancellationToken,
    /// The audit log's signed checkpoints, when a key is configured.
    checkpoints: Option<crate::audit::schedule::Schedule>,
}

async fn run(
    opened: Opened,
    chains: Chains,
    only: Vec<Chain>,
    api: ApiOptions,
    outbox: Outbox,
    launch: Launch,
) -> anyhow::Result<()> {
    let Opened { store, leases, shutdown, checkpoints } = opened;
    let Outbox { mut delivery, events: sinks } = outbox;
    let selected: Vec<ChainConfig> = if only.is_empty() {
        chains.iter().cloned().collect()
    } else {
        only.iter().map(|c| chains.get(*c).cloned()).collect::<Result<_, _>>()?
    };
    if selected.is_empty() {
        bail!("no chain to index");
    }
    let checkpoints = checkpoints.map(Arc::new);
    let given = Given { pii: launch.pii, checkpoint: newest(checkpoints.as_deref()).await };
    let (store, environment, followed) = start(store, api.environment, given, (&chains, &only)).await?;
    let selected: Vec<ChainConfig> = selected.into_iter().filter(|c| followed.contains(&c.chain)).collect();
    if selected.is_empty() {
        bail!("no chain to index: a sandbox follows test chains only, and none is configured");
    }
    crate::evm::asset_code::verify_at_start(&selected).await?;
    crate::issuance::decimals::verify_at_start(&selected).await?;
    telemetry::prometheus();
    let listener = crate::server::bind(api.listen).await?;
    let required = selected.iter().map(|c| c.chain).collect();
    // Every configured chain: the API makes accounts' keys on each.
    let families: Vec<Family> = chains.iter().map(ChainConfig::family).collect();
    let signer = match launch.signer {
        Some(signer) => Some(signing(&store, environment, signer, &families).await?),
        None => None,
    };
    let webhook_policy = launch.webhook_policy.within(environment);
    let mut tasks = tokio::task::JoinSet::new();
    let gate = restores(&mut tasks, (&store, &selected), checkpoints.clone(), &shutdown).await?;
    let state = api_state(&store, chains, required, &api, signer.clone(), environment)?
        .with_webhook_policy(webhook_policy)
        .with_leases(leases.holding())
        .with_gate(gate.clone());
    delivery.policy = webhook_policy;
    if let Some(on_listen) = launch.on_listen {
        on_listen(listener.local_addr()?);
    }

    workers::spawn(&mut tasks, &state, &shutdown);
    let server = shutdown.clone();
    tasks.spawn(async move {
        crate::server::serve(listener, state, server).await.context("the HTTP API stopped")
    });
    if delivery.concurrency > 0 {
        let (store, shutdown) = (store.clone(), shutdown.clone());
        tasks.spawn(async move {
            events::delivery::run(store, delivery, shutdown).await;
            Ok(())
        });
    }
    if let Some(schedule) = checkpoints {
        let (store, owner, shutdown) = (store.clone(), leases.owner().to_string(), shutdown.clone());
        tasks.spawn(async move {
            crate::audit::schedule::run(store, schedule, owner, shutdown).await;
            Ok(())
        });
    }
    outbox::spawn(&mut tasks, &store, sinks, leases.owner(), &shutdown);
    if let Some(signer) = signer {
        chains::spawn_senders(&mut tasks, &selected, (&signer, &gate), (&store, &leases, &shutdown));
    }
    chains::spawn_watchers(&mut tasks, selected, (&store, &leases, &shutdown));
    let outcome = watch(tasks, &shutdown).await;
    store.close().await;
    outcome?;
    info!("stopped cleanly");
    Ok(())
}

/// Reads a restore's witnesses before any sender starts (see
/// [`crate::restore`]) and spawns, into `tasks`, the worker that judges
/// them again until `shutdown`: the gate they keep.
async fn restores(
    tasks: &mut tokio::task::JoinSet<anyhow::Result<()>>,
    (store, selected): (&Store, &[ChainConfig]),
    checkpoints: Option<Arc<crate::audit::schedule::Schedule>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<crate::restore::gate::Gate> {
    let gate = crate::restore::gate::Gate::default();
    let newest = match &checkpoints {
        Some(schedule) => schedule.known().await,
        None => None,
    };
    let found = crate::restore::watch::at_start(store, &gate, selected, newest.as_ref()).await?;
    let (store, kept, stop) = (store.clone(), gate.clone(), shutdown.clone());
    tasks.spawn(async move {
        crate::restore::watch::run(store, kept, checkpoints, found, stop).await;
        Ok(())
    });
    Ok(gate)
}

/// The newest checkpoint signed with `schedule`'s key, wherever it is
/// kept (this instance's, the directory's, the NATS subject's), with its
/// public key: what the log is authenticated against (see
/// `audit::authenticate`).
async fn newest(
    schedule: Option<&crate::audit::schedule::Schedule>,
) -> Option<(crate::audit::checkpoint::Checkpoint, ed25519_dalek::VerifyingKey)> {
    let schedule = schedule?;
    schedule.known().await.map(|checkpoint| (checkpoint, schedule.key.verifying_key()))
}

/// Waits for every task of `tasks`; the first that fails cancels
/// `shutdown`, stopping the others, and is the answer.
async fn watch(
    mut tasks: tokio::task::JoinSet<anyhow::Result<()>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        let result = joined.map_err(anyhow::Error::from).and_then(|r| r);
        if let Err(error) = result {
            error!(error = format!("{error:#}"), "stopping every task");
            shutdown.cancel();
            failure.get_or_insert(error);
        }
    }
    failure.map_or(Ok(()), Err)
}

pub async fn serve(
    url: &str,
    chains: Chains,
    required: Vec<Chain>,
    api: ApiOptions,
    no_migrate: bool,
) -> anyhow::Result<()> {
    let shutdown = cancel_on_signal()?;
    for chain in &required {
        chains.get(*chain)?;
    }
    let opening =
        async { Ok(if no_migrate { Store::open_migrated(url).await? } else { Store::open(url).await? }) };
    let Some(store) = until_signal(opening, &shutdown).await? else {
        return Ok(());
    };
    let (store, environment, _) =
        start(store, api.environment, Given { pii: pii::Key::from_env()?, checkpoint: None }, (&chains, &[]))
            .await?;
    crate::evm::asset_code::verify_at_start(chains.iter()).await?;
    crate::issuance::decimals::verify_at_start(chains.iter()).await?;
    telemetry::prometheus();
    let listener = crate::server::bind(api.listen).await?;
    let families: Vec<Family> = chains.iter().map(ChainConfig::family).collect();
    let signer = match signer()? {
        Some(signer) => Some(signing(&store, environment, signer, &families).await?),
        None => None,
    };
    let state = api_state(&store, chains, required, &api, signer, environment)?
        .with_webhook_policy(Policy::from_env().within(environment));
    let outcome = workers::serve_api(listener, state, shutdown).await;
    store.close().await;
    outcome?;
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
        .with_repairs(api.repair_second_operator_above.max(0) as u128)
        .with_compliance(environment, api.compliance())
        .with_receiving_bank(api.receiving_bank()?)
        .with_conversions(api.pricing.settings())
        .with_limits(api.limits.limits())
        .with_operator_token(api.operator_token.clone())
        .with_trusted_proxies(api.trusted_proxies.clone())
        .with_mail(crate::mail::MailSettings::from_env()?))
}

/// What a start is given besides the environment: the personal-data key,
/// and the newest signed checkpoint (with its public key) the log must
/// still hold when it is authenticated.
struct Given {
    pii: Option<pii::Key>,
    checkpoint: Option<(crate::audit::checkpoint::Checkpoint, ed25519_dalek::VerifyingKey)>,
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
    Given { pii: given, checkpoint }: Given,
    (chains, only): (&Chains, &[Chain]),
) -> anyhow::Result<(Store, Environment, Vec<Chain>)> {
    let stored = store.environment().await?;
    let decisions = stored.is_none() && store.holds_sandbox_decisions().await?;
    let chosen = crate::environment::on_start(stored, requested, decisions)?;
    let followed = followed(chains, only, chosen)?;
    let pepper = pepper::process()?;
    if chosen == Environment::Production && pepper.is_none() {
        bail!(
            "production stores operator and API keys under a pepper the store never holds: set {} to a file of at \
             least 32 random bytes (see docs/operations.md)",
            pepper::PEPPER_FILE_ENV
        );
    }
    let source = pii::key_source(chosen, given)?;
    let stamped = crate::start::stamp_environment(&store, chosen).await?;
    // Another process stamped the store meanwhile: judged against its stamp.
    let environment = crate::environment::on_start(Some(stamped), Some(chosen), false)?;
    let store = crate::start::unlock_pii(&store, source).await?;
    let adopted = crate::identity::trail::adopt(&store).await?;
    if adopted > 0 {
        info!(adopted, "identity trail entries linked into the audit log");
    }
    let adopted = crate::audit::adopt::adopt(&store).await?;
    if adopted > 0 {
        info!(adopted, "operators and keys made before the log recorded them adopted into the audit log");
    }
    if let pepper::Peppering::Rekeyed(keys) = pepper::adopt(&store, pepper).await? {
        info!(keys, "operator and API keys re-keyed under the pepper");
    }
    let checkpoint = checkpoint.as_ref().map(|(checkpoint, public)| (checkpoint, public));
    if let Some(done) = crate::audit::authenticate::adopt(&store, checkpoint).await? {
        info!(
            entry = done.seq,
            head = done.head_seq,
            sessions_ended = done.sessions_ended,
            links_voided = done.links_voided,
            principals = done.principals,
            "audit log authenticated: entries up to the head are before authentication, and the principals in \
             force are listed for review by `audit verify`"
        );
    }
    // What was asked before the log's authentication cannot be decided:
    // ended, to be asked again (at every start, so a crash just after the
    // authentication leaves nothing behind).
    let expired = crate::operators::changes::expire_unauthenticated(&store).await?;
    let refused = crate::reconcile::repairs::refuse_unauthenticated(&store).await?;
    if expired + refused > 0 {
        info!(
            expired,
            refused, "changes and repairs asked before the audit log's authentication ended: ask again"
        );
    }
    if environment == Environment::Production {
        let bounded = crate::operators::keys::bound_existing(&store).await?;
        if bounded > 0 {
            info!(bounded, "operator keys made before keys expired now expire in 90 days");
        }
    }
    info!(%environment, "environment");
    Ok((store, environment, followed))
}

/// `signer`, if it has keys for every chain `families` and `environment`
/// allows its keys (a production service with
/// keys its host can read keeps the warning as a condition, shown by
/// `health` and `/metrics`), its condition recorded in the store.
async fn signing(
    store: &Store,
    environment: Environment,
    signer: Arc<dyn Signer>,
    families: &[Family],
) -> anyhow::Result<Arc<dyn Signer>> {
    use crate::keys::rules::{KEYS_ATTESTED, LOCAL_KEYS, attested, local_keys_allowed_by_env, may_sign_with};
    let backend = signer.backend();
    // A backend without secp256k1 keys cannot send on an EVM chain.
    let transit = backend.parts().into_iter().any(|b| matches!(b, crate::keys::Backend::VaultTransit { .. }));
    let secp256k1 =
        families.iter().any(|f| crate::family::rules::curve(*f) == crate::chain::Curve::Secp256k1);
    if secp256k1 && transit {
        bail!(crate::keys::KeyError::NoSecp256k1("an EVM chain is configured".into()));
    }
    info!(signer = %backend, "signing keys");
    // The warning is the last started service's: its keys replace another's.
    let warning = may_sign_with(environment, &backend, local_keys_allowed_by_env())?;
    crate::conditions::clear_kind(store, LOCAL_KEYS).await?;
    crate::conditions::clear_kind(store, KEYS_ATTESTED).await?;
    if let Some(warning) = warning {
        warn!(%warning, "production signs with keys this host can read ({})", crate::keys::rules::ALLOW_LOCAL_KEYS_ENV);
        crate::conditions::raise(store, None, LOCAL_KEYS, &backend.to_string(), &warning).await?;
    }
    // The operator's word, not the module's: said where an operator looks.
    if let Some(line) = attested(&backend) {
        info!(signer = %backend, "keys in a PKCS#11 token counted as hardware on the operator's attestation (CUSTODY_INDEXER_PKCS11_HARDWARE=true)");
        crate::conditions::raise(store, None, KEYS_ATTESTED, &backend.to_string(), line).await?;
    }
    // The platform keys must be the ones first seen (a replaced token or
    // KMS alias stops the service here).
    crate::keys::pins::check(store, signer.as_ref(), families, None).await?;
    let signer = crate::keys::guarded(signer)?;
    Ok(Arc::new(crate::keys::watch::Watched::new(signer, store.clone())))
}

/// The signing keys the environment configures; without them transfers are
/// refused and nothing is sent.
fn signer() -> anyhow::Result<Option<Arc<dyn Signer>>> {
    let signer = crate::keys::from_env()?;
    if signer.is_none() {
        info!(
            "no signing keys ({MNEMONIC_ENV}, {MNEMONIC_FILE_ENV} or {SIGNER_ENV}): transfers are disabled"
        );
    }
    Ok(signer)
}
