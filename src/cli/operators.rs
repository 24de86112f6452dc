//! `operators` and `audit`: the people who decide, and the log of what they
//! decided. The first operator is created from the store alone (the
//! bootstrap, only while no `admin` exists); after that an admin manages
//! operators through the service (`--server`, the admin's key in
//! `CUSTODY_INDEXER_OPERATOR_KEY`).

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use serde_json::json;

use super::server::Server;
use crate::{
    audit::{self, Actor, chain},
    operators::{NewOperator, Role, manage},
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
    Disable {
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArg,
    },
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

/// The service to act through.
#[derive(Debug, Args)]
pub struct ServerArg {
    /// The service's URL; the operator key is read from
    /// `CUSTODY_INDEXER_OPERATOR_KEY`.
    #[arg(long, env = "CUSTODY_INDEXER_SERVER")]
    pub server: Option<String>,
}

impl ServerArg {
    pub fn required(&self, what: &str) -> anyhow::Result<Server> {
        match &self.server {
            Some(url) => Server::from_env(url),
            None => bail!(
                "{what} goes through the service: pass --server URL (or set CUSTODY_INDEXER_SERVER) and an admin's \
                 key in CUSTODY_INDEXER_OPERATOR_KEY"
            ),
        }
    }
}

pub async fn run(url: &str, command: OperatorsCommand) -> anyhow::Result<()> {
    match command {
        OperatorsCommand::Create { name, email, roles, server: ServerArg { server: None } } => {
            let store = super::identities::open(url).await?;
            let created =
                manage::bootstrap(&store, &Actor::local(None), NewOperator { name, email, roles }).await?;
            let operator = &created.operator;
            let roles = crate::operators::resource::roles_text(&operator.roles);
            let who = [operator.id.as_str(), &operator.name, &operator.email];
            // Without the service's address at hand, the link's path: open
            // it on the address the service answers at.
            let enrol = format!("{} (on the service's address)", created.enrol_path);
            print_created(who, &roles, &enrol, &created.key.id, &created.key.token);
        }
        OperatorsCommand::Create { name, email, roles, server } => {
            let server = server.required("creating an operator")?;
            let answer = server
                .post("/operator/v1/operators", &json!({ "name": name, "email": email, "roles": roles }))
                .await?;
            let operator = &answer["operator"];
            let roles: Vec<_> = operator["roles"].as_array().into_iter().flatten().map(str_of).collect();
            let who = [str_of(&operator["id"]), str_of(&operator["name"]), str_of(&operator["email"])];
            let enrol = server.url(str_of(&answer["enrol_path"]))?.to_string();
            print_created(
                who,
                &roles.join(","),
                &enrol,
                str_of(&answer["key"]["id"]),
                str_of(&answer["key"]["token"]),
            );
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
        OperatorsCommand::Disable { id, reason, server } => {
            let server = server.required("disabling an operator")?;
            server
                .post(&format!("/operator/v1/operators/{id}/disable"), &json!({ "reason": reason }))
                .await?;
            println!("operator {id} disabled: its keys no longer work");
        }
        OperatorsCommand::Roles(RolesCommand::Set { id, roles, reason, server }) => {
            let server = server.required("setting an operator's roles")?;
            let body = json!({ "roles": roles, "reason": reason });
            let answer = server.put(&format!("/operator/v1/operators/{id}/roles"), &body).await?;
            println!("operator {id}: roles {}", answer["roles"]);
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

fn str_of(value: &serde_json::Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn print_created([id, name, email]: [&str; 3], roles: &str, enrol: &str, key_id: &str, token: &str) {
    println!("operator {id} ({name}, {email}) with roles {roles}");
    println!("console enrol link (once, within 24 hours): {enrol}");
    println!("key {key_id}; the key is shown once, on the next line:");
    println!("{token}");
}

fn print_list(list: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(list)?);
        return Ok(());
    }
    for entry in list {
        let operator = &entry["operator"];
        let live = entry["keys"]
            .as_array()
            .map_or(0, |keys| keys.iter().filter(|k| k["revoked_at"].is_null()).count());
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

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The audit log, oldest first.
    List {
        /// Entries after this `seq`.
        #[arg(long, default_value_t = 0)]
        since: i64,
        #[arg(long)]
        organization: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Checks every entry's hash and link, and the head: exits 0, or 1
    /// naming the first entry that does not match.
    Verify,
}

/// Entries read per page.
const PAGE: i64 = 1000;

pub async fn audit(url: &str, command: AuditCommand) -> anyhow::Result<ExitCode> {
    let store = super::identities::open(url).await?;
    match command {
        AuditCommand::List { since, organization, json } => {
            let mut after = since;
            loop {
                let page = store.audit_entries(after, organization.as_deref(), PAGE).await?;
                for entry in &page {
                    print_entry(&store, entry, json)?;
                }
                match page.last() {
                    Some(last) if page.len() as i64 == PAGE => after = last.seq,
                    _ => break,
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Verify => verify(&store).await,
    }
}

async fn verify(store: &Store) -> anyhow::Result<ExitCode> {
    match chain::verify_store(store).await? {
        Ok((count, head_hash)) => {
            println!("audit log verified: {count} entries, head {head_hash}");
            Ok(ExitCode::SUCCESS)
        }
        Err(broken) => {
            println!("audit log BROKEN at seq {}: {}", broken.seq, broken.why);
            Ok(ExitCode::from(1))
        }
    }
}

fn print_entry(store: &Store, entry: &chain::Entry, json: bool) -> anyhow::Result<()> {
    let reason = audit::reason(store.cipher().ok(), entry)?;
    let at = crate::deposits::resource::format_time(&crate::store::time(entry.at)?);
    if json {
        let mut value = serde_json::to_value(entry)?;
        value["reason"] = json!(reason);
        value["at"] = json!(at);
        println!("{value}");
        return Ok(());
    }
    let name = entry.actor_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    let org = entry.organization_id.as_deref().map(|o| format!(" org {o}")).unwrap_or_default();
    let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
    println!(
        "{} {at} {}{name} {} {} {}{org}{reason}",
        entry.seq, entry.actor, entry.action, entry.target_kind, entry.target_id
    );
    Ok(())
}
