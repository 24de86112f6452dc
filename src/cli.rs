//! The command line: `run`, `backfill`, `accounts`, `deposits`, `migrate`.

use std::{io::IsTerminal, path::PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::{
    account::{Account, AccountAddress, AccountStatus, AccountType, DEFAULT_ORGANIZATION},
    chain::{Chain, Family},
    config::{ChainConfig, Chains},
    deposit::Deposit,
    evm::EvmWatcher,
    solana::SolanaWatcher,
    store::{DEFAULT_DATABASE_URL, NewAccount, Store},
    watcher::WatchError,
};

#[derive(Debug, Parser)]
#[command(
    name = "custody-indexer",
    version,
    about = "Watches EVM chains and Solana for deposits to custody accounts"
)]
pub struct Cli {
    /// The deposit store: `sqlite://FILE` (created when missing) or `postgres://…`.
    #[arg(long, global = true, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, hide_env_values = true)]
    pub database_url: String,

    /// Log format on standard error.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// Where the chain files come from (`run`, `backfill`).
#[derive(Debug, Clone, Args)]
pub struct ChainFiles {
    /// A directory of chain files (`*.toml`) replacing the built-in ones.
    #[arg(long = "chains", value_name = "DIR", env = "CUSTODY_INDEXER_CHAINS")]
    pub dir: Option<PathBuf>,
}

impl ChainFiles {
    fn load(&self) -> anyhow::Result<Chains> {
        Chains::load(self.dir.as_deref()).context("loading chain files")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Follow every configured chain (or the named ones) until SIGINT or SIGTERM.
    Run {
        /// Index only this chain; repeat for several.
        #[arg(long = "chain", value_name = "CHAIN")]
        only: Vec<Chain>,
        #[command(flatten)]
        chain_files: ChainFiles,
    },
    /// Scan a historical block (slot) range, or a Solana address's signature
    /// history, for deposits, then exit. Idempotent.
    Backfill {
        #[arg(long)]
        chain: Chain,
        /// First block (slot) of the range.
        #[arg(long, required_unless_present = "address")]
        from: Option<u64>,
        /// Last block (slot) of the range (default: the highest confirmed one).
        #[arg(long, conflicts_with = "address")]
        to: Option<u64>,
        /// Solana: read this address's signature history instead of a slot range.
        #[arg(long, conflicts_with = "from")]
        address: Option<String>,
        /// Solana, with --address: start below this signature.
        #[arg(long, requires = "address")]
        before: Option<String>,
        /// Solana, with --address: stop at this signature.
        #[arg(long, requires = "address")]
        until: Option<String>,
        #[command(flatten)]
        chain_files: ChainFiles,
    },
    /// Register and list the accounts whose addresses are watched.
    #[command(subcommand)]
    Accounts(AccountsCommand),
    /// Show recorded deposits.
    #[command(subcommand)]
    Deposits(DepositsCommand),
    /// Apply the store's pending migrations, then exit.
    Migrate,
}

#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Register an account and the address it receives deposits on.
    Add(AddAccount),
    /// List accounts.
    List {
        #[arg(long)]
        organization: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct AddAccount {
    #[arg(long, default_value = DEFAULT_ORGANIZATION)]
    organization: String,
    #[arg(long)]
    account_id: String,
    #[arg(long)]
    identity_id: String,
    /// SEGREGATED or OMNIBUS (legacy ONCHAIN and LEDGER are accepted).
    #[arg(long = "type")]
    kind: AccountType,
    #[arg(long, default_value = "ACTIVE")]
    status: AccountStatus,
    /// The address deposits arrive at.
    #[arg(long)]
    address: String,
    /// The chains the address is valid on, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    chains: Vec<Chain>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum DepositsCommand {
    /// An account's deposits, newest first.
    List {
        #[arg(long)]
        account_id: String,
        #[arg(long)]
        json: bool,
    },
    /// One deposit by id.
    Get {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

impl Cli {
    pub async fn execute(self) -> anyhow::Result<()> {
        match self.command {
            Command::Migrate => {
                Store::open(&self.database_url).await?;
                println!("store is up to date");
            }
            Command::Run { only, chain_files } => {
                let chains = chain_files.load()?;
                let store = Store::open(&self.database_url).await?;
                run(store, chains, only).await?;
            }
            Command::Backfill { chain, from, to, address, before, until, chain_files } => {
                let config = chain_files.load()?.get(chain)?.clone();
                let store = Store::open(&self.database_url).await?;
                let range = match address {
                    Some(address) => Range::Address { address, before, until },
                    None => Range::Blocks { from: from.unwrap_or_default(), to },
                };
                backfill(store, config, range).await?;
            }
            Command::Accounts(command) => {
                let store = Store::open(&self.database_url).await?;
                accounts(&store, command).await?;
            }
            Command::Deposits(command) => {
                let store = Store::open(&self.database_url).await?;
                deposits(&store, command).await?;
            }
        }
        Ok(())
    }
}

async fn run(store: Store, chains: Chains, only: Vec<Chain>) -> anyhow::Result<()> {
    let selected: Vec<ChainConfig> = if only.is_empty() {
        chains.iter().cloned().collect()
    } else {
        only.iter().map(|c| chains.get(*c).cloned()).collect::<Result<_, _>>()?
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    let mut tasks = tokio::task::JoinSet::new();
    for config in selected {
        let store = store.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let chain = config.chain;
            let outcome = match config.family() {
                Family::Evm => match connect(config, store, &shutdown, EvmWatcher::connect).await? {
                    Some(watcher) => watcher.run(shutdown).await,
                    None => Ok(()),
                },
                Family::Solana => match connect(config, store, &shutdown, SolanaWatcher::connect).await? {
                    Some(watcher) => watcher.run(shutdown).await,
                    None => Ok(()),
                },
            };
            outcome.with_context(|| format!("{chain} watcher stopped"))
        });
    }
    if tasks.is_empty() {
        bail!("no chain to index");
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
            }
            Err(error) => return Err(error.into()),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(std::time::Duration::from_secs(60));
    }
}

async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        error!("cannot listen for signals");
        return;
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM: shutting down"),
        _ = int.recv() => info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}

/// What `backfill` reads.
enum Range {
    Blocks { from: u64, to: Option<u64> },
    Address { address: String, before: Option<String>, until: Option<String> },
}

async fn backfill(store: Store, config: ChainConfig, range: Range) -> anyhow::Result<()> {
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
            (watcher.backfill_address(&address, before, until, &progress).await?, "signatures")
        }
    };
    bar.finish_and_clear();
    let seconds = report.elapsed.as_secs_f64().max(1e-9);
    let range = if unit == "signatures" { "slots" } else { unit };
    println!(
        "{chain}: scanned {range} {}..={} ({} {unit} in {:.3} s, {:.0} {unit}/s): {} deposits found, {} new or updated",
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

async fn accounts(store: &Store, command: AccountsCommand) -> anyhow::Result<()> {
    match command {
        AccountsCommand::Add(add) => {
            let account = store
                .add_account(NewAccount {
                    id: add.account_id,
                    organization: add.organization,
                    identity_id: add.identity_id,
                    kind: add.kind,
                    status: add.status,
                    addresses: vec![AccountAddress { chains: add.chains, address: add.address }],
                })
                .await?;
            if add.json {
                println!("{}", serde_json::to_string_pretty(&account)?);
            } else {
                print_account(&account);
            }
        }
        AccountsCommand::List { organization, json } => {
            let accounts = store.accounts(organization.as_deref()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&accounts)?);
            } else if accounts.is_empty() {
                println!("no accounts");
            } else {
                accounts.iter().for_each(print_account);
            }
        }
    }
    Ok(())
}

fn print_account(account: &Account) {
    println!(
        "{} ({}, {}, identity {}, organization {})",
        account.id, account.kind, account.status, account.identity_id, account.organization
    );
    for address in &account.addresses {
        let chains: Vec<&str> = address.chains.iter().map(|c| c.as_str()).collect();
        println!("  {} on {}", address.address, chains.join(","));
    }
}

async fn deposits(store: &Store, command: DepositsCommand) -> anyhow::Result<()> {
    match command {
        DepositsCommand::List { account_id, json } => {
            store.account(&account_id).await?;
            let deposits = store.deposits_of_account(&account_id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&deposits)?);
            } else if deposits.is_empty() {
                println!("no deposits");
            } else {
                deposits.iter().for_each(print_deposit);
            }
        }
        DepositsCommand::Get { id, json } => {
            let deposit = store.deposit(&id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&deposit)?);
            } else {
                print_deposit(&deposit);
            }
        }
    }
    Ok(())
}

fn print_deposit(d: &Deposit) {
    println!(
        "{}  {:9}  {} {} on {}  from {}  tx {}  created {}",
        d.id,
        d.status.as_str(),
        d.amount,
        d.currency_symbol,
        d.destination_chain,
        d.source_address,
        d.transaction_hash,
        d.created_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    );
}
