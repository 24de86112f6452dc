//! `dev on-ramp`: dollars wired to a virtual account of the running
//! `dev`'s account, delivered on chain as its USDC through an `ON_RAMP`
//! conversion. The virtual account is opened once (through the API, by
//! a request id of its own) and the wire simulated; `--follow` prints each
//! status the conversion takes.

use std::{
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use alloy::transports::http::reqwest::Client;
use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

use super::{DEFAULT_STATE_DIR, seed::EVM_CHAIN, state::StateDir, wire::post};
use crate::{
    chain::Chain,
    conversions::{VirtualAccountStatus, state::Status},
    issuance::{format_usd, parse_usd},
    store::Store,
};

#[derive(Debug, Args)]
pub struct OnRampArgs {
    /// Dollars wired, with at most 2 decimals (e.g. 25 or 25.50).
    #[arg(long)]
    amount: String,
    /// The local chain the USDC is delivered on.
    #[arg(long, default_value_t = EVM_CHAIN)]
    chain: Chain,
    /// The receiving account (default: the account `dev` seeded).
    #[arg(long)]
    account_id: Option<String>,
    /// The running `dev`'s state directory.
    #[arg(long, value_name = "DIR", env = "CUSTODY_INDEXER_DEV_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Then print each status the conversion takes and exit 0 once it is
    /// `COMPLETED`, 1 if it becomes `FAILED` or is not completed within a minute.
    #[arg(long)]
    follow: bool,
}

/// How long the virtual account may take to open, and `--follow` to complete.
const WITHIN: Duration = Duration::from_secs(60);

pub async fn run(args: OnRampArgs) -> anyhow::Result<ExitCode> {
    let dev = StateDir::existing(&args.state_dir)?.running()?.summary;
    let cents = parse_usd(&args.amount).map_err(|e| anyhow::anyhow!("--amount: {e}"))?;
    let chain = args.chain;
    let account = args.account_id.as_deref().unwrap_or(&dev.account_id);
    let store = Store::open(&dev.database_url).await?;
    let identity = store.account(account).await.with_context(|| format!("account {account}"))?.identity_id;
    let client = Client::new();
    let request = json!({ "request_id": format!("dev-va-{chain}-{account}"),
        "destination": { "account_id": account, "currency": "USDC", "chain": chain.as_str() },
        "source": { "banking_country": "US" } });
    let path = format!("/v2/identities/{identity}/virtual-accounts");
    let opened = post(&client, &dev, &path, &request).await?;
    let va = opened["id"].as_str().context("no virtual account id")?.to_string();
    let started = Instant::now();
    loop {
        match store.virtual_account(None, &va).await?.status {
            VirtualAccountStatus::Active => break,
            VirtualAccountStatus::Pending if started.elapsed() < WITHIN => {}
            status => bail!("virtual account {va} is {}", status.as_str()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let wire = json!({ "virtual_account_id": va, "amount": format_usd(cents), "currency": "USD" });
    let answer = post(&client, &dev, "/v2/simulation/virtual-account-deposit", &wire).await?;
    let id = answer["conversion_id"].as_str().context("no conversion_id")?.to_string();
    eprintln!("wired {} USD to virtual account {va} of {account}: conversion", format_usd(cents));
    println!("{id}");
    let outcome = if args.follow { follow(&store, &id).await? } else { ExitCode::SUCCESS };
    store.close().await;
    Ok(outcome)
}

/// Prints each status conversion `id` takes until it is terminal.
async fn follow(store: &Store, id: &str) -> anyhow::Result<ExitCode> {
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
                    "the conversion did not complete within {} s: see `custody-indexer dev`",
                    WITHIN.as_secs()
                );
                return Ok(ExitCode::FAILURE);
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
