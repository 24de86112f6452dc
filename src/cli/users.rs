//! `users`: a tenant's console users. An operator admin invites a tenant's
//! first admin through the service; the tenant's admin invites the rest
//! from the console's team page.

use clap::Subcommand;
use serde_json::json;

use super::{
    server::ServerArg,
    server::{Server, segment},
};
use crate::people::rules::TenantRole;

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Invite an organization's first console admin; prints the one-time
    /// enrol link (valid 24 hours) in `sandbox`, and in `production` the
    /// change another admin approves (the link is then mailed to the
    /// organization's contact address). Through the service, by an operator
    /// `admin` (`--server`, the key in CUSTODY_INDEXER_OPERATOR_KEY).
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

/// `organizations contact ID --email …`: through the service, by an
/// operator `admin`; a change another admin approves in `production`.
pub async fn contact(id: &str, email: &str, reason: Option<&str>, server: &ServerArg) -> anyhow::Result<()> {
    let server: Server = server.required("setting an organization's contact address")?;
    let path = format!("/operator/v1/organizations/{}/contact", segment(id));
    let answer = server.put(&path, &json!({ "contact_email": email, "reason": reason })).await?;
    if !super::operator_changes::print_change(&answer) {
        println!(
            "organization {} has contact address {}",
            answer["id"].as_str().unwrap_or_default(),
            answer["contact_email"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

pub async fn run(command: UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Invite { organization, email, role, server } => {
            let server: Server = server.required("inviting a console user")?;
            let path = format!("/operator/v1/organizations/{}/users", segment(&organization));
            let answer = server.post(&path, &json!({ "email": email, "role": role })).await?;
            if super::operator_changes::print_change(&answer) {
                println!("once approved, the enrol link is mailed to {email}");
                return Ok(());
            }
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
