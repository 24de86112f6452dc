//! `bank import FILE`: a bank's camt.054 file through the one door of bank
//! files ([`crate::bank_import`]), through the service (the file as the
//! body of `POST /operator/v1/bank/imports`) or on the store. `issuance
//! wires import` and `conversions wires import` are names of it.

use clap::{Args, Subcommand};
use serde_json::json;

use super::decider::{Deciding, Via};
use crate::{
    bank::{Unmatched, camt054_credits, sandbox},
    bank_import::{self, Accounts, AppliedCredit, BankImport, Wing},
    environment::Environment,
    issuance::{Approval, receiving, wires::Reporter},
    operators::Action,
    store::Store,
};

#[derive(Debug, Subcommand)]
pub enum BankCommand {
    /// Apply each credit of a bank's ISO 20022 camt.054 credit notification
    /// in the wing it belongs to: a mint instruction's memo mints, a
    /// virtual account's deposit message starts an on-ramp. A credit whose
    /// bank entry reference was applied before starts nothing again.
    /// Prints a line per credit applied, then per credit applied before,
    /// then each credit left out and why, then the counts.
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The camt.054 XML document.
    pub file: std::path::PathBuf,
    #[arg(long)]
    pub reason: String,
    #[command(flatten)]
    pub deciding: Deciding,
    /// The chain files: their issued assets' daily mint caps.
    #[command(flatten)]
    pub chain_files: super::ChainFiles,
    /// The platform's receiving bank (a JSON Bank account details object):
    /// a credit to its account number is applied. Without it, a store not
    /// stamped `production` takes the sandbox bank's; through the service,
    /// the service's own is used.
    #[arg(long, value_name = "FILE", env = receiving::RECEIVING_BANK_ENV)]
    pub receiving_bank: Option<std::path::PathBuf>,
}

pub async fn run(store: &Store, command: BankCommand) -> anyhow::Result<()> {
    match command {
        BankCommand::Import(args) => import(store, &args).await,
    }
}

/// Reads the file and applies it, then prints what it did.
pub async fn import(store: &Store, args: &ImportArgs) -> anyhow::Result<()> {
    let file = &args.file;
    let document =
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let done: BankImport = match args.deciding.via(store, Some(&args.reason), Action::Wire).await? {
        Via::Server(server) => {
            let body = json!({ "camt054": document, "reason": args.reason });
            serde_json::from_value(server.post("/operator/v1/bank/imports", &body).await?)?
        }
        Via::Store(actor) => {
            let credits = camt054_credits(document.as_bytes())
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let environment = store.environment().await?;
            let accounts = Accounts::of(receiving_bank(environment, args)?.as_ref());
            let approval =
                Approval::new(environment != Some(Environment::Sandbox), &args.chain_files.load()?);
            let by = Reporter { by: &actor, reason: &args.reason };
            bank_import::import(store, &credits, &accounts, by, &approval).await?
        }
    };
    print(&done);
    Ok(())
}

/// The receiving bank a store-side import compares credits against.
fn receiving_bank(
    environment: Option<Environment>,
    args: &ImportArgs,
) -> anyhow::Result<Option<serde_json::Value>> {
    match &args.receiving_bank {
        Some(path) => Ok(Some(receiving::load(path).map_err(|e| anyhow::anyhow!("--receiving-bank: {e}"))?)),
        None if environment == Some(Environment::Production) => Ok(None),
        None => Ok(Some(sandbox::receiving_account())),
    }
}

fn print(done: &BankImport) {
    for credit in &done.applied {
        println!("{}", line(credit));
    }
    for credit in &done.already_applied {
        println!("{} (applied before)", line(credit));
    }
    for credit in &done.unmatched {
        println!("{}", unmatched(credit));
    }
    println!(
        "{} applied, {} applied before, {} unmatched",
        done.applied.len(),
        done.already_applied.len(),
        done.unmatched.len()
    );
}

/// A credit applied: the wire and what it started.
fn line(credit: &AppliedCredit) -> String {
    let AppliedCredit { reference, amount, currency, status, .. } = credit;
    let or_dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".to_string());
    match credit.wing {
        Wing::Issuance => format!(
            "wire {reference}: {amount} {currency} for memo {}: mint {} {status}",
            or_dash(&credit.memo_id),
            or_dash(&credit.mint_id)
        ),
        Wing::OnRamp => format!(
            "wire {reference}: {amount} {currency} to virtual account {}: conversion {} {status}",
            or_dash(&credit.virtual_account_id),
            or_dash(&credit.conversion_id)
        ),
    }
}

fn unmatched(credit: &Unmatched) -> String {
    format!(
        "unmatched {}: {} {} {:?}: {}",
        credit.reference, credit.amount, credit.currency, credit.remittance, credit.reason
    )
}
