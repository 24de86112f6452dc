//! After a restore: `audit acknowledge-restore` (an admin), `transfers
//! recover` (treasury), both through the service in production like the
//! other deciding commands; and `backup`, an online copy of a SQLite store.

use std::path::Path;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use super::decider::{Deciding, Via};
use crate::{
    audit::checkpoint::{self, Checkpoint},
    chain::Chain,
    operators::Action,
    restore::acknowledge,
    store::Store,
    transfers::recover,
};

#[derive(Debug, Subcommand)]
pub enum TransfersCommand {
    /// After a restore of the store: holds CHAIN against the store (every
    /// address of a platform-held key whose transactions on chain the store
    /// does not all know is named, and nothing is recorded), then records
    /// the chain recovered: its sender resumes and its transfers are
    /// accepted again. Treasury; through the service in production.
    Recover {
        #[arg(long)]
        chain: Chain,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        chain_files: super::ChainFiles,
        #[command(flatten)]
        deciding: Deciding,
    },
}

/// `transfers …`.
pub async fn transfers(url: &str, command: TransfersCommand) -> anyhow::Result<()> {
    let TransfersCommand::Recover { chain, reason, chain_files, deciding } = command;
    let store = Store::open(url).await?;
    let recovery: recover::Recovery = match deciding.via(&store, Some(&reason), Action::Recovery).await? {
        Via::Server(server) => {
            let body = json!({ "chain": chain, "reason": reason });
            serde_json::from_value(server.post("/operator/v1/transfers/recoveries", &body).await?)?
        }
        Via::Store(actor) => {
            let chains = chain_files.load()?;
            recover::recover(&store, chains.get(chain)?, &actor, &reason).await?
        }
    };
    for t in &recovery.transactions {
        let none = || "-".to_string();
        println!(
            "{} {} {} {} {} -> {} ({})",
            t.transfer_id.clone().unwrap_or_else(|| "platform".into()),
            t.hash,
            t.amount.clone().unwrap_or_else(none),
            t.currency_symbol.clone().unwrap_or_else(none),
            t.sender,
            t.destination.clone().unwrap_or_else(none),
            t.status
        );
    }
    println!(
        "{chain} recovered: {} transaction(s) recorded, audit entry {}",
        recovery.transactions.len(),
        recovery.recorded_by
    );
    Ok(())
}

/// `audit acknowledge-restore --checkpoint FILE`: the checkpoint verified
/// with `public` (or the process's audit key), the chains of `chains`
/// listed as waiting for their recovery.
pub async fn acknowledge_restore(
    url: &str,
    file: &Path,
    (reason, public): (&str, Option<&str>),
    chains: &super::ChainFiles,
    deciding: &Deciding,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let lost = Checkpoint::parse(&text, &file.display().to_string())?;
    let store = Store::open_migrated(url).await?;
    let printed = |lost_from: &serde_json::Value, lost_to: &serde_json::Value, by: &serde_json::Value| {
        println!("restore acknowledged by audit entry {by}: entries {lost_from} to {lost_to} were lost");
        println!("next: `transfers recover --chain CHAIN --reason …` for each chain");
    };
    match deciding.via(&store, Some(reason), Action::Operators).await? {
        Via::Server(server) => {
            let body = json!({ "checkpoint": lost, "reason": reason });
            let answer = server.post("/operator/v1/audit/restore-acknowledgements", &body).await?;
            printed(&answer["lost_from"], &answer["lost_to"], &answer["acknowledged_by"]);
        }
        Via::Store(actor) => {
            let public = match public {
                Some(text) => checkpoint::parse_public_key(text)?,
                None => match checkpoint::public_key_from_env().map_err(anyhow::Error::msg)? {
                    Some(public) => public,
                    None => bail!(
                        "the checkpoint is verified with {} (or --public-key)",
                        checkpoint::PUBLIC_KEY_ENV
                    ),
                },
            };
            let names = chains.load()?.iter().map(|c| c.chain.as_str().to_string()).collect();
            let done =
                acknowledge::acknowledge_restore(&store, &actor, (&lost, &public), names, reason).await?;
            printed(&json!(done.lost_from), &json!(done.lost_to), &json!(done.acknowledged_by));
        }
    }
    Ok(())
}

/// `backup FILE`: an online, consistent copy of a SQLite store, written
/// to a new file only its owner may read (it holds every row).
pub async fn backup(url: &str, file: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let store = Store::open_as_is(url).await?;
    // Made here, empty and private, so that SQLite writes into it and no
    // other file is ever overwritten.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .with_context(|| format!("{}: a backup is written to a new file", file.display()))?;
    if let Err(error) = store.backup_into(file).await {
        let _ = std::fs::remove_file(file);
        return Err(error.into());
    }
    println!("backed up to {}", file.display());
    Ok(())
}
