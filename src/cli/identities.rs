//! `identities`: register identities onboarded elsewhere, inspect them, and
//! the compliance staff's actions (`approve`, `reject`, `suspend`,
//! `reinstate`, `terminate`, `rfi raise`, `rfi fulfil`, `fiat enable`,
//! `fiat disable`), each recorded in the identity's audit trail with `--by`
//! and `--reason` and announced by an `identity_status_update` when the
//! status or sub-status changes.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::ChainFiles;
use crate::identity::change::Change;
use crate::{
    account::DEFAULT_ORGANIZATION,
    chain::Chain,
    config::Chains,
    environment::Environment,
    identity::{Event, State, Status, Type, sub_status_str},
    pii::{Key, KeySource},
    store::{NewIdentity, Registered, Settlement, Store},
    transfers::{TransferStatus, failure},
};

#[derive(Debug, Subcommand)]
pub enum IdentitiesCommand {
    /// Register an identity onboarded outside this service (e.g. moved from
    /// another platform), in the status it has there.
    Import {
        #[arg(long, default_value = DEFAULT_ORGANIZATION)]
        organization: String,
        #[arg(long)]
        id: String,
        /// INDIVIDUAL or BUSINESS.
        #[arg(long = "type")]
        kind: Type,
        /// A label (default: the id).
        #[arg(long)]
        label: Option<String>,
        /// ACTIVE, SUSPENDED or PENDING_ONBOARDING (then at CREATED).
        #[arg(long, default_value = "ACTIVE")]
        status: Status,
        #[command(flatten)]
        who: Who,
    },
    /// One identity with its accounts and audit trail.
    Show {
        id: String,
        #[arg(long, default_value = DEFAULT_ORGANIZATION)]
        organization: String,
        #[arg(long)]
        json: bool,
    },
    /// Compliance approval of an identity in onboarding: ACTIVE.
    Approve(Action),
    /// KYC/KYB denial of an identity in onboarding: REJECTED.
    Reject(Action),
    /// Suspension of an ACTIVE identity: its accounts are FROZEN and its
    /// transfers not yet handed to a chain fail with ACCOUNT_NOT_ACTIVE.
    Suspend(Action),
    /// Reinstatement of a SUSPENDED identity to ACTIVE.
    Reinstate {
        #[command(flatten)]
        action: Action,
        /// Reinstate with RFI_REQUIRED, keeping or opening an RFI.
        #[arg(long)]
        rfi: bool,
    },
    /// Permanent closure of the identity and all its accounts (CLOSED).
    Terminate(Action),
    /// Requests for information.
    #[command(subcommand)]
    Rfi(RfiCommand),
    /// The fiat entitlement (`fiat_operations_enabled`): whether the
    /// identity may register bank accounts and mint instructions, and have
    /// its wires minted. Independent of the status; recorded in the audit
    /// trail; no `identity_status_update` (the status does not change).
    #[command(subcommand)]
    Fiat(FiatCommand),
}

#[derive(Debug, Subcommand)]
pub enum FiatCommand {
    /// Grant it.
    Enable(FiatAction),
    /// Withdraw it: wires arriving from now on are returned, not minted.
    Disable(FiatAction),
}

#[derive(Debug, Clone, Args)]
pub struct FiatAction {
    id: String,
    #[arg(long, default_value = DEFAULT_ORGANIZATION)]
    organization: String,
    #[command(flatten)]
    who: Who,
}

#[derive(Debug, Subcommand)]
pub enum RfiCommand {
    /// Raise an RFI: the sub-status becomes RFI_REQUIRED.
    Raise(Action),
    /// Fulfil the open RFI: back to the onboarding step, or no sub-status.
    Fulfil(Action),
}

/// Who acts and why: both recorded.
#[derive(Debug, Clone, Args)]
pub struct Who {
    /// The compliance officer acting.
    #[arg(long)]
    by: String,
    /// Why; sent to the client as `status_reason`.
    #[arg(long)]
    reason: String,
}

#[derive(Debug, Clone, Args)]
pub struct Action {
    id: String,
    #[arg(long, default_value = DEFAULT_ORGANIZATION)]
    organization: String,
    #[command(flatten)]
    who: Who,
    #[command(flatten)]
    chain_files: ChainFiles,
}

/// The store for an operator's command, its personal data readable with
/// `CUSTODY_INDEXER_PII_KEY`, or else with the key a sandbox store keeps
/// (generated if it has none yet, as `run` would). Without either, what
/// reads or writes personal data is refused, naming the variable.
pub async fn open(url: &str) -> anyhow::Result<Store> {
    let store = Store::open(url).await?;
    let source = match Key::from_env()? {
        Some(key) => KeySource::Given(key),
        None if store.environment().await? == Some(Environment::Sandbox)
            && store.keeps_pii_key().await? != Some(false) =>
        {
            KeySource::Kept
        }
        None => return Ok(store),
    };
    Ok(store.unlock_pii(source).await?)
}

pub async fn run(store: &Store, command: IdentitiesCommand) -> anyhow::Result<()> {
    let (action, event) = match command {
        IdentitiesCommand::Import { organization, id, kind, label, status, who } => {
            return import(store, organization, id, kind, label, status, who).await;
        }
        IdentitiesCommand::Show { id, organization, json } => {
            return show(store, &organization, &id, json).await;
        }
        IdentitiesCommand::Fiat(command) => return fiat(store, command).await,
        IdentitiesCommand::Approve(action) => (action, Event::Approved),
        IdentitiesCommand::Reject(action) => (action, Event::Denied),
        IdentitiesCommand::Suspend(action) => (action, Event::Suspended),
        IdentitiesCommand::Reinstate { action, rfi } => {
            (action, if rfi { Event::ReinstatedWithRfi } else { Event::Reinstated })
        }
        IdentitiesCommand::Terminate(action) => (action, Event::Terminated),
        IdentitiesCommand::Rfi(RfiCommand::Raise(action)) => (action, Event::RfiRaised),
        IdentitiesCommand::Rfi(RfiCommand::Fulfil(action)) => (action, Event::RfiFulfilled),
    };
    let chains = action.chain_files.load()?;
    let actor = format!("operator:{}", action.who.by);
    let decider = crate::audit::Actor::local(Some(action.who.by.clone()));
    let change = Change {
        organization: &action.organization,
        identity_id: &action.id,
        event,
        actor: &actor,
        reason: Some(&action.who.reason),
        decider: Some(&decider),
    };
    let unsent = |chain: Chain| not_active(&chains, chain);
    let transition = crate::identity::change::change(store, &change, &unsent).await?;
    println!(
        "identity {}: {}/{} -> {}/{}",
        action.id,
        transition.previous_status(),
        sub_status_str(transition.previous_sub_status()),
        transition.status(),
        sub_status_str(transition.sub_status())
    );
    Ok(())
}

/// The failure of a transfer whose account can no longer send.
async fn fiat(store: &Store, command: FiatCommand) -> anyhow::Result<()> {
    let (action, enabled) = match command {
        FiatCommand::Enable(action) => (action, true),
        FiatCommand::Disable(action) => (action, false),
    };
    let actor = format!("operator:{}", action.who.by);
    let changed =
        store.set_fiat_enabled(&action.organization, &action.id, enabled, &actor, &action.who.reason).await?;
    let what = if enabled { "enabled" } else { "disabled" };
    if changed {
        println!("identity {}: fiat operations {what}", action.id);
    } else {
        println!("identity {}: fiat operations were already {what}; nothing recorded", action.id);
    }
    Ok(())
}

fn not_active(chains: &Chains, chain: Chain) -> Settlement {
    let config = chains.get(chain).ok();
    Settlement {
        status: TransferStatus::Failed,
        transaction_hash: None,
        failure: Some(failure(
            "ACCOUNT_NOT_ACTIVE",
            "the account's identity can no longer transact; the transfer was not submitted",
        )),
        fees: Vec::new(),
        native_symbol: config.map(|c| c.native.symbol.clone()).unwrap_or_default(),
        native_decimals: config.map_or(0, |c| c.native.decimals),
        usd_micros_per_coin: config.and_then(|c| c.transfers.native_usd_micros()).unwrap_or_default(),
    }
}

async fn import(
    store: &Store,
    organization: String,
    id: String,
    kind: Type,
    label: Option<String>,
    status: Status,
    who: Who,
) -> anyhow::Result<()> {
    let state = match status {
        Status::Active => State::Active { rfi: false },
        Status::Suspended => State::Suspended { rfi: false },
        Status::PendingOnboarding => State::CREATED,
        other => {
            anyhow::bail!("an identity is imported ACTIVE, SUSPENDED or PENDING_ONBOARDING, not {other}")
        }
    };
    let new = NewIdentity {
        organization,
        label: label.unwrap_or_else(|| id.clone()).into(),
        id,
        request_id: None,
        kind,
        state,
        actor: format!("operator:{} ({})", who.by, who.reason),
    };
    match store.create_identity(&new).await.context("registering the identity")? {
        Registered::New(identity) | Registered::Existing(identity) => {
            println!("identity {} {} {}", identity.id, identity.kind, identity.status)
        }
    }
    Ok(())
}

async fn show(store: &Store, organization: &str, id: &str, json: bool) -> anyhow::Result<()> {
    let identity = store.identity(organization, id).await?;
    let actions = store.identity_actions(organization, id).await?;
    if json {
        let value = serde_json::json!({ "identity": identity, "actions": actions });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!(
        "{} {} {:?} {}/{} accounts: {}",
        identity.id,
        identity.kind,
        identity.label.expose(),
        identity.status,
        sub_status_str(identity.sub_status),
        identity.account_ids.join(", ")
    );
    for a in &actions {
        println!(
            "  {} {} by {}: {}/{} -> {}/{} {}",
            crate::deposits::resource::format_time(&a.created_at),
            a.event,
            a.actor,
            a.previous_status,
            a.previous_sub_status.as_deref().unwrap_or(""),
            a.status,
            a.sub_status.as_deref().unwrap_or(""),
            a.reason.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
