//! What `dev on-ramp` and `dev off-ramp` share: the conversion asked of the
//! running `dev`'s account, and following it to its end.

use std::{
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Args;

use super::{DEFAULT_STATE_DIR, Summary, seed::EVM_CHAIN, state::StateDir};
use crate::amount::Cents;
use crate::{chain::Chain, conversions::state::Status, store::Store};

/// How long `--follow` waits for a conversion to end.
pub(super) const WITHIN: Duration = Duration::from_secs(60);

/// A conversion of the running `dev`'s account.
#[derive(Debug, Args)]
pub struct ConversionArgs {
    /// Dollars, with at most 2 decimals (e.g. 25 or 25.50).
    #[arg(long)]
    amount: String,
    /// The local chain the USDC arrives on or leaves from.
    #[arg(long, default_value_t = EVM_CHAIN)]
    pub chain: Chain,
    /// The account (default: the account `dev` seeded).
    #[arg(long)]
    account_id: Option<String>,
    /// The running `dev`'s state directory.
    #[arg(long, value_name = "DIR", env = "CUSTODY_INDEXER_DEV_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Then print each status the conversion takes and exit 0 once it is
    /// `COMPLETED`, 1 if it ends otherwise or has not ended within a minute.
    #[arg(long)]
    pub follow: bool,
}

/// The running `dev`, its store, and the conversion's account and cents.
pub(super) struct Asked {
    pub dev: Summary,
    pub store: Store,
    pub cents: i64,
    pub account: String,
    pub identity: String,
}

impl ConversionArgs {
    pub(super) async fn asked(&self) -> anyhow::Result<Asked> {
        let dev = StateDir::existing(&self.state_dir)?.running()?.summary;
        let cents = Cents::parse(&self.amount).map_err(|e| anyhow::anyhow!("--amount: {e}"))?.0;
        let account = self.account_id.clone().unwrap_or_else(|| dev.account_id.clone());
        let store = Store::open(&dev.database_url).await?;
        let identity =
            store.account(&account).await.with_context(|| format!("account {account}"))?.identity_id;
        Ok(Asked { dev, store, cents, account, identity })
    }
}

/// Prints each status conversion `id` takes until it is terminal: success
/// once `COMPLETED`.
pub(super) async fn follow(store: &Store, id: &str) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let mut shown = None;
    loop {
        let conversion = store.conversion(None, id).await?;
        if shown != Some(conversion.status) {
            let amount = conversion.destination.amount.as_deref().unwrap_or("-");
            println!("{id} {} {amount} {}", conversion.status, conversion.destination.currency);
            shown = Some(conversion.status);
        }
        match conversion.status {
            Status::Completed => return Ok(ExitCode::SUCCESS),
            status if status.is_terminal() => {
                eprintln!("{}", conversion.failure_reason.unwrap_or_default());
                return Ok(ExitCode::FAILURE);
            }
            _ if started.elapsed() > WITHIN => {
                eprintln!(
                    "the conversion did not end within {} s: see `custody-indexer dev`",
                    WITHIN.as_secs()
                );
                return Ok(ExitCode::FAILURE);
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
