//! `operators`: the people who decide. The first operator is created from the store alone (the
//! bootstrap, only while no `admin` exists); after that an admin manages
//! operators through the service (`--server`, the admin's key in
//! `CUSTODY_INDEXER_OPERATOR_KEY`).

use anyhow::bail;
use clap::{Args, Subcommand};
use serde_json::json;

use super::server::Server;
use crate::{
    audit::Actor,
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
            crate::api_key::pepper::for_keys(&store).await?;
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
