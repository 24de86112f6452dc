//! The administrative commands: accounts, deposits, organizations, API keys,
//! the health check and `migrate`.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use super::{AccountsCommand, ApiKeysCommand, ChainFiles, DepositsCommand, OrganizationsCommand};
use crate::{
    account::{Account, AccountAddress, AccountType, DEFAULT_ORGANIZATION},
    api_key,
    audit::{Actor, newest},
    chain::Chain,
    config::Chains,
    deposits::health,
    deposits::resource::{Deposit, OwnTransfer, format_time},
    family::keys::account_addresses,
    keys::{KeyRef, accounts::add_account},
    operators::tenants,
    request_signature::PublicKey,
    store::{ApiKey, NewAccount, Store},
};

pub async fn accounts(store: &Store, command: AccountsCommand) -> anyhow::Result<()> {
    match command {
        AccountsCommand::Add(add) => {
            let watch_from = super::import::watch_from(add.from_block, add.from_time.as_deref(), &add.chains)
                .map_err(anyhow::Error::msg)?;
            let account = add_account(
                store,
                NewAccount {
                    watch_from,
                    id: add.account_id,
                    organization: add.organization,
                    identity_id: add.identity_id,
                    request_id: None,
                    kind: add.kind,
                    addresses: vec![AccountAddress { chains: add.chains, address: add.address }],
                },
            )
            .await?;
            if add.json {
                println!("{}", serde_json::to_string_pretty(&account)?);
            } else {
                print_account(&account);
            }
        }
        AccountsCommand::Create(create) => create_account(store, create).await?,
        AccountsCommand::Import { file } => {
            let imported = super::import::import(store, &file).await?;
            println!("imported {} accounts with {} addresses", imported.accounts, imported.addresses);
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

#[derive(Debug, Args)]
pub struct CreateAccount {
    #[arg(long, default_value = DEFAULT_ORGANIZATION)]
    organization: String,
    /// The account's id (default: a new UUID).
    #[arg(long)]
    account_id: Option<String>,
    #[arg(long)]
    identity_id: String,
    /// SEGREGATED (its own keys) or OMNIBUS (the omnibus wallet).
    #[arg(long = "type")]
    kind: AccountType,
    #[command(flatten)]
    chain_files: ChainFiles,
    /// Print the Account resource as JSON.
    #[arg(long)]
    json: bool,
}

/// `accounts create`: an account whose keys the service holds.
pub async fn create_account(store: &Store, create: CreateAccount) -> anyhow::Result<()> {
    let chains = create.chain_files.load()?;
    let signer = super::transfers::signer(store.environment().await?)?;
    let new = NewAccount {
        watch_from: Default::default(),
        id: create.account_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        organization: create.organization,
        identity_id: create.identity_id,
        request_id: None,
        kind: create.kind,
        addresses: Vec::new(),
    };
    let account = match create.kind {
        AccountType::Segregated => {
            crate::keys::accounts::create(store, signer.as_ref(), chains.iter().map(|c| c.chain), new).await?
        }
        AccountType::Omnibus => {
            let addresses =
                account_addresses(signer.as_ref(), chains.iter().map(|c| c.chain), KeyRef::Omnibus)?;
            add_account(store, NewAccount { addresses, ..new })
                .await
                .context("the omnibus wallet's addresses belong to one account")?
        }
    };
    if create.json {
        println!("{}", serde_json::to_string_pretty(&account)?);
    } else {
        print_account(&account);
    }
    Ok(())
}

pub(super) fn print_account(account: &Account) {
    println!(
        "{} ({}, {}, identity {}, organization {})",
        account.id, account.kind, account.status, account.identity_id, account.organization
    );
    for address in &account.addresses {
        let chains: Vec<&str> = address.chains.iter().map(|c| c.as_str()).collect();
        println!("  {} on {}", address.address, chains.join(","));
    }
}

pub async fn deposits(store: &Store, command: DepositsCommand) -> anyhow::Result<()> {
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
        DepositsCommand::Platform { account_id, json } => {
            let own = store.own_transfers(account_id.as_deref()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&own)?);
            } else if own.is_empty() {
                println!("no transfers of the platform's own");
            } else {
                own.iter().for_each(print_own);
            }
        }
    }
    Ok(())
}

fn print_own(o: &OwnTransfer) {
    println!(
        "{:12}  {} {} on {} to {} ({})  from {}  tx {}  block {} at {}",
        o.kind.as_str(),
        o.amount,
        o.currency_symbol,
        o.chain,
        o.account_address,
        o.account_id,
        o.source_address,
        o.transaction_hash,
        o.block_number,
        format_time(&o.created_at)
    );
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
        format_time(&d.created_at)
    );
}

pub async fn organizations(store: &Store, command: OrganizationsCommand) -> anyhow::Result<()> {
    match command {
        OrganizationsCommand::Create { id, name, contact_email } => {
            let made = (id.as_str(), name.as_deref(), contact_email.as_deref());
            let organization = tenants::create_organization(store, made, &Actor::local(None)).await?;
            println!("created organization {} ({})", organization.id, organization.name);
        }
        OrganizationsCommand::Contact { .. } => {
            anyhow::bail!("organizations contact goes through the service: pass --server URL")
        }
        OrganizationsCommand::List { json } => {
            let organizations = store.organizations().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&organizations)?);
            } else {
                for o in &organizations {
                    println!("{}  {}  created {}", o.id, o.name, format_time(&o.created_at));
                }
            }
        }
    }
    Ok(())
}

pub async fn api_keys(store: &Store, command: ApiKeysCommand) -> anyhow::Result<()> {
    api_key::pepper::for_keys(store).await?;
    match command {
        ApiKeysCommand::Create { organization, name } => {
            console_keeps_keys(store, &organization).await?;
            let (key, secret) =
                api_key::manage::create(store, &organization, &name, &Actor::local(None)).await?;
            println!("created API key {} ({}) for organization {}", key.id, key.name, key.organization_id);
            println!("the secret below is shown once; store it now:");
            println!("{}", secret.token);
        }
        ApiKeysCommand::List { organization, json } => {
            let keys = store.api_keys(organization.as_deref()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
            } else if keys.is_empty() {
                println!("no API keys");
            } else {
                keys.iter().for_each(print_api_key);
            }
        }
        ApiKeysCommand::Revoke { id } => {
            let key = api_key::manage::revoke(store, &id, &Actor::local(None)).await?;
            print_api_key(&key);
        }
        ApiKeysCommand::Pair { id, public_key_file } => {
            let text = std::fs::read_to_string(&public_key_file)
                .with_context(|| format!("cannot read {}", public_key_file.display()))?;
            let public_key =
                PublicKey::from_pem(&text).with_context(|| format!("{}", public_key_file.display()))?;
            console_keeps_keys(store, &store.api_key(&id).await?.organization_id).await?;
            let key = api_key::manage::pair(store, &id, &public_key, &Actor::local(None)).await?;
            print_api_key(&key);
        }
        ApiKeysCommand::Unpair { id } => {
            console_keeps_keys(store, &store.api_key(&id).await?.organization_id).await?;
            let key = api_key::manage::unpair(store, &id, &Actor::local(None)).await?;
            print_api_key(&key);
        }
    }
    Ok(())
}

/// On a `production` store, an organization with console users makes,
/// pairs and unpairs its API keys itself, in the console: never from the
/// store (whoever holds the database URL would hold the tenant's money).
/// Revoking stays open to operators.
async fn console_keeps_keys(store: &Store, organization: &str) -> anyhow::Result<()> {
    let production = store.environment().await? == Some(crate::environment::Environment::Production);
    if production && !store.console_users_of(organization).await?.is_empty() {
        anyhow::bail!(
            "organization {organization} has console users: on a production store its own admins make, pair and \
             unpair its API keys in the console (/console/keys)"
        );
    }
    Ok(())
}

fn print_api_key(key: &ApiKey) {
    let state = match &key.revoked_at {
        Some(at) => format!("revoked {}", format_time(at)),
        None => "active".to_string(),
    };
    let signing = match (key.signature_algorithm, &key.paired_at) {
        (Some(algorithm), Some(at)) => format!("paired {algorithm} {}", format_time(at)),
        _ => "not paired".to_string(),
    };
    println!(
        "{}  {:?}  organization {}  created {}  {state}  {signing}",
        key.id,
        key.name,
        key.organization_id,
        format_time(&key.created_at)
    );
}

/// Where `health` reads the audit log's signed checkpoints, and the key
/// and the period it judges them by (`run`'s own settings).
#[derive(Debug, Clone, Args)]
pub struct AuditCheck {
    #[command(flatten)]
    pub audit: crate::service::options::AuditOptions,
    /// The NATS servers whose events stream holds the checkpoints `run`
    /// publishes (`run --nats-url`).
    #[arg(long, value_name = "URL", env = "CUSTODY_INDEXER_NATS_URL", hide_env_values = true)]
    pub nats_url: Option<crate::events::nats::NatsUrl>,
    /// The checkpoint key's public key (base64, as `audit keygen` prints
    /// it): a checkpoint is verified with it, never with a key it carries.
    #[arg(long, value_name = "KEY", env = crate::audit::checkpoint::PUBLIC_KEY_ENV)]
    pub audit_public_key: Option<String>,
}

impl AuditCheck {
    /// The age of the newest checkpoint whose signature verifies, judged
    /// against the period; not checked without a place and the public key.
    async fn check(&self) -> anyhow::Result<(newest::Checked, Option<crate::audit::checkpoint::Checkpoint>)> {
        let kept =
            newest::Kept { dir: self.audit.audit_checkpoint_dir.as_deref(), nats: self.nats_url.as_ref() };
        let placed = kept.dir.is_some() || kept.nats.is_some();
        let public = match &self.audit_public_key {
            Some(text) if placed => crate::audit::checkpoint::parse_public_key(text)?,
            None if placed => {
                let why = format!(
                    "audit: checkpoints are verified with {} (or --audit-public-key), never a key they carry",
                    crate::audit::checkpoint::PUBLIC_KEY_ENV
                );
                return Ok((newest::Checked::not_checked(vec![why]), None));
            }
            _ => return Ok((newest::Checked::not_checked(Vec::new()), None)),
        };
        let (found, warnings) = newest::find(&kept, &public).await;
        let every = std::time::Duration::from_secs(self.audit.audit_checkpoint_secs);
        Ok((newest::judge(found.as_ref(), every, crate::store::now_micros(), warnings), found))
    }
}

/// `health --json`: the report, and what was found of the checkpoints.
#[derive(serde::Serialize)]
struct Printed<'a> {
    #[serde(flatten)]
    report: &'a health::Report,
    audit: &'a newest::Checked,
}

/// Prints the health report; the exit code says whether all is well. Reads
/// the store without migrating or creating it, and the audit checkpoints
/// where `audit` says they are kept.
pub async fn health(
    url: &str,
    (chains, required): (&Chains, &[Chain]),
    audit: &AuditCheck,
    json: bool,
) -> anyhow::Result<ExitCode> {
    for chain in required {
        chains.get(*chain)?;
    }
    let (audit, newest) = audit.check().await?;
    let mut report = match Store::connect_existing(url).await {
        Ok(store) => {
            let mut report = health::check(&store, chains, required).await;
            // The log against the newest checkpoint: restored, until recovered.
            // and what `run` found (the chains' witness among them).
            // `/readyz` stays ready: only transfers wait.
            let mut restored: Vec<String> = match crate::restore::read(&store, newest.as_ref()).await {
                Ok(witness) => witness.line().into_iter().collect(),
                Err(error) => {
                    report.warnings.push(format!("restore: the audit log cannot be read: {error}"));
                    Vec::new()
                }
            };
            let found = report.conditions.iter().filter(|c| c.kind == crate::restore::watch::CONDITION);
            for condition in found {
                if !restored.contains(&condition.message) {
                    restored.push(condition.message.clone());
                }
            }
            report.healthy &= restored.is_empty();
            report.problems.extend(restored);
            report
        }
        Err(error) => health::unreachable(error),
    };
    if let Some(problem) = &audit.problem {
        report.problems.push(problem.clone());
        report.healthy = false;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&Printed { report: &report, audit: &audit })?);
    } else {
        print_health(&report, &audit);
    }
    Ok(if report.healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_health(report: &health::Report, audit: &newest::Checked) {
    let now = report.checked_at;
    println!("store: {}", if report.store.reachable { "reachable" } else { "UNREACHABLE" });
    let environment = report.environment.map_or("not started yet", |e| e.as_str());
    println!("environment: {environment}");
    for c in &report.chains {
        let number = |n: Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
        let age =
            c.last_success_at.map_or("never".to_string(), |at| format!("{}s ago", (now - at).num_seconds()));
        println!(
            "{:<17} {:<9} head {}  indexed {}  lag {} (limit {})  last success {age}",
            c.chain.as_str(),
            c.status.as_str(),
            number(c.head),
            number(c.indexed),
            number(c.lag),
            c.lag_limit(),
        );
        if c.addresses_catching_up > 0 {
            let from = c.catching_up_from.map_or(String::new(), |b| format!(" from block {b}"));
            println!("  {} addresses catching up{from}", c.addresses_catching_up);
        }
        if let Some(reconciled) = &c.reconciled {
            println!("  {}", reconciled.line());
        }
        if let Some(stop) = &c.stop {
            println!("  STOPPED at {} by {}: {}", format_time(&stop.stopped_at), stop.instance, stop.reason);
            println!("  resume with `custody-indexer chains resume {}`", c.chain);
        }
        for w in &c.workers {
            let state = if w.held { "held by" } else { "LAPSED, last held by" };
            println!("  {:<7} {state} {} (epoch {})", w.kind.as_str(), w.instance, w.epoch);
        }
        for warning in &c.warnings {
            println!("  warning: {warning}");
        }
    }
    for condition in report.conditions.iter().filter(|c| c.chain.is_none()) {
        // An attestation is shown, not warned of.
        if condition.kind == crate::keys::rules::KEYS_ATTESTED {
            println!("{}", condition.message);
        } else {
            println!("warning: {}", condition.message);
        }
    }
    for warning in report.warnings.iter().filter(|w| w.contains("admin operator key")) {
        println!("warning: {warning}");
    }
    println!("{}", audit.line());
    for warning in &audit.warnings {
        println!("warning: {warning}");
    }
    if report.healthy {
        println!("healthy");
    } else {
        for problem in &report.problems {
            println!("unhealthy: {problem}");
        }
    }
}

/// `migrate`: the store brought to this release; with `dry_run`, what it
/// lacks printed and nothing changed.
pub async fn migrate(url: &str, dry_run: bool) -> anyhow::Result<()> {
    if dry_run {
        let pending = crate::store::Store::open_as_is(url).await?.pending_migrations().await?;
        if pending.is_empty() {
            println!("nothing to apply");
        }
        for migration in pending {
            println!("{migration}");
        }
        return Ok(());
    }
    let store = crate::store::Store::open(url).await?;
    let adopted = crate::audit::adopt::adopt(&store).await?;
    if adopted > 0 {
        println!("{adopted} operators and keys adopted into the audit log");
    }
    println!("store is up to date");
    Ok(())
}
