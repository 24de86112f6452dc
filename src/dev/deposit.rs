//! `dev deposit`: a deposit to an account of the running `dev`. The native
//! coin comes from a funded local wallet that is not the platform's
//! (anvil's dev account 1; on Solana the funder kept in the state
//! directory); USDC as the platform issues it, a simulated wire minted to
//! the account (see `wire`). The running `dev` is reached through its
//! state directory's `dev.json`.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, bail};
use clap::Args;

use super::{
    DEFAULT_STATE_DIR, Summary, evm::LocalEvm, seed::EVM_CHAIN, solana::LocalSolana, state::StateDir,
};
use crate::{amount::Amount, chain::Chain, store::Store};

#[derive(Debug, Args)]
pub struct DepositArgs {
    /// The local chain: ETHEREUM_TESTNET (anvil) or SOLANA_DEVNET.
    #[arg(long)]
    chain: Chain,
    /// The asset's symbol: the native coin (ETH, SOL; the default), or
    /// USDC, which arrives as a simulated wire of `--amount` dollars the
    /// platform mints to the account (at most 2 decimals).
    #[arg(long, value_name = "SYMBOL")]
    asset: Option<String>,
    /// How much, in the asset's major unit (e.g. 25 or 0.5).
    #[arg(long)]
    amount: String,
    /// The receiving account (default: the account `dev` seeded).
    #[arg(long)]
    account_id: Option<String>,
    /// The running `dev`'s state directory.
    #[arg(long, value_name = "DIR", env = "CUSTODY_INDEXER_DEV_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Then follow the deposit: print each status it takes (`PENDING`,
    /// `CONFIRMED`) and exit 0 once it is `CONFIRMED`, 1 if it becomes
    /// `FAILED` or is not confirmed within a minute.
    #[arg(long)]
    follow: bool,
}

/// How long `--follow` waits for the deposit to be confirmed.
const FOLLOW_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The asset a deposit sends: the native coin, or a token.
enum What {
    Native {
        decimals: u8,
    },
    /// The issued USDC: minted for a simulated wire.
    Issued {
        decimals: u8,
    },
}

pub async fn run(args: DepositArgs) -> anyhow::Result<ExitCode> {
    let state = StateDir::existing(&args.state_dir)?;
    let dev = state.running()?.summary;
    let chain = args.chain;
    let Some(rpc) = dev.rpc_urls.get(&chain) else {
        let running: Vec<&str> = dev.rpc_urls.keys().map(|c| c.as_str()).collect();
        bail!("the running dev has no local {chain}: it runs {}", running.join(", "));
    };
    let what = asset(&dev, chain, args.asset.as_deref())?;
    let decimals = match &what {
        What::Native { decimals } | What::Issued { decimals } => *decimals,
    };
    let amount =
        Amount::parse(&args.amount, decimals).with_context(|| format!("--amount {}", args.amount))?;
    if amount.raw().is_zero() {
        bail!("--amount must be more than 0");
    }
    let to = address(&dev, chain, args.account_id.as_deref()).await?;
    let symbol = match what {
        What::Native { .. } => native(chain).0.to_string(),
        What::Issued { .. } => args.asset.clone().unwrap_or_default().to_uppercase(),
    };
    let hash = match what {
        What::Issued { .. } => {
            let account = args.account_id.as_deref().unwrap_or(&dev.account_id);
            super::wire::wire(&dev, chain, account, &symbol, &args.amount).await?
        }
        What::Native { .. } if chain == EVM_CHAIN => {
            LocalEvm::connect(rpc).await?.deposit(to.parse()?, amount.raw()).await?.to_string()
        }
        What::Native { .. } => {
            let raw = u64::try_from(amount.raw()).context("--amount is too large for Solana")?;
            let funder = super::solana::keypair(&*state.key_seed("solana-funder.json")?);
            LocalSolana::connect(rpc).deposit(&funder, &to.parse()?, raw).await?
        }
    };
    eprintln!("sent {} {symbol} on {chain} to {to}", args.amount);
    println!("{hash}");
    if args.follow {
        return follow(&dev.database_url, chain, &hash).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the statuses the deposits of transaction `hash` take, as the
/// running `dev` records them, until they are all final.
async fn follow(database_url: &str, chain: Chain, hash: &str) -> anyhow::Result<ExitCode> {
    use crate::deposits::resource::DepositStatus;
    let store = Store::open(database_url).await?;
    let started = std::time::Instant::now();
    let mut shown = std::collections::BTreeMap::new();
    let outcome = loop {
        let deposits = store.deposits_on_chain(chain).await?;
        let ours: Vec<_> = deposits
            .iter()
            .filter(|d| crate::family::rules::same_transaction(chain.family(), &d.transaction_hash, hash))
            .collect();
        for deposit in &ours {
            if shown.insert(deposit.id.clone(), deposit.status) != Some(deposit.status) {
                println!(
                    "{} {} {} {}",
                    deposit.id,
                    deposit.amount,
                    deposit.currency_symbol,
                    deposit.status.as_str()
                );
            }
        }
        if ours.iter().any(|d| d.status == DepositStatus::Failed) {
            break ExitCode::FAILURE;
        }
        if !ours.is_empty() && ours.iter().all(|d| d.status == DepositStatus::Confirmed) {
            break ExitCode::SUCCESS;
        }
        if started.elapsed() > FOLLOW_FOR {
            eprintln!(
                "the deposit was not confirmed within {} s: see `custody-indexer dev` and its health",
                FOLLOW_FOR.as_secs()
            );
            break ExitCode::FAILURE;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    store.close().await;
    Ok(outcome)
}

/// The asset `symbol` names on `chain` (none: the native coin).
fn asset(dev: &Summary, chain: Chain, symbol: Option<&str>) -> anyhow::Result<What> {
    let native = native(chain);
    let tokens = dev.assets.get(&chain).map(Vec::as_slice).unwrap_or_default();
    match symbol {
        None => Ok(What::Native { decimals: native.1 }),
        Some(s) if s.eq_ignore_ascii_case(native.0) => Ok(What::Native { decimals: native.1 }),
        Some(s) => match tokens.iter().find(|a| a.symbol.eq_ignore_ascii_case(s)) {
            Some(a) => Ok(What::Issued { decimals: a.decimals }),
            None => {
                let known: Vec<&str> =
                    std::iter::once(native.0).chain(tokens.iter().map(|a| a.symbol.as_str())).collect();
                bail!("{chain} has no asset {s} here: {}", known.join(", "))
            }
        },
    }
}

/// The native coin of a local chain: its symbol and decimals.
fn native(chain: Chain) -> (&'static str, u8) {
    crate::family::rules::local_native(chain.family())
}

/// The receiving address of `account_id` (the seeded account by default) on `chain`.
async fn address(dev: &Summary, chain: Chain, account_id: Option<&str>) -> anyhow::Result<String> {
    let id = account_id.unwrap_or(&dev.account_id);
    if id == dev.account_id
        && let Some(address) = dev.addresses.get(&chain)
    {
        return Ok(address.clone());
    }
    let store = Store::open(&dev.database_url).await?;
    let account = store.account(id).await.with_context(|| format!("account {id}"))?;
    store.close().await;
    let address = account.addresses.into_iter().find(|a| a.chains.contains(&chain));
    address.map(|a| a.address).with_context(|| format!("account {id} has no address on {chain}"))
}
