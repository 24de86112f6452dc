//! `reconcile`: the ledger against the chain, for every watched address and
//! asset at one height (see [`crate::reconcile`]).

use std::process::ExitCode;

use clap::Args;

use super::{decider::Via, server::Server};
use crate::{
    audit::Actor,
    chain::Chain,
    config::Chains,
    evm::rpc::EvmRpc,
    operators::Action,
    reconcile::{Line, ReconcileError, Report, evm, repair, rules},
    solana::rpc::SolanaRpc,
    store::Store,
};

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    #[arg(long)]
    pub chain: Chain,
    /// Only this account's addresses.
    #[arg(long, conflicts_with = "address")]
    pub account: Option<String>,
    /// Only this address.
    #[arg(long)]
    pub address: Option<String>,
    /// Only this asset (its symbol in the chain file).
    #[arg(long)]
    pub asset: Option<String>,
    /// The height to compare at (default: the lowest of the confirmed and
    /// the indexed height, below any deposit still `PENDING`).
    #[arg(long)]
    pub at_block: Option<u64>,
    /// One JSON object per address and asset, a line each.
    #[arg(long)]
    pub json: bool,
    /// Record the credits found in blocks where a balance rose unexplained
    /// as the deposits the watcher missed (once each, with their events),
    /// then reconcile again and answer that. On a production store only
    /// through the service (--server), as a treasury operator's repair.
    #[arg(long)]
    pub repair: bool,
    /// Why the repair is asked for (required with --server).
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub deciding: super::decider::Deciding,
    #[command(flatten)]
    pub chain_files: super::ChainFiles,
}

/// Exit 0 when everything agrees, 1 when something differs, 2 when a read
/// failed (naming which) or nothing could be reconciled (a request refused,
/// the store failing): never 1, which says the chain and the ledger differ.
impl ReconcileArgs {
    /// What the command names: every address and asset, or those named.
    fn ask(&self) -> evm::Ask {
        evm::Ask {
            account: self.account.clone(),
            address: self.address.clone(),
            asset: self.asset.clone(),
            at_block: self.at_block,
            slice: None,
        }
    }
}

pub async fn run(store: &Store, args: ReconcileArgs, chains: &Chains) -> anyhow::Result<ExitCode> {
    match reconcile(store, args, chains).await {
        Ok(code) => Ok(code),
        Err(error) => {
            eprintln!("error: {error:#}");
            Ok(ExitCode::from(2))
        }
    }
}

async fn reconcile(store: &Store, args: ReconcileArgs, chains: &Chains) -> anyhow::Result<ExitCode> {
    let config = chains.get(args.chain)?;
    if !crate::family::rules::block_ledger(config.family()) {
        return solana(store, args, config).await;
    }
    if args.repair {
        match args.deciding.via(store, args.reason.as_deref(), Action::Repair).await? {
            Via::Server(server) => return through(&server, &args).await,
            Via::Store(Actor::BreakGlass { .. }) => anyhow::bail!(
                "a repair is never a break-glass decision: ask through the service (--server), where a \
                 large one waits for a second treasury operator"
            ),
            Via::Store(_) => {}
        }
    }
    let rpc = EvmRpc::new(config.chain, &config.rpc_urls, config.max_block_range, config.batch_size, 1);
    let ask = args.ask();
    let Some(mut report) = reconciled(store, &rpc, config, &ask).await? else { return Ok(ExitCode::from(2)) };
    if args.repair && report.lines.iter().any(|l| l.at_block > report.settled) {
        eprintln!(
            "error: --repair records deposits CONFIRMED: only at or below block {}, the settled height",
            report.settled
        );
        return Ok(ExitCode::from(2));
    }
    if args.repair && !report.missed.is_empty() {
        // Only what the commit wrote: a block's credits the store already
        // held (its recorded deposits, a gas top-up) are left as they were.
        let credited = repair::credit(store, config, &report).await?;
        for (id, _) in &credited {
            let d = store.deposit(id).await?;
            let (amount, symbol, tx) = (&d.amount, &d.currency_symbol, &d.transaction_hash);
            eprintln!("repaired: {amount} {symbol} ({tx}) to {}", d.account_id);
        }
        eprintln!("repaired: {} deposits recorded", credited.len());
        let Some(again) = reconciled(store, &rpc, config, &ask).await? else { return Ok(ExitCode::from(2)) };
        report = again;
    }
    print(&report, args.json)?;
    Ok(ExitCode::from(rules::exit_code(&report)))
}

/// A Solana chain: reported, never repaired (a missed credit there is a
/// transaction's balance change, with no position a scan would give it).
async fn solana(
    store: &Store,
    args: ReconcileArgs,
    config: &crate::config::ChainConfig,
) -> anyhow::Result<ExitCode> {
    if args.repair {
        anyhow::bail!(
            "--repair is for EVM chains: on {} the differences are reported, never repaired",
            args.chain
        );
    }
    let rpc = SolanaRpc::new(config.chain, &config.rpc_urls);
    let ask = args.ask();
    let report = match crate::reconcile::solana::reconcile(store, &rpc, config, &ask).await {
        Ok(report) => report,
        Err(ReconcileError::Rpc(failure)) => {
            eprintln!("read failed: {failure}");
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
    };
    print(&report, args.json)?;
    Ok(ExitCode::from(rules::exit_code(&report)))
}

/// `--repair` through the service: the repair it made or keeps for a
/// second operator, printed; exit 0 when applied, 1 while it waits.
async fn through(server: &Server, args: &ReconcileArgs) -> anyhow::Result<ExitCode> {
    if args.at_block.is_some() {
        anyhow::bail!("--at-block is refused with --server: the service repairs at its settled height");
    }
    let reason = args.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    let reason = reason.ok_or_else(|| anyhow::anyhow!("--repair through the service needs --reason"))?;
    let body = serde_json::json!({
        "chain": args.chain.as_str(),
        "account_id": args.account,
        "address": args.address,
        "asset": args.asset,
        "reason": reason,
    });
    let repair = server.post("/operator/v1/reconciliation/repairs", &body).await?;
    let (id, status) = (repair["id"].as_str().unwrap_or(""), repair["status"].as_str().unwrap_or(""));
    if args.json {
        println!("{repair}");
    } else {
        let usd = repair["usd"].as_str().map(|u| format!("{u} USD")).unwrap_or_else(|| "unpriced".into());
        println!("repair {id}: {status} ({usd})");
        for credit in repair["credits"].as_array().into_iter().flatten() {
            println!(
                "  block {} {} {} to {} ({})",
                credit["block"],
                credit["amount"].as_str().unwrap_or(""),
                credit["asset"].as_str().unwrap_or(""),
                credit["account_id"].as_str().unwrap_or(""),
                credit["transaction_hash"].as_str().unwrap_or("")
            );
        }
    }
    if status == "APPLIED" {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "repair {id} awaits a second treasury operator: POST /operator/v1/reconciliation/repairs/{id}/approve"
    );
    Ok(ExitCode::from(1))
}

/// The report; `None` (said on standard error) when the height itself
/// could not be read.
async fn reconciled(
    store: &Store,
    rpc: &EvmRpc,
    config: &crate::config::ChainConfig,
    ask: &evm::Ask,
) -> anyhow::Result<Option<Report>> {
    match evm::reconcile(store, rpc, config, ask).await {
        Ok(report) => Ok(Some(report)),
        Err(ReconcileError::Rpc(failure)) => {
            eprintln!("read failed: {failure}");
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

fn print(report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        for line in &report.lines {
            println!("{}", serde_json::to_string(line)?);
        }
    } else {
        println!(
            "{:<44} {:<20} {:<8} {:>24} {:>24} {:>24} {:>10} BASELINE",
            "ADDRESS", "OF", "ASSET", "ONCHAIN", "LEDGER", "DIFFERENCE", "BLOCK"
        );
        for line in &report.lines {
            print_line(line);
        }
    }
    for skipped in &report.skipped {
        eprintln!("skipped {skipped}");
    }
    for failed in &report.failed {
        eprintln!("read failed: {failed}");
    }
    if !json {
        let mut addresses: Vec<&str> = report.lines.iter().map(|l| l.address.as_str()).collect();
        addresses.dedup();
        let mut differ: Vec<&str> =
            report.lines.iter().filter(|l| l.difference != "0").map(|l| l.address.as_str()).collect();
        differ.dedup();
        println!("reconciled {} addresses: {} differ", addresses.len(), differ.len());
    }
    Ok(())
}

fn print_line(line: &Line) {
    let block = line.divergent_block.map(|b| b.to_string()).unwrap_or_else(|| "-".into());
    // An account's id, or a platform wallet's role.
    let of = match (&line.wallet, &line.account_id) {
        (Some(wallet), _) => format!("{wallet} wallet"),
        (None, account) => account.clone().unwrap_or_default(),
    };
    println!(
        "{:<44} {:<20} {:<8} {:>24} {:>24} {:>24} {:>10} {}",
        line.address,
        of,
        line.asset,
        line.onchain,
        line.ledger,
        line.difference,
        block,
        line.baseline.as_str()
    );
    for m in &line.movements {
        println!(
            "  block {} {} {} {} {} {}",
            m.block, m.direction, m.amount, line.asset, m.how, m.transaction_hash
        );
    }
}
