//! `chains`: what an operator does about a chain whose watcher stopped.

use anyhow::{bail, ensure};
use clap::Subcommand;
use tracing::info;

use crate::{
    chain::Chain,
    deposits::commit,
    deposits::resource::format_time,
    store::{ChainStop, Rewind, Store},
};

#[derive(Debug, Subcommand)]
pub enum ChainsCommand {
    /// Resume a STOPPED chain: every instance runs its watcher again (within
    /// a third of `--worker-lease`). Who resumed it, and when, is recorded.
    Resume {
        chain: Chain,
        /// Who resumes it (default: the login name, `$USER`).
        #[arg(long)]
        by: Option<String>,
        /// EVM: first rewind the chain's cursor to this block, the highest
        /// one still canonical after a reorg deeper than `reorg_window`: the
        /// blocks above it are scanned again, and their pending deposits
        /// revived or failed as after any reorg (confirmed ones stay).
        #[arg(long, value_name = "BLOCK")]
        rewind_to: Option<u64>,
    },
    /// Every stop of a chain, newest first, with who resumed it and when.
    Stops {
        chain: Chain,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(store: &Store, command: ChainsCommand) -> anyhow::Result<()> {
    match command {
        ChainsCommand::Resume { chain, by, rewind_to } => {
            let by = by.or_else(|| std::env::var("USER").ok()).filter(|b| !b.trim().is_empty());
            let by = by.unwrap_or_else(|| "unknown operator".to_string());
            resume(store, chain, &by, rewind_to).await
        }
        ChainsCommand::Stops { chain, json } => {
            let stops = store.chain_stop_history(chain).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&stops)?);
            } else if stops.is_empty() {
                println!("{chain} was never stopped");
            } else {
                stops.iter().for_each(print_stop);
            }
            Ok(())
        }
    }
}

async fn resume(store: &Store, chain: Chain, by: &str, rewind_to: Option<u64>) -> anyhow::Result<()> {
    if store.chain_stop(chain).await?.is_none() {
        println!("{chain} is not stopped: nothing to resume");
        return Ok(());
    }
    if let Some(block) = rewind_to {
        rewind(store, chain, block).await?;
    }
    let Some(stop) = commit::resume_chain(store, chain, by).await? else {
        println!("{chain} is not stopped: nothing to resume");
        return Ok(());
    };
    let at = stop.resumed_at.as_ref().map(format_time).unwrap_or_default();
    info!(%chain, by, resumed_at = %at, stopped_at = %format_time(&stop.stopped_at), reason = %stop.reason,
        "chain resumed: its watcher runs again");
    println!("resumed {chain} by {by} at {at}");
    println!("it was STOPPED at {} by {}: {}", format_time(&stop.stopped_at), stop.instance, stop.reason);
    Ok(())
}

/// Moves a stopped chain's cursor back to `block`, as a rewind to that
/// common ancestor: while it is stopped, no watcher moves it meanwhile.
async fn rewind(store: &Store, chain: Chain, block: u64) -> anyhow::Result<()> {
    if !crate::family::rules::block_ledger(chain.family()) {
        bail!("{chain}: --rewind-to applies to EVM chains only");
    }
    let Some(state) = store.chain_state(chain).await? else { bail!("{chain} has no cursor to rewind") };
    let next = state.next_block;
    let indexed = next.saturating_sub(1);
    ensure!(block < indexed, "{chain}: --rewind-to {block} is not below the indexed height {indexed}");
    let rewind = Rewind { chain, common_ancestor: block, expected_next: next, scanned_height: indexed };
    let outcome = commit::rewind(store, rewind).await?;
    info!(%chain, common_ancestor = block, orphaned = outcome.orphaned, confirmed_affected = outcome.confirmed_affected,
        "rewound the stopped chain's cursor");
    println!(
        "rewound {chain} to block {block}: blocks {}..={} are scanned again; {} pending deposits set aside, {} confirmed ones left as they are",
        block + 1,
        indexed,
        outcome.orphaned,
        outcome.confirmed_affected
    );
    Ok(())
}

fn print_stop(stop: &ChainStop) {
    let resumed = match (&stop.resumed_at, &stop.resumed_by) {
        (Some(at), Some(by)) => format!("resumed at {} by {by}", format_time(at)),
        _ => "STOPPED".to_string(),
    };
    println!(
        "stopped at {} by {} ({}): {}  {resumed}",
        format_time(&stop.stopped_at),
        stop.instance,
        stop.kind,
        stop.reason
    );
}
