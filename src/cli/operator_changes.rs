//! `operators changes`: the changes of operators that wait for a second
//! admin, listed, approved and refused through the service.

use clap::Subcommand;
use serde_json::{Value, json};

use super::server::ServerArg;

#[derive(Debug, Subcommand)]
pub enum ChangesCommand {
    /// List the changes, newest first.
    List {
        /// Only the pending ones.
        #[arg(long)]
        pending: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Approve a pending change (not one you proposed or that is about
    /// you): it applies at once.
    Approve {
        id: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Refuse a pending change.
    Refuse {
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArg,
    },
}

pub async fn run(command: ChangesCommand) -> anyhow::Result<()> {
    match command {
        ChangesCommand::List { pending, json, server } => {
            let server = server.required("listing changes")?;
            let path = if pending { "/operator/v1/changes?status=PENDING" } else { "/operator/v1/changes" };
            let answer = server.get(path).await?;
            let changes = answer["changes"].as_array().cloned().unwrap_or_default();
            if json {
                println!("{}", serde_json::to_string_pretty(&changes)?);
            } else {
                changes.iter().for_each(print_line);
            }
        }
        ChangesCommand::Approve { id, server } => {
            let server = server.required("approving a change")?;
            let answer = server.post(&format!("/operator/v1/changes/{id}/approve"), &json!({})).await?;
            print_change(&answer);
            if let Some(invitation) = answer["invitation"].as_str() {
                println!("the enrol link was {invitation}");
            }
        }
        ChangesCommand::Refuse { id, reason, server } => {
            let server = server.required("refusing a change")?;
            let path = format!("/operator/v1/changes/{id}/refuse");
            let answer = server.post(&path, &json!({ "reason": reason })).await?;
            print_change(&answer);
        }
    }
    Ok(())
}

fn print_line(change: &Value) {
    let proposal = &change["proposal"];
    let roles = proposal["roles"].as_array().map(|r| r.iter().map(str_of).collect::<Vec<_>>().join(","));
    let mut what = String::new();
    match (proposal["name"].as_str(), proposal["email"].as_str()) {
        (Some(name), email) => what.push_str(&format!(" {name} <{}>", email.unwrap_or_default())),
        (None, Some(email)) => what.push_str(&format!(" <{email}>")),
        (None, None) => {}
    }
    if let Some(roles) = roles {
        what.push_str(&format!(" roles {roles}"));
    }
    println!(
        "{} {} {} of {}{what}, proposed by {} at {}",
        str_of(&change["id"]),
        str_of(&change["status"]),
        str_of(&change["kind"]),
        str_of(&change["target"]),
        str_of(&change["proposed_by"]),
        str_of(&change["created_at"]),
    );
}

/// A JSON string's text (empty when it is none).
pub(super) fn str_of(value: &serde_json::Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// Prints the change an answer holds, if it holds one.
pub(super) fn print_change(answer: &serde_json::Value) -> bool {
    let change = &answer["change"];
    if change.is_null() {
        return false;
    }
    println!(
        "change {} ({} of {}) {}",
        str_of(&change["id"]),
        str_of(&change["kind"]),
        str_of(&change["target"]),
        str_of(&change["status"])
    );
    let id = str_of(&change["id"]);
    if let Some(until) = answer["suspended_until"].as_str() {
        let target = str_of(&change["target"]);
        let command =
            if change["kind"] == "operator.demote" { "operators roles set" } else { "operators disable" };
        println!(
            "operator {target} is suspended until {until}: it acts again then unless the change is completed"
        );
        println!("another enabled admin approves it: operators changes approve {id}");
        println!("or you complete it on the store: {command} {target} … --reason TEXT --break-glass");
    } else if change["status"] == "PENDING" {
        println!("another admin approves it: operators changes approve {id}");
    }
    true
}

/// Prints, on standard error, the warnings an answer holds.
pub(super) fn print_warnings(answer: &serde_json::Value) {
    for warning in answer["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", str_of(warning));
    }
}
