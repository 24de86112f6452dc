//! `identities`: register identities onboarded elsewhere, inspect them, and
//! the compliance staff's actions (`approve`, `reject`, `suspend`,
//! `reinstate`, `terminate`, `rfi raise`, `rfi fulfil`, `fiat enable`,
//! `fiat disable`), each recorded in the identity's trail and the audit log
//! with `--reason` and announced by an `identity_status_update` when the
//! status or sub-status changes. They are deciding commands: through the
//! service with `--server`, or on the store as [`Deciding`] allows.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{
    ChainFiles,
    decider::{Deciding, Via},
    server::segment,
};
use crate::{
    account::DEFAULT_ORGANIZATION,
    audit::Actor,
    config::Chains,
    environment::Environment,
    identity::{
        Status, Type,
        decide::{self, Decision, Outcome},
        sub_status_str,
    },
    operators::Action as Needs,
    pii::{Key, KeySource},
    store::{NewIdentity, Store},
};

#[derive(Debug, Subcommand)]
pub enum IdentitiesCommand {
    /// Register an identity onboarded outside this service (e.g. moved from
    /// another platform), in the status it has there.
    Import(Import),
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

#[derive(Debug, Clone, Args)]
pub struct Import {
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
    /// ACTIVE or SUSPENDED (a compliance decision: see the deciding
    /// options), or PENDING_ONBOARDING (then at CREATED, on the store).
    #[arg(long, default_value = "ACTIVE")]
    status: Status,
    /// Why; recorded.
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    deciding: Deciding,
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
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, Subcommand)]
pub enum RfiCommand {
    /// Raise an RFI: the sub-status becomes RFI_REQUIRED.
    Raise(Action),
    /// Fulfil the open RFI: back to the onboarding step, or no sub-status.
    Fulfil(Action),
}

/// The identity decided on, why, and who decides (recorded).
#[derive(Debug, Clone, Args)]
pub struct Target {
    id: String,
    #[arg(long, default_value = DEFAULT_ORGANIZATION)]
    organization: String,
    /// Why; sent to the client as `status_reason`.
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    deciding: Deciding,
}

#[derive(Debug, Clone, Args)]
pub struct Action {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    chain_files: ChainFiles,
}

/// The store for an operator's command, its personal data readable with
/// `CUSTODY_INDEXER_PII_KEY`, or else with the key a sandbox store keeps
/// (generated if it has none yet, as `run` would). Without either, what
/// reads or writes personal data is refused, naming the variable.
pub async fn open(url: &str) -> anyhow::Result<Store> {
    unlock(Store::open(url).await?).await
}

/// `store` unlocked for personal data as [`open`] unlocks it.
pub async fn unlock(store: Store) -> anyhow::Result<Store> {
    let source = match Key::from_env()? {
        Some(key) => KeySource::Given(key),
        None if store.environment().await? == Some(Environment::Sandbox)
            && store.keeps_pii_key().await? != Some(false) =>
        {
            KeySource::Kept
        }
        None => return Ok(store),
    };
    Ok(crate::start::unlock_pii(&store, source).await?)
}

pub async fn run(store: &Store, command: IdentitiesCommand) -> anyhow::Result<()> {
    let (action, decision) = match command {
        IdentitiesCommand::Import(import) => return import_identity(store, import).await,
        IdentitiesCommand::Show { id, organization, json } => {
            return show(store, &organization, &id, json).await;
        }
        IdentitiesCommand::Fiat(FiatCommand::Enable(f)) => {
            return decide(store, &f.target, Decision::FiatEnable, None).await;
        }
        IdentitiesCommand::Fiat(FiatCommand::Disable(f)) => {
            return decide(store, &f.target, Decision::FiatDisable, None).await;
        }
        IdentitiesCommand::Approve(action) => (action, Decision::Approve),
        IdentitiesCommand::Reject(action) => (action, Decision::Reject),
        IdentitiesCommand::Suspend(action) => (action, Decision::Suspend),
        IdentitiesCommand::Reinstate { action, rfi } => {
            (action, if rfi { Decision::ReinstateWithRfi } else { Decision::Reinstate })
        }
        IdentitiesCommand::Terminate(action) => (action, Decision::Terminate),
        IdentitiesCommand::Rfi(RfiCommand::Raise(action)) => (action, Decision::RfiRaise),
        IdentitiesCommand::Rfi(RfiCommand::Fulfil(action)) => (action, Decision::RfiFulfil),
    };
    decide(store, &action.target, decision, Some(&action.chain_files)).await
}

/// Takes `decision` through the service or on the store (see [`Deciding`]).
/// `chain_files` settle the transfers a closing identity leaves unsent.
async fn decide(
    store: &Store,
    target: &Target,
    decision: Decision,
    chain_files: Option<&ChainFiles>,
) -> anyhow::Result<()> {
    let needs = match decision {
        Decision::FiatEnable | Decision::FiatDisable => Needs::FiatEntitlement,
        _ => Needs::IdentityDecision,
    };
    let outcome = match target.deciding.via(store, Some(&target.reason), needs).await? {
        Via::Server(server) => {
            let (organization, id) = (segment(&target.organization), segment(&target.id));
            let path = format!("/operator/v1/organizations/{organization}/identities/{id}/decisions");
            let body = serde_json::json!({ "decision": decision, "reason": target.reason });
            serde_json::from_value(server.post(&path, &body).await?)?
        }
        Via::Store(actor) => {
            let chains = match chain_files {
                Some(files) => files.load()?,
                None => Chains::default(),
            };
            let identity = (target.organization.as_str(), target.id.as_str());
            let decided = decide::decide(store, &chains, identity, decision, &actor, &target.reason).await?;
            Outcome::new(&target.id, decision, &decided)
        }
    };
    println!("{}", outcome.line());
    Ok(())
}

/// Registers an identity onboarded elsewhere: in onboarding, on the store
/// (setup); `ACTIVE` or `SUSPENDED`, as a compliance decision.
async fn import_identity(store: &Store, import: Import) -> anyhow::Result<()> {
    let Import { organization, id, kind, label, status, reason, deciding } = import;
    let state = decide::imported_state(status).map_err(anyhow::Error::msg)?;
    // In onboarding it is setup, on the store in every environment.
    let setup = state.status() == Status::PendingOnboarding && deciding.server.is_none();
    let via = match setup {
        true if deciding.break_glass => {
            anyhow::bail!("--break-glass is for decisions; an identity in onboarding is setup")
        }
        true => Via::Store(Actor::local(deciding.local_by())),
        false => deciding.via(store, Some(&reason), Needs::IdentityDecision).await?,
    };
    let identity = match via {
        Via::Server(server) => {
            let path = format!("/operator/v1/organizations/{}/identities", segment(&organization));
            let body = serde_json::json!({
                "id": id, "type": kind, "label": label, "status": status, "reason": reason,
            });
            let identity = server.post(&path, &body).await?;
            let field = |name: &str| identity[name].as_str().unwrap_or_default().to_string();
            println!("identity {} {} {}", field("id"), field("type"), field("status"));
            return Ok(());
        }
        Via::Store(actor) => {
            let new = NewIdentity {
                label: label.unwrap_or_else(|| id.clone()).into(),
                organization: organization.clone(),
                id: id.clone(),
                request_id: None,
                kind,
                state,
                actor: decide::trail_actor(&actor),
            };
            decide::import(store, &new, &actor, &reason).await.context("registering the identity")?;
            store.identity(&organization, &id).await?
        }
    };
    println!("identity {} {} {}", identity.id, identity.kind, identity.status);
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
