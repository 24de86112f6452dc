//! The command line: `run`, `dev`, `serve`, `backfill`, `health`, `chains`, `identities`, `accounts`,
//! `deposits`, `organizations`, `api-keys`, `webhooks`, `events`, `wallets`, `gas`,
//! `limits`, `migrate`.

mod admin;
mod audit;
mod bank;
mod chains;
mod conversions;
mod decider;
pub mod events;
mod identities;
mod import;
mod index;
mod issuance;
mod keys;
mod operator_changes;
mod operators;
mod reconcile;
mod restores;
mod server;
mod transfers;
mod users;
pub mod webhooks;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{
    account::{AccountType, DEFAULT_ORGANIZATION},
    chain::Chain,
    config::Chains,
    service::{
        self,
        options::{ApiOptions, DeliveryOptions, EventOptions, InstanceOptions},
    },
    store::{DEFAULT_DATABASE_URL, Store},
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

/// Where the chain files come from.
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
    /// Follow every configured chain (or the named ones) and serve the HTTP
    /// API until SIGINT, SIGTERM or SIGHUP.
    Run {
        /// Index only this chain; repeat for several.
        #[arg(long = "chain", value_name = "CHAIN")]
        only: Vec<Chain>,
        #[command(flatten)]
        chain_files: ChainFiles,
        #[command(flatten)]
        api: ApiOptions,
        #[command(flatten)]
        delivery: DeliveryOptions,
        #[command(flatten)]
        events: EventOptions,
        #[command(flatten)]
        instance: InstanceOptions,
        /// Do not migrate: open a store `migrate` brought to this release
        /// (refused otherwise), as a database role without DDL rights.
        #[arg(long)]
        no_migrate: bool,
    },
    /// The whole platform offline, in one command: local EVM and Solana
    /// nodes, USDC issued by the platform on each, a seeded organization,
    /// identity and account, and `run` on a SQLite store in a state
    /// directory, until SIGINT, SIGTERM or SIGHUP. `dev deposit` sends the
    /// account a deposit (USDC as a simulated wire the platform mints).
    Dev(crate::dev::DevCommand),
    /// Serve the HTTP API from the store without indexing.
    Serve {
        /// A chain `/readyz` requires to be healthy; repeat for several
        /// (default: every chain with a recorded scan).
        #[arg(long = "chain", value_name = "CHAIN")]
        required: Vec<Chain>,
        #[command(flatten)]
        chain_files: ChainFiles,
        #[command(flatten)]
        api: ApiOptions,
        /// Do not migrate (see `run --no-migrate`).
        #[arg(long)]
        no_migrate: bool,
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
    /// Compare, at one height, every watched address's balance of each asset
    /// on chain with the ledger (its baseline, confirmed deposits and what
    /// the platform sent), locating each difference to the blocks where it
    /// arose. Exit 0 when everything agrees, 1 when something differs, 2
    /// when a read failed.
    Reconcile(reconcile::ReconcileArgs),
    /// Print each chain's indexing state from the store; exit 0 when every
    /// chain is healthy, 1 (with the reasons) when one lags, is stale, or the
    /// store is unreachable.
    Health {
        /// A chain that must be healthy; repeat for several (default: every
        /// chain with a recorded scan).
        #[arg(long = "chain", value_name = "CHAIN")]
        required: Vec<Chain>,
        #[command(flatten)]
        chain_files: ChainFiles,
        /// The audit log's checkpoints: their age from their signatures.
        #[command(flatten)]
        audit: admin::AuditCheck,
        #[arg(long)]
        json: bool,
    },
    /// Resume a chain whose watcher stopped, and list its stops.
    #[command(subcommand)]
    Chains(chains::ChainsCommand),
    /// Register and list the accounts whose addresses are watched.
    #[command(subcommand)]
    Accounts(AccountsCommand),
    /// Register identities and act on them as compliance staff: every action
    /// is recorded with who took it and why.
    #[command(subcommand)]
    Identities(identities::IdentitiesCommand),
    /// The bank's files: each credit of a camt.054 notification applied in
    /// the wing it belongs to.
    #[command(subcommand)]
    Bank(bank::BankCommand),
    /// Issuance: record and approve wires, follow mints, return the dollars
    /// of failed ones.
    #[command(subcommand)]
    Issuance(issuance::IssuanceCommand),
    /// Conversions: record wires to virtual accounts, the bank's answers
    /// to virtual accounts, and show conversions.
    #[command(subcommand)]
    Conversions(conversions::ConversionsCommand),
    /// Show recorded deposits.
    #[command(subcommand)]
    Deposits(DepositsCommand),
    /// Create and list organizations: each holds accounts and API keys.
    #[command(subcommand)]
    Organizations(OrganizationsCommand),
    /// Create, list, revoke API keys; pair them with public keys for signed requests.
    #[command(subcommand, name = "api-keys")]
    ApiKeys(ApiKeysCommand),
    /// Register webhooks, inspect and re-send deliveries, verify signatures.
    #[command(subcommand)]
    Webhooks(webhooks::WebhooksCommand),
    /// The outbox: its sinks' cursors and its retention.
    #[command(subcommand)]
    Events(events::EventsCommand),
    /// The platform's wallets: what to fund.
    #[command(subcommand)]
    Wallets(transfers::WalletsCommand),
    /// Where the platform's keys live: make them there, or move keys
    /// derived from the mnemonic into a pkcs11 token.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Network fees paid: per organization against its credit, and the
    /// platform's own.
    #[command(subcommand)]
    Gas(transfers::GasCommand),
    /// Transaction-limit policies of transfers.
    #[command(subcommand)]
    Limits(transfers::LimitsCommand),
    /// Operators: the people who decide, their roles and keys.
    #[command(subcommand)]
    Operators(operators::OperatorsCommand),
    /// The audit log of every decision: list it, verify it, sign
    /// checkpoints of it.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// A tenant's console users: invite one (through the service).
    #[command(subcommand)]
    Users(users::UsersCommand),
    /// Transfers after a restore of the store: `recover` a chain.
    #[command(subcommand)]
    Transfers(restores::TransfersCommand),
    /// Write an online, consistent copy of a SQLite store to FILE (a new
    /// file), while it runs. A PostgreSQL store is backed up with
    /// `pg_basebackup` and WAL archiving (docs/operations.md).
    Backup { file: PathBuf },
    /// Apply the store's pending migrations and put the audit log's guards
    /// in place, then exit (with the tables' owner's DATABASE_URL).
    Migrate {
        /// Print each migration the store lacks (`NNNN_description`), or
        /// `nothing to apply`, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Register an account and the address it receives deposits on (watch
    /// only: the service holds no key for it).
    Add(AddAccount),
    /// Create an account whose keys the service holds: a SEGREGATED account
    /// gets its own EVM and Solana addresses derived from the mnemonic; an
    /// OMNIBUS account is the omnibus wallet. It can send transfers.
    Create(admin::CreateAccount),
    /// Register many watch-only accounts from a file: CSV with a header line
    /// (`account_id,identity_id,type,address,chains` and optionally
    /// `organization,from_block,from_time`; chains separated by `;`)
    /// or JSON lines with the same fields. The file is checked whole first (a
    /// bad line is named) and imported in one transaction: all or nothing.
    Import {
        /// The file (`.csv`, or JSON lines).
        file: std::path::PathBuf,
    },
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
    /// SEGREGATED or OMNIBUS. The account's status follows its identity's.
    #[arg(long = "type")]
    kind: AccountType,
    /// The address deposits arrive at.
    #[arg(long)]
    address: String,
    /// The chains the address is valid on, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    chains: Vec<Chain>,
    /// Watch the address from this block (Solana: slot) of its chain on,
    /// instead of from its registration: deposits since then are found.
    #[arg(long, visible_alias = "from-slot", value_name = "BLOCK")]
    from_block: Option<u64>,
    /// Watch the address from this time on (RFC 3339, e.g.
    /// 2026-11-01T00:00:00Z), resolved to a block by block time.
    #[arg(long, value_name = "TIME", conflicts_with = "from_block")]
    from_time: Option<String>,
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
    /// What the platform's own transactions (gas top-ups, cancellations,
    /// nonce fillers) moved into watched addresses, newest first: never
    /// deposits, listed here for operators.
    Platform {
        /// One account's only.
        #[arg(long)]
        account_id: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum OrganizationsCommand {
    /// Create an organization (on the store; audited).
    Create {
        /// Letters, digits, `-` and `_`, up to 64.
        #[arg(long)]
        id: String,
        /// A display name (default: the id).
        #[arg(long)]
        name: Option<String>,
        /// Its contact address: where a production invitation of its first
        /// console admin is mailed.
        #[arg(long)]
        contact_email: Option<String>,
    },
    /// Set an organization's contact address, through the service by an
    /// operator `admin`: a change another admin approves in `production`.
    Contact {
        id: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        server: server::ServerArg,
    },
    /// List organizations.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApiKeysCommand {
    /// Create a key; its secret is printed once, alone on the last line.
    Create {
        #[arg(long)]
        organization: String,
        /// What the key is for; required.
        #[arg(long)]
        name: String,
    },
    /// List keys: names, ids, creation and revocation times, never secrets.
    List {
        #[arg(long)]
        organization: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key: every later request with it gets `401`.
    Revoke { id: String },
    /// Pair a key with a public key: from then on every request with the key
    /// must carry `X-Request-Signature`, a JWT signed by its private key
    /// (ES256 for a P-256 key, EdDSA for an Ed25519 key). Pairing again
    /// replaces the public key.
    Pair {
        id: String,
        /// The public key, SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
        #[arg(long, value_name = "FILE")]
        public_key_file: std::path::PathBuf,
    },
    /// Remove a key's public key: its requests need no signature any more.
    Unpair { id: String },
}

impl Cli {
    pub async fn execute(self) -> anyhow::Result<std::process::ExitCode> {
        let url = self.database_url;
        match self.command {
            Command::Migrate { dry_run } => admin::migrate(&url, dry_run).await?,
            Command::Run { only, chain_files, api, delivery, events, instance, no_migrate } => {
                let chains = chain_files.load()?;
                let service = service::Service { chains, only, api, delivery, events, instance, no_migrate };
                service::run_service(&url, service, service::Launch::from_env()?).await?;
            }
            Command::Dev(command) => return crate::dev::execute(command).await,
            Command::Serve { required, chain_files, api, no_migrate } => {
                let chains = chain_files.load()?;
                service::serve(&url, chains, required, api, no_migrate).await?;
            }
            Command::Backfill { chain, from, to, address, before, until, chain_files } => {
                let config = chain_files.load()?.get(chain)?.clone();
                let range = match address {
                    Some(address) => index::Range::Address { address, before, until },
                    None => index::Range::Blocks { from: from.unwrap_or_default(), to },
                };
                index::backfill(Store::open(&url).await?, config, range).await?;
            }
            Command::Reconcile(args) => {
                let chains = args.chain_files.load()?;
                return reconcile::run(&Store::open(&url).await?, args, &chains).await;
            }
            Command::Health { required, chain_files, audit, json } => {
                let chains = chain_files.load()?;
                return admin::health(&url, (&chains, &required), &audit, json).await;
            }
            Command::Chains(command) => chains::run(&Store::open(&url).await?, command).await?,
            Command::Accounts(command) => admin::accounts(&Store::open(&url).await?, command).await?,
            Command::Identities(command) => identities::run(&identities::open(&url).await?, command).await?,
            Command::Issuance(command @ issuance::IssuanceCommand::Deploy { .. }) => {
                issuance::deploy(command).await?
            }
            Command::Issuance(issuance::IssuanceCommand::Reconcile { chain, json, chain_files }) => {
                let chains = chain_files.load()?;
                return issuance::reconcile(&Store::open(&url).await?, chain, json, &chains).await;
            }
            Command::Issuance(command) => issuance::run(&identities::open(&url).await?, command).await?,
            Command::Bank(command) => bank::run(&identities::open(&url).await?, command).await?,
            Command::Conversions(command) => {
                conversions::run(&identities::open(&url).await?, command).await?
            }
            Command::Deposits(command) => admin::deposits(&Store::open(&url).await?, command).await?,
            Command::Organizations(OrganizationsCommand::Contact { id, email, reason, server }) => {
                users::contact(&id, &email, reason.as_deref(), &server).await?
            }
            Command::Organizations(command) => {
                // Unlocked only on a store that seals (its audit entries
                // are sealed then); unlocking another would give it a key.
                let store = Store::open(&url).await?;
                let store = match store.keeps_pii_key().await? {
                    Some(_) => identities::unlock(store).await?,
                    None => store,
                };
                admin::organizations(&store, command).await?
            }
            Command::ApiKeys(command) => admin::api_keys(&Store::open(&url).await?, command).await?,
            Command::Webhooks(command) => return webhooks::webhooks(&url, command).await,
            Command::Events(command) => events::run(&Store::open(&url).await?, command).await?,
            Command::Wallets(command) => transfers::wallets(command)?,
            Command::Keys(command) => return keys::run(&Store::open(&url).await?, command).await,
            Command::Gas(command) => transfers::gas(&Store::open(&url).await?, command).await?,
            Command::Limits(command) => transfers::limits(&Store::open(&url).await?, command).await?,
            Command::Operators(command) => operators::run(&url, command).await?,
            Command::Audit(command) => return audit::run(&url, command).await,
            Command::Transfers(command) => restores::transfers(&url, command).await?,
            Command::Backup { file } => restores::backup(&url, &file).await?,
            Command::Users(command) => users::run(command).await?,
        }
        Ok(std::process::ExitCode::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_token_never_shows_in_the_configurations_debug() {
        let token = "0123456789abcdef0123456789abcdef-not-for-logs";
        for command in ["run", "serve"] {
            let cli = Cli::try_parse_from(["custody-indexer", command, "--operator-token", token]).unwrap();
            let debug = format!("{cli:?}");
            assert!(debug.contains("OperatorToken(…)") && !debug.contains(token), "{debug}");
        }
        let refused = Cli::try_parse_from(["custody-indexer", "serve", "--operator-token", "short-secret"]);
        let message = refused.unwrap_err().to_string();
        assert!(message.contains("--operator-token") && !message.contains("short-secret"), "{message}");
    }
}
