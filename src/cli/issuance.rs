//! `issuance`: operators' side of issuance. `wires record` is how a wire
//! enters in `production` (it works in `sandbox` too), `wires import` is
//! `bank import` under its older name, `wires approve` the
//! second operator's approval a recorded wire's mint waits for in
//! `production`, `mints` shows mints and `returns` the dollars failed mints
//! owe back.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{
    decider::{Deciding, Via},
    server::segment,
};

use crate::amount::Cents;
use crate::operators::Action;
use crate::{
    environment::Environment,
    issuance::{Approval, Mint, deploy::Coin, reconcile, returns, state::Status, wires},
    store::Store,
};

#[derive(Debug, Subcommand)]
pub enum IssuanceCommand {
    /// Place the platform's stablecoin on a test chain, the issuer key its
    /// only minter (EVM: a Stablecoin contract deployed by the gas sponsor;
    /// Solana: an SPL Token mint, the sponsor paying). Prints the chain
    /// file's `[[assets]]` lines listing it as issued. Needs the mnemonic.
    Deploy {
        #[arg(long)]
        chain: crate::chain::Chain,
        #[arg(long)]
        symbol: String,
        #[arg(long)]
        decimals: u8,
        /// The token's name (EVM; default: the symbol).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        chain_files: super::ChainFiles,
    },
    /// Wires that arrived at the receiving bank.
    #[command(subcommand)]
    Wires(WiresCommand),
    /// Mints: what each wire became.
    #[command(subcommand)]
    Mints(MintsCommand),
    /// The dollars of failed mints, owed back to their senders.
    #[command(subcommand)]
    Returns(ReturnsCommand),
    /// Prove, per chain and issued stablecoin, that the dollars received
    /// are minted, owed back or on their way, and that the supply on chain
    /// is what confirmed mints minted. Exit 1 naming every difference and
    /// the mints that explain it.
    Reconcile {
        /// Only this chain.
        #[arg(long)]
        chain: Option<crate::chain::Chain>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        chain_files: super::ChainFiles,
    },
}

#[derive(Debug, Subcommand)]
pub enum WiresCommand {
    /// Record a wire that arrived quoting a mint instruction's memo. The
    /// mint id is printed on the last line; the same reference again prints
    /// the same mint and mints nothing twice.
    Record {
        #[arg(long)]
        memo_id: String,
        /// Dollars, with at most 2 decimals (`250.00`).
        #[arg(long)]
        amount: String,
        /// The bank's reference of the wire: unique.
        #[arg(long)]
        reference: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        deciding: Deciding,
        /// The chain files: their issued assets' daily mint caps.
        #[command(flatten)]
        chain_files: super::ChainFiles,
    },
    /// `bank import`, under its older name: every credit of a bank's
    /// camt.054 file applied in the wing it belongs to.
    Import(super::bank::ImportArgs),
    /// Approve the mint of a recorded wire (another operator than its recorder).
    Approve(Decision),
    /// Refuse the mint of a recorded wire: it fails and its dollars are owed back.
    Refuse(Decision),
}

#[derive(Debug, Args)]
pub struct Decision {
    /// The wire's reference, or its mint's id.
    reference: String,
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    deciding: Deciding,
}

#[derive(Debug, Subcommand)]
pub enum MintsCommand {
    /// Mints by id, of one status if asked.
    List {
        #[arg(long)]
        status: Option<Status>,
        #[arg(long)]
        json: bool,
    },
    /// One mint.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReturnsCommand {
    /// Dollars owed back (`--all`: those sent back too).
    List {
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Record that the dollars of a failed mint were sent back.
    Complete {
        /// The failed mint's id.
        mint_id: String,
        /// The bank's reference of the return wire.
        #[arg(long)]
        reference: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        deciding: Deciding,
    },
}

/// `issuance deploy` acts on a chain, not on the store.
pub async fn deploy(command: IssuanceCommand) -> anyhow::Result<()> {
    let IssuanceCommand::Deploy { chain, symbol, decimals, name, chain_files } = command else {
        unreachable!("only deploy is run without a store")
    };
    let config = chain_files.load()?.get(chain)?.clone();
    let signer = super::transfers::signer(None)?;
    let signer = signer.as_ref();
    let coin = Coin { symbol: &symbol, name: name.as_deref().unwrap_or(&symbol), decimals };
    // A node's error may quote its URL, and an RPC URL may hold a key.
    let deployed = crate::issuance::deploy::deploy(&config, signer, &coin)
        .await
        .map_err(|e| anyhow::anyhow!(crate::redact::redact_urls(&format!("{e:#}"))))?;
    let issuer = crate::issuance::deploy::issuer(chain, signer)?;
    eprintln!(
        "{symbol} on {chain} at {}, minted by the issuer {issuer} alone; add to its chain file:",
        deployed.contract_address
    );
    print!("{}", deployed.toml);
    Ok(())
}

/// `issuance reconcile`: every issued stablecoin of the chain files (of
/// `chain`, if given) and every chain and stablecoin mints name, balanced.
pub async fn reconcile(
    store: &Store,
    chain: Option<crate::chain::Chain>,
    json: bool,
    chains: &crate::config::Chains,
) -> anyhow::Result<ExitCode> {
    let books = reconcile::books(store, chain, chains).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&books)?);
    }
    for b in books.iter().filter(|_| !json) {
        let supply = b.supply.as_deref().unwrap_or("unknown");
        println!(
            "{} on {}: received {} USD = minted {} + fees {} USD + returned {} USD + in flight {} USD; supply {supply} (being sent {}): {}",
            b.stablecoin_symbol,
            b.chain,
            b.fiat_received,
            b.minted,
            b.fees,
            b.fiat_returned,
            b.fiat_in_flight,
            b.being_sent,
            if b.agrees { "agree" } else { "DIFFER" }
        );
        for d in &b.differences {
            println!(
                "  {}; mints: {}",
                d.message,
                if d.mints.is_empty() { "-".into() } else { d.mints.join(", ") }
            );
        }
    }
    Ok(if books.iter().all(|b| b.agrees) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub async fn run(store: &Store, command: IssuanceCommand) -> anyhow::Result<()> {
    match command {
        IssuanceCommand::Deploy { .. } => return deploy(command).await,
        IssuanceCommand::Reconcile { chain, json, chain_files } => {
            if reconcile(store, chain, json, &chain_files.load()?).await? != ExitCode::SUCCESS {
                anyhow::bail!("the issuance books differ");
            }
        }
        IssuanceCommand::Wires(command) => wire_command(store, command).await?,
        IssuanceCommand::Mints(MintsCommand::List { status, json }) => {
            let mints = store.mint_page(status, None, 10_000).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&mints)?);
            } else {
                mints.iter().for_each(|m| println!("{}", line(m)));
            }
        }
        IssuanceCommand::Mints(MintsCommand::Show { id, json }) => {
            let mint = store.mint(None, &id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&mint)?);
            } else {
                println!("{}", line(&mint));
            }
        }
        IssuanceCommand::Returns(ReturnsCommand::List { all, json }) => {
            let returns = store.fiat_returns(!all).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&returns)?);
            }
            for r in returns.iter().filter(|_| !json) {
                let reference = r.reference.as_deref().unwrap_or("-");
                println!(
                    "{} {} USD {} {reference} {}",
                    r.mint.id,
                    r.mint.amount,
                    r.status,
                    r.mint.failure_reason.as_deref().unwrap_or("")
                );
            }
        }
        IssuanceCommand::Returns(ReturnsCommand::Complete { mint_id, reference, reason, deciding }) => {
            let amount = match deciding.via(store, Some(&reason), Action::Wire).await? {
                Via::Server(server) => {
                    let body = json!({ "reference": reference, "reason": reason });
                    let path = format!("/operator/v1/issuance/returns/{}/complete", segment(&mint_id));
                    let done = server.post(&path, &body).await?;
                    done["mint"]["amount"].as_str().unwrap_or_default().to_string()
                }
                Via::Store(actor) => {
                    let done = returns::complete(store, &mint_id, &reference, &actor, &reason).await?;
                    done.mint.amount
                }
            };
            println!("mint {mint_id}: {amount} USD returned ({reference})");
        }
    }
    Ok(())
}

/// The camt.054 document at `path`, as text.
/// `issuance wires`: a wire recorded or imported, a mint approved or refused.
async fn wire_command(store: &Store, command: WiresCommand) -> anyhow::Result<()> {
    match command {
        WiresCommand::Record { memo_id, amount, reference, reason, deciding, chain_files } => {
            let cents = Cents::parse(&amount).map_err(|e| anyhow::anyhow!("--amount: {e}"))?.0;
            let recorder = match deciding.via(store, Some(&reason), Action::Wire).await? {
                Via::Store(actor) => actor,
                Via::Server(server) => {
                    let body = json!({ "memo_id": memo_id, "amount": Cents(cents).to_string(),
                        "reference": reference, "reason": reason });
                    let mint = server.post("/operator/v1/issuance/wires", &body).await?;
                    println!(
                        "wire {reference}: {} USD for memo {memo_id}: mint {}",
                        Cents(cents),
                        mint["status"]
                    );
                    println!("{}", mint["id"].as_str().unwrap_or_default());
                    return Ok(());
                }
            };
            let wire = wires::by_operator(&memo_id, cents, &reference, &recorder, &reason);
            let approval = Approval::new(always_approved(store).await?, &chain_files.load()?);
            let mint = wires::arrive(store, &wire, &approval).await?.into_inner();
            println!("wire {reference}: {} USD for memo {memo_id}: mint {}", Cents(cents), mint.status);
            println!("{}", mint.id);
        }
        WiresCommand::Import(args) => super::bank::import(store, &args).await?,
        WiresCommand::Approve(d) => decide(store, d, true).await?,
        WiresCommand::Refuse(d) => decide(store, d, false).await?,
    }
    Ok(())
}

/// Whether every settled wire waits for a second operator: in `production`.
async fn always_approved(store: &Store) -> anyhow::Result<bool> {
    Ok(store.environment().await? != Some(Environment::Sandbox))
}

async fn decide(store: &Store, decision: Decision, approve: bool) -> anyhow::Result<()> {
    let reason = decision.reason.as_deref();
    let reference = &decision.reference;
    let (id, status) = match decision.deciding.via(store, reason, Action::Wire).await? {
        Via::Store(actor) => {
            let mint = wires::decide(store, reference, &actor, approve, reason).await?;
            (mint.id, mint.status.to_string())
        }
        Via::Server(server) => {
            let verb = if approve { "approve" } else { "refuse" };
            let path = format!("/operator/v1/issuance/wires/{}/{verb}", segment(reference));
            let mint = server.post(&path, &json!({ "reason": reason })).await?;
            (
                mint["id"].as_str().unwrap_or_default().to_string(),
                mint["status"].as_str().unwrap_or_default().to_string(),
            )
        }
    };
    println!("wire {reference}: mint {id} {status}");
    Ok(())
}

fn line(m: &Mint) -> String {
    format!(
        "{} {} {} USD -> {} {} on {} {} {}",
        m.id,
        m.status,
        m.amount,
        m.stablecoin_symbol,
        m.destination_address,
        m.chain,
        m.transaction_hash.as_deref().unwrap_or("-"),
        m.failure_reason.as_deref().unwrap_or("")
    )
}
