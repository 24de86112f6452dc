//! `users`: a tenant's console users. An operator admin invites a tenant's
//! first admin through the service; the tenant's admin invites the rest
//! from the console's team page.

use clap::Subcommand;
use serde_json::json;

use super::{
    operators::ServerArg,
    server::{Server, segment},
};
use crate::console::rules::TenantRole;

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Invite a person to an organization's console with a role; prints the
    /// one-time enrol link (valid 24 hours). Through the service, by an
    /// operator `admin` (`--server`, the key in CUSTODY_INDEXER_OPERATOR_KEY).
    Invite {
        #[arg(long)]
        organization: String,
        #[arg(long)]
        email: String,
        /// `admin`, `developer` or `viewer`.
        #[arg(long)]
        role: TenantRole,
        #[command(flatten)]
        server: ServerArg,
    },
}

pub async fn run(command: UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Invite { organization, email, role, server } => {
            let server: Server = server.required("inviting a console user")?;
            let path = format!("/operator/v1/organizations/{}/users", segment(&organization));
            let answer = server.post(&path, &json!({ "email": email, "role": role })).await?;
            let user = &answer["user"];
            println!(
                "user {} ({}) of {} with role {}",
                user["id"].as_str().unwrap_or_default(),
                user["email"].as_str().unwrap_or_default(),
                user["organization_id"].as_str().unwrap_or_default(),
                user["role"].as_str().unwrap_or_default(),
            );
            println!("the enrol link works once, within 24 hours; it is on the next line:");
            println!("{}", server.url(answer["enrol_path"].as_str().unwrap_or_default())?);
        }
    }
    Ok(())
}
