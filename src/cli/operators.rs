//! `operators`: the people who decide. The first operator is created from
//! the store alone (the bootstrap: in `production` one admin, once ever);
//! after that an admin manages operators through the service (`--server`,
//! the admin's key in `CUSTODY_INDEXER_OPERATOR_KEY`), and in `production`
//! each grant is a change another admin approves (`operators changes`).

use clap::Subcommand;
use serde_json::json;

use super::{
    operator_changes::{ChangesCommand, print_change, print_warnings, str_of},
    server::{Server, ServerArg},
};
use crate::{
    audit::Actor,
    environment::Environment,
    operators::{ChangeKind, NewOperator, Role, manage, taking},
    store::Store,
};

#[derive(Debug, Subcommand)]
pub enum OperatorsCommand {
    /// Create an operator. Prints its id, its enrol details and, on the last
    /// line, its first operator key, shown once. From the store alone
    /// (without `--server`) only while no admin exists: the bootstrap.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        email: String,
        /// `compliance`, `treasury`, `admin`; comma-separated.
        #[arg(long = "role", value_delimiter = ',', required = true)]
        roles: Vec<Role>,
        #[command(flatten)]
        server: ServerArg,
    },
    /// List operators and their keys (never a secret).
    List {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Disable an operator: its keys stop working at once, on every instance.
    /// In production an admin disabled while two admins hold the platform
    /// is suspended instead: its proposer completes the disabling with
    /// --break-glass.
    Disable {
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArg,
        /// On the production store directly: complete the suspension of this
        /// operator that the key in CUSTODY_INDEXER_OPERATOR_KEY proposed.
        #[arg(long)]
        break_glass: bool,
    },
    /// Enable a disabled operator (in production, a change another admin
    /// approves).
    Enable {
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Mail a fresh enrol link to an operator who has not enrolled, at the
    /// recorded address (its earlier links stop working).
    Invite {
        id: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Changes of operators that wait for a second admin (production).
    #[command(subcommand)]
    Changes(ChangesCommand),
    /// An operator's roles.
    #[command(subcommand)]
    Roles(RolesCommand),
    /// An operator's keys.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Debug, Subcommand)]
pub enum RolesCommand {
    /// Replace an operator's roles (an admin cannot change their own).
    Set {
        id: String,
        #[arg(long = "role", value_delimiter = ',', required = true)]
        roles: Vec<Role>,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArg,
        /// On the production store directly: complete the suspension (its
        /// `admin` role removed) of this operator that the key in
        /// CUSTODY_INDEXER_OPERATOR_KEY proposed, with these roles.
        #[arg(long)]
        break_glass: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for an operator; printed once, on the last line.
    Create {
        id: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Revoke an operator key at once.
    Revoke {
        key_id: String,
        #[command(flatten)]
        server: ServerArg,
    },
}

pub async fn run(url: &str, command: OperatorsCommand) -> anyhow::Result<()> {
    match command {
        OperatorsCommand::Create { name, email, roles, server: ServerArg { server: None } } => {
            bootstrap(url, NewOperator { name, email, roles }).await?
        }
        OperatorsCommand::Create { name, email, roles, server } => {
            let server = server.required("creating an operator")?;
            let answer = server
                .post("/operator/v1/operators", &json!({ "name": name, "email": email, "roles": roles }))
                .await?;
            print_created_answer(&server, &answer)?;
        }
        OperatorsCommand::List { json, server: ServerArg { server: None } } => {
            let store = Store::open(url).await?;
            let mut list = Vec::new();
            for operator in store.operators().await? {
                let keys = store.operator_keys(&operator.id).await?;
                list.push(json!({ "operator": operator, "keys": keys }));
            }
            print_list(&list, json)?;
        }
        OperatorsCommand::List { json, server } => {
            let answer = server.required("listing operators")?.get("/operator/v1/operators").await?;
            let list: Vec<_> = answer["operators"].as_array().cloned().unwrap_or_default();
            let list: Vec<_> =
                list.into_iter().map(|o| json!({ "operator": o, "keys": o["keys"] })).collect();
            print_list(&list, json)?;
        }
        OperatorsCommand::Disable { id, reason, server, break_glass: true } => {
            complete(url, &server, (ChangeKind::Disable, &id, None), &reason).await?
        }
        OperatorsCommand::Disable { id, reason, server, .. } => {
            let server = server.required("disabling an operator")?;
            let path = format!("/operator/v1/operators/{id}/disable");
            let answer = server.post(&path, &json!({ "reason": reason })).await?;
            taken(&answer, &format!("operator {id} disabled: its keys no longer work"));
        }
        OperatorsCommand::Enable { id, reason, server } => {
            let server = server.required("enabling an operator")?;
            let path = format!("/operator/v1/operators/{id}/enable");
            let answer = server.post(&path, &json!({ "reason": reason })).await?;
            if !print_change(&answer) {
                println!("operator {id} enabled");
            }
        }
        OperatorsCommand::Changes(command) => super::operator_changes::run(command).await?,
        OperatorsCommand::Invite { id, server } => {
            let server = server.required("inviting an operator")?;
            let answer = server.post(&format!("/operator/v1/operators/{id}/invitation"), &json!({})).await?;
            match (answer["invitation"].as_str(), answer["enrol_path"].as_str()) {
                (Some(sent), _) => println!("operator {id}: enrol link {sent}"),
                (None, Some(path)) => {
                    println!("console enrol link (once, within 24 hours): {}", server.url(path)?)
                }
                (None, None) => println!("operator {id} invited"),
            }
        }
        OperatorsCommand::Roles(RolesCommand::Set { id, roles, reason, server, break_glass: true }) => {
            complete(url, &server, (ChangeKind::Demote, &id, Some(&roles)), &reason).await?
        }
        OperatorsCommand::Roles(RolesCommand::Set { id, roles, reason, server, .. }) => {
            let server = server.required("setting an operator's roles")?;
            let body = json!({ "roles": roles, "reason": reason });
            let answer = server.put(&format!("/operator/v1/operators/{id}/roles"), &body).await?;
            taken(&answer, &format!("operator {id}: roles {}", answer["roles"]));
        }
        OperatorsCommand::Keys(KeysCommand::Create { id, server }) => {
            let server = server.required("creating an operator key")?;
            let answer = server.post(&format!("/operator/v1/operators/{id}/keys"), &json!({})).await?;
            println!("key {} of operator {id}; shown once:", str_of(&answer["id"]));
            println!("{}", str_of(&answer["token"]));
        }
        OperatorsCommand::Keys(KeysCommand::Revoke { key_id, server }) => {
            let server = server.required("revoking an operator key")?;
            server.post(&format!("/operator/v1/operator-keys/{key_id}/revoke"), &json!({})).await?;
            println!("operator key {key_id} revoked");
        }
    }
    Ok(())
}

/// Prints what taking power away did: the change it waits on (a grant, a
/// suspension), or `done` and its warnings.
fn taken(answer: &serde_json::Value, done: &str) {
    if !print_change(answer) {
        println!("{done}");
        print_warnings(answer);
    }
}

/// `operators disable|roles set --break-glass`: the suspension of `target`
/// (of `kind`; for a demotion, leaving `roles`) that the key in
/// `CUSTODY_INDEXER_OPERATOR_KEY` proposed, completed on the production
/// store directly.
async fn complete(
    url: &str,
    server: &ServerArg,
    (kind, target, roles): (ChangeKind, &str, Option<&[Role]>),
    reason: &str,
) -> anyhow::Result<()> {
    if server.server.is_some() {
        anyhow::bail!("--break-glass acts on the store directly: drop --server (and CUSTODY_INDEXER_SERVER)");
    }
    if reason.trim().is_empty() {
        anyhow::bail!("--break-glass needs --reason: why the suspension is completed");
    }
    let store = super::identities::open(url).await?;
    // An unstamped store is governed as production, the default.
    if store.environment().await? == Some(Environment::Sandbox) {
        anyhow::bail!("--break-glass is for a production store; this one is a sandbox's");
    }
    let by = super::decider::glass_operator(&store, crate::operators::Action::Operators).await?;
    let taken = taking::complete(&store, &by, (kind, target, roles), reason.trim()).await?;
    let done = if kind == ChangeKind::Disable { "disabled" } else { "demoted" };
    let roles = crate::operators::resource::roles_text(&taken.operator.roles);
    println!(
        "operator {target} {done} (roles {roles}), breaking glass: the audit log's next checkpoint is due now"
    );
    for warning in &taken.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// `operators create` on the store: the bootstrap operator.
async fn bootstrap(url: &str, new: NewOperator) -> anyhow::Result<()> {
    let store = super::identities::open(url).await?;
    crate::api_key::pepper::for_keys(&store).await?;
    // An unstamped store is governed as production, the default.
    let environment = store.environment().await?.unwrap_or(Environment::Production);
    let created = manage::bootstrap(&store, environment, &Actor::local(None), new).await?;
    let operator = &created.operator;
    let roles = crate::operators::resource::roles_text(&operator.roles);
    let who = [operator.id.as_str(), &operator.name, &operator.email];
    // Without the service's address at hand, the link's path: open it on
    // the address the service answers at.
    let enrol = format!("{} (on the service's address)", created.enrol_path);
    let key = created.key.as_ref().map(|key| (key.id.as_str(), key.token.as_str()));
    print_created(who, &roles, Some(&enrol), key);
    Ok(())
}

fn print_created([id, name, email]: [&str; 3], roles: &str, enrol: Option<&str>, key: Option<(&str, &str)>) {
    println!("operator {id} ({name}, {email}) with roles {roles}");
    match enrol {
        Some(enrol) => println!("console enrol link (once, within 24 hours): {enrol}"),
        None => println!("console enrol link: not shown here, it reaches the operator only"),
    }
    match key {
        Some((key_id, token)) => {
            println!("key {key_id}; the key is shown once, on the next line:");
            println!("{token}");
        }
        None => println!("key: none yet, the operator's first key ends their own enrolment"),
    }
}

/// Prints the service's answer to a creation: the operator made, or the
/// change that waits for another admin.
fn print_created_answer(server: &Server, answer: &serde_json::Value) -> anyhow::Result<()> {
    if print_change(answer) {
        return Ok(());
    }
    let operator = &answer["operator"];
    let roles: Vec<_> = operator["roles"].as_array().into_iter().flatten().map(str_of).collect();
    let who = [str_of(&operator["id"]), str_of(&operator["name"]), str_of(&operator["email"])];
    let enrol = match answer["enrol_path"].as_str() {
        Some(path) => Some(server.url(path)?.to_string()),
        None => None,
    };
    let key = answer["key"]["id"].as_str().zip(answer["key"]["token"].as_str());
    print_created(who, &roles.join(","), enrol.as_deref(), key);
    Ok(())
}

/// Whether a listed key's `expires_at` has passed.
fn expired(expires_at: &serde_json::Value) -> bool {
    expires_at
        .as_str()
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .is_some_and(|at| at <= chrono::Utc::now())
}

fn print_list(list: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(list)?);
        return Ok(());
    }
    for entry in list {
        let operator = &entry["operator"];
        let live = entry["keys"].as_array().map_or(0, |keys| {
            keys.iter().filter(|k| k["revoked_at"].is_null() && !expired(&k["expires_at"])).count()
        });
        let state = if operator["disabled_at"].is_null() { "enabled" } else { "DISABLED" };
        println!(
            "{} {} <{}> roles {} {state}, {live} live key(s)",
            str_of(&operator["id"]),
            str_of(&operator["name"]),
            str_of(&operator["email"]),
            operator["roles"]
                .as_array()
                .map(|r| r.iter().map(str_of).collect::<Vec<_>>().join(","))
                .unwrap_or_default(),
        );
    }
    Ok(())
}
