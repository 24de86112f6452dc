//! `custody-indexer dev`: the whole platform offline, in one command. It
//! starts a local EVM node (anvil) and the local Solana network as its
//! children, places its USDC on each (the platform's issued stablecoin),
//! seeds a sandbox store in its state directory and runs what `run` runs
//! (the same code path) until SIGINT or SIGTERM, then stops its nodes.
//! `dev deposit` sends the seeded account a deposit (USDC as a simulated
//! wire the platform mints) through the running `dev`'s state directory.
//! With `--nats` it also starts a NATS server with JetStream and publishes
//! every event to it, as `run --nats-url` does.
//!
//! Everything is kept between runs in the state directory: the nodes' chains
//! (anvil's state file, the Solana network's ledger), the store indexing
//! them, the mnemonic (hence the account's addresses), the API key, the
//! ids, the webhook secret. A kept store goes on only with the chains it
//! indexed: when a node's state was lost, `dev` says so and `--reset`
//! starts over.

mod anvil_state;
mod conversion;
mod deposit;
mod evm;
mod nodes;
mod off_ramp;
mod on_ramp;
mod people;
mod sealing;
mod seed;
mod show;
mod solana;
mod state;
mod summary;
mod wire;

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::bail;
use clap::{Args, Subcommand};
use tokio_util::sync::CancellationToken;

pub use seed::Asset;
use state::StateDir;
use summary::print_ready;
pub use summary::{Summary, WebhookSummary};

use crate::{
    chain::Chain,
    environment::Environment,
    events::url::Policy,
    keys::{KeyRef, MnemonicSigner, Signer},
    service::{
        Launch, Service,
        options::{ApiOptions, DeliveryOptions, EventOptions, InstanceOptions},
    },
};

/// Where `dev` keeps its state unless told otherwise: in the current directory.
pub const DEFAULT_STATE_DIR: &str = ".custody-indexer-dev";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DevCommand {
    #[command(subcommand)]
    action: Option<DevAction>,
    #[command(flatten)]
    options: DevOptions,
}

#[derive(Debug, Subcommand)]
enum DevAction {
    /// Send the dev account a deposit from a funded local wallet (anvil's
    /// dev account 1; a Solana wallet kept in the state directory) and
    /// print its transaction hash. Needs a running `dev`.
    Deposit(deposit::DepositArgs),
    /// Wire dollars to a virtual account of the dev account (opened once):
    /// an ON_RAMP conversion delivering them as USDC; prints its id.
    OnRamp(conversion::ConversionArgs),
    /// Pay the dev account's USDC out by a US wire to a bank account of
    /// its identity (registered once): an OFF_RAMP conversion; prints its id.
    OffRamp(off_ramp::OffRampArgs),
    /// Print what the running `dev` announced: its JSON line, or one field
    /// of it (`dev show api_key`).
    Show(show::ShowArgs),
}

#[derive(Debug, Clone, Args)]
struct DevOptions {
    /// The state directory: keys, seed, the SQLite store (dev ignores
    /// --database-url), chain files; kept between runs.
    #[arg(long, value_name = "DIR", env = "CUSTODY_INDEXER_DEV_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Start over: new local chains, a new store, mnemonic, API key and account.
    #[arg(long)]
    reset: bool,
    /// Register a webhook at this URL for the organization (plain http and
    /// local addresses allowed) and print its signing secret.
    #[arg(long, value_name = "URL")]
    webhook_url: Option<String>,
    /// Also start a local NATS server with JetStream (its streams kept in
    /// the state directory) and publish every event to it (instead of any
    /// --nats-url).
    #[arg(long)]
    nats: bool,
    /// Print one JSON line describing the platform instead of the guide.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    events: EventOptions,
    #[command(flatten)]
    api: ApiOptions,
    #[command(flatten)]
    delivery: DeliveryOptions,
    #[command(flatten)]
    instance: InstanceOptions,
}

pub async fn execute(command: DevCommand) -> anyhow::Result<ExitCode> {
    match command.action {
        Some(DevAction::Deposit(args)) => deposit::run(args).await,
        Some(DevAction::OnRamp(args)) => on_ramp::run(args).await,
        Some(DevAction::OffRamp(args)) => off_ramp::run(args).await,
        Some(DevAction::Show(args)) => show::run(args),
        None => start(command.options).await,
    }
}

/// What `dev` prepared before the service starts.
struct Prepared {
    summary: Summary,
    people: people::People,
    service: Service,
    launch: Launch,
}

async fn start(options: DevOptions) -> anyhow::Result<ExitCode> {
    if options.api.environment == Some(Environment::Production) {
        bail!(
            "dev runs in sandbox only: drop --environment production ({})",
            crate::environment::ENVIRONMENT_ENV
        );
    }
    let state = StateDir::open(&options.state_dir, options.reset)?;
    // Signals are handled from here on: one while the nodes start kills
    // those started so far (their handles drop); one later, or a failure
    // of the setup, stops them as a clean exit does, so anvil writes its
    // chain and the store never runs ahead of the chain it keeps.
    // The same listener then stops `run`: a signal between the setup and
    // the service is never lost between two listeners.
    let shutdown = crate::service::cancel_on_signal()?;
    loop {
        match run_once(&state, options.clone(), &shutdown).await? {
            Ended::Stopped(code) => return Ok(code),
            Ended::Joining => {
                eprintln!(
                    "the local Solana network is built: {} joins, and dev starts again with it …",
                    seed::SOLANA_CHAIN
                );
            }
        }
    }
}

/// How one run of the platform ended.
enum Ended {
    /// For good: a signal, or a failure.
    Stopped(ExitCode),
    /// The local Solana network was built meanwhile: the platform starts
    /// again with its chain.
    Joining,
}

/// Starts the nodes, prepares the platform and runs it until `shutdown`,
/// or until the local Solana network being built in the background is
/// ready (the service then stops and the nodes with it; the state
/// directory keeps what the next run goes on with).
async fn run_once(
    state: &StateDir,
    options: DevOptions,
    shutdown: &CancellationToken,
) -> anyhow::Result<Ended> {
    let (url, json) = (state.database_url(), options.json);
    let stop = shutdown.clone().cancelled_owned();
    tokio::pin!(stop);
    let (nodes, mut building) = tokio::select! {
        started = start_nodes(state, options.nats) => started?,
        () = &mut stop => {
            eprintln!("interrupted: stopped before the platform was ready");
            return Ok(Ended::Stopped(ExitCode::FAILURE));
        }
    };
    let joining: Vec<Chain> = building.iter().map(|_| seed::SOLANA_CHAIN).collect();
    let prepared = tokio::select! {
        prepared = prepare(state, &nodes, options, &joining) => prepared,
        () = &mut stop => Err(Interrupted.into()),
    };
    let Prepared { summary, people, service, mut launch } = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            for node in nodes {
                node.stop().await;
            }
            if error.is::<Interrupted>() {
                eprintln!("interrupted: {error}");
                return Ok(Ended::Stopped(ExitCode::FAILURE));
            }
            return Err(error);
        }
    };
    // The service stops on a signal, or when a node joins.
    let run = shutdown.child_token();
    launch.shutdown = Some(run.clone());
    let pids: Vec<u32> = nodes.iter().filter_map(nodes::Node::pid).collect();
    launch.on_listen = Some(announcer(summary, people, state.path.clone(), pids, json));
    let service = crate::service::run_service(&url, service, launch);
    tokio::pin!(service);
    let mut joins = false;
    let outcome = loop {
        tokio::select! {
            outcome = &mut service => break outcome,
            built = async { building.as_mut().expect("awaited only while building").await }, if building.is_some() => {
                building = None;
                let built = built.unwrap_or_else(|e| Err(format!("its build stopped: {e}")));
                // Joined only once the binary is where `dev` looks for it:
                // a build that leaves it elsewhere restarts nothing.
                match built.and_then(|()| {
                    nodes::found(nodes::Kind::Solana).map(|_| ()).ok_or_else(|| "the build left no binary in the cache".to_string())
                }) {
                    Ok(()) => {
                        joins = true;
                        run.cancel();
                    }
                    Err(why) => eprintln!(
                        "warning: the local Solana network could not be built ({why}): dev goes on without {}",
                        seed::SOLANA_CHAIN
                    ),
                }
            }
        }
    };
    if !joins || outcome.is_err() || shutdown.is_cancelled() {
        state.withdraw();
    }
    for node in nodes {
        node.stop().await;
    }
    outcome?;
    Ok(if joins && !shutdown.is_cancelled() { Ended::Joining } else { Ended::Stopped(ExitCode::SUCCESS) })
}

/// What `dev` does once the API listens: writes `dev.json` and prints the
/// ready line (or the guide).
fn announcer(
    mut summary: Summary,
    people: people::People,
    dir: PathBuf,
    pids: Vec<u32>,
    json: bool,
) -> Box<dyn FnOnce(std::net::SocketAddr) + Send> {
    Box::new(move |address| {
        summary.api_url = format!("http://{address}");
        summary.console_url = format!("{}/console/", summary.api_url);
        summary.console_enrol_url = format!("{}{}", summary.api_url, people.console_enrol_path);
        summary.operator_enrol_urls =
            people.operator_enrol_paths.iter().map(|path| format!("{}{path}", summary.api_url)).collect();
        if let Err(error) = state::announce(&dir, &summary, &pids) {
            eprintln!("warning: cannot write dev.json ({error:#}): `dev deposit` cannot reach this dev");
        }
        print_ready(&summary, &dir, json);
    })
}

/// A signal arrived while `dev` was setting up.
#[derive(Debug, thiserror::Error)]
#[error("stopped before the platform was ready")]
struct Interrupted;

/// Places the tokens on the started `nodes`, writes the chain files, funds
/// the wallets and seeds the store, or opens the one a previous run kept
/// when its chains are still there.
async fn prepare(
    state: &StateDir,
    nodes: &[nodes::Node],
    options: DevOptions,
    joining: &[Chain],
) -> anyhow::Result<Prepared> {
    let kept = state.ledgers()?;
    let signer = Arc::new(MnemonicSigner::from(&state.mnemonic()?)?);
    let mut events = options.events;
    let placed = place(state, nodes, kept.as_ref(), &signer, &mut events).await?;
    if let Some(kept) = &kept {
        seed::check_kept(kept, &placed, &state.path)?;
    }
    let chains = seed::chain_files(&state.chains_dir(), &placed)?;
    seed::fund(signer.as_ref(), &placed).await?;
    if kept.is_none() {
        state.fresh_store()?;
    }
    let seed = state.seed()?;
    let url = state.database_url();
    let pii = state.pii_key(crate::pii::Key::from_env()?)?;
    let webhook_url = options.webhook_url.as_deref();
    let kept_store = kept.is_some();
    let seeded = seed::seed_store(
        &url,
        (&chains, joining),
        signer.as_ref(),
        pii.clone(),
        &seed,
        webhook_url,
        kept_store,
    )
    .await?;
    let people = people::seed(&url, pii.clone(), state, &seed.organization, kept.is_some()).await?;
    let pii_key = pii;
    let mut ledgers = kept.unwrap_or_default();
    ledgers.extend(placed.iter().map(|p| (p.chain, p.ledger.clone())));
    state.record_ledgers(&ledgers)?;
    let summary = Summary {
        environment: Environment::Sandbox,
        // The address the API listens on, once it does.
        api_url: String::new(),
        api_key: seed.api_key.clone(),
        organization: seed.organization.clone(),
        identity_id: seed.identity_id.clone(),
        account_id: seed.account_id.clone(),
        database_url: url,
        chains_dir: state.chains_dir(),
        addresses: seeded.addresses,
        rpc_urls: placed.iter().map(|p| (p.chain, p.rpc_url.clone())).collect(),
        assets: placed.iter().map(|p| (p.chain, vec![p.usdc.clone()])).collect(),
        webhook: seeded.webhook.map(|(id, url)| WebhookSummary {
            id,
            url,
            signing_secret: seed.webhook_secret.clone(),
        }),
        nats_url: events.nats_url.as_ref().map(|url| format!("nats://{url}")),
        console_url: String::new(),
        console_enrol_url: String::new(),
        operator_enrol_urls: Vec::new(),
        operator_keys: people.operator_keys.clone(),
        joining: joining.to_vec(),
    };
    let mut api = options.api;
    api.environment = Some(Environment::Sandbox);
    let (delivery, instance) = (options.delivery, options.instance);
    let service = Service { chains, only: Vec::new(), api, delivery, events, instance, no_migrate: false };
    let signer: Arc<dyn Signer> = signer;
    let launch = Launch {
        signer: Some(signer),
        pii: Some(pii_key),
        webhook_policy: Policy::PRIVATE,
        on_listen: None,
        shutdown: None,
    };
    Ok(Prepared { summary, people, service, launch })
}

/// The stablecoin placed on each chain node's chain (the one the state
/// directory keeps, when it is still there); the NATS node's address taken
/// for `events`.
async fn place(
    state: &StateDir,
    nodes: &[nodes::Node],
    kept: Option<&state::Ledgers>,
    signer: &MnemonicSigner,
    events: &mut EventOptions,
) -> anyhow::Result<Vec<seed::Placed>> {
    let mut placed = Vec::new();
    for node in nodes {
        placed.push(match node.kind {
            nodes::Kind::Anvil => seed::place_evm(&node.url, signer.evm_address(KeyRef::Issuer)?).await?,
            nodes::Kind::Solana => {
                let known = kept.and_then(|k| k.get(&seed::SOLANA_CHAIN));
                let issuer = signer.solana_address(KeyRef::Issuer)?.parse()?;
                seed::place_solana(&node.url, state, known, &issuer).await?
            }
            nodes::Kind::Nats => {
                events.nats_url = Some(node.url.parse()?);
                continue;
            }
        });
    }
    Ok(placed)
}

/// The local nodes that can run, each on the chain state the state
/// directory keeps for it, and the local Solana network's build when it
/// must be built first (in the background: the platform is ready without
/// it, and it joins once built); an error when no node can run.
async fn start_nodes(state: &StateDir, nats: bool) -> anyhow::Result<(Vec<nodes::Node>, Option<Building>)> {
    let building = match nodes::found(nodes::Kind::Solana) {
        None if nodes::solana_buildable() => {
            let log = state.file("solana-build.log");
            eprintln!(
                "{} joins once the local Solana network is built (in the background; its log: {})",
                seed::SOLANA_CHAIN,
                log.display()
            );
            Some(tokio::spawn(async move { nodes::build_solana_node(Some(&log)).await }))
        }
        _ => None,
    };
    let solana = async {
        if building.is_some() {
            return None;
        }
        Some(nodes::find(nodes::Kind::Solana).await)
    };
    let (anvil, solana) = tokio::join!(nodes::find(nodes::Kind::Anvil), solana);
    let (anvil_log, solana_log) = (state.file("anvil.log"), state.file("solana-node.log"));
    let (anvil_state, ledger) = (state.file("anvil-state.json"), state.file("solana-ledger.sqlite"));
    let (anvil, solana) = tokio::join!(
        async { Some(nodes::start_anvil(&missing(anvil, seed::EVM_CHAIN)?, &anvil_log, &anvil_state).await) },
        async {
            let bin = missing(solana?, seed::SOLANA_CHAIN)?;
            Some(nodes::start_solana(&bin, &solana_log, &ledger).await)
        },
    );
    let mut nodes: Vec<nodes::Node> = anvil.transpose()?.into_iter().chain(solana.transpose()?).collect();
    if nodes.is_empty() {
        bail!("neither local node can run: nothing to index (see above)");
    }
    if nats {
        let bin = nodes::find(nodes::Kind::Nats).await.map_err(anyhow::Error::msg)?;
        nodes.push(nodes::start_nats(&bin, &state.file("nats.log"), &state.file("nats")).await?);
    }
    Ok((nodes, building))
}

/// The local Solana network's build under way.
type Building = tokio::task::JoinHandle<Result<(), String>>;

/// The binary, or `None` after saying on standard error what is missing,
/// what installs it, and that `dev` runs without `chain`.
fn missing(found: Result<PathBuf, String>, chain: Chain) -> Option<PathBuf> {
    match found {
        Ok(bin) => Some(bin),
        Err(message) => {
            eprintln!("warning: {message}. Running without {chain}.");
            None
        }
    }
}
