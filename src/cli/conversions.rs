//! `conversions`: operators' side of conversions. `wires record` is how a
//! wire to a virtual account enters in `production` (it works in `sandbox`
//! too), `wires import` is `bank import` under its older name;
//! `virtual-accounts open` and `refuse` record the bank's answer to a
//! virtual account in `production`; `payouts record` records the bank's
//! answer to an off-ramp's payout in `production`; `refunds retry` sends
//! an off-ramp's refund again once the last one provably cannot land;
//! `show` prints a conversion.

use clap::Subcommand;

use serde_json::{Value, json};

use super::{
    decider::{Deciding, Via},
    server::segment,
};
use crate::{
    amount::Cents,
    bank::Answer,
    conversions::virtual_account,
    conversions::{
        answers::{self, Answered},
        on_ramp,
    },
    issuance::wires,
    operators::Action,
    store::{NewVirtualWire, Store},
};

#[derive(Debug, Subcommand)]
pub enum ConversionsCommand {
    /// Wires that arrived at virtual accounts.
    #[command(subcommand)]
    Wires(WiresCommand),
    /// The bank's answers to virtual accounts asked for (`production`).
    #[command(subcommand, name = "virtual-accounts")]
    VirtualAccounts(VirtualAccountsCommand),
    /// The bank's answers to off-ramp payouts (`production`).
    #[command(subcommand)]
    Payouts(PayoutsCommand),
    /// Off-ramp refunds sent back from the settlement wallet.
    #[command(subcommand)]
    Refunds(RefundsCommand),
    /// One conversion.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum WiresCommand {
    /// Record a wire that arrived at a virtual account: it starts an
    /// `ON_RAMP` conversion, whose id is printed on the last line; the same
    /// reference again prints the same conversion and delivers nothing twice.
    Record {
        #[arg(long)]
        virtual_account_id: String,
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
    },
    /// `bank import`, under its older name: every credit of a bank's
    /// camt.054 file applied in the wing it belongs to.
    Import(super::bank::ImportArgs),
}

#[derive(Debug, Subcommand)]
pub enum VirtualAccountsCommand {
    /// The bank opened a `PENDING` virtual account under this account number.
    Open {
        id: String,
        /// The account number the bank gave it: unique.
        #[arg(long)]
        account_number: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        deciding: Deciding,
    },
    /// A second operator confirms the account number another recorded
    /// (production): the virtual account opens under it.
    Confirm {
        id: String,
        /// The account number you read from the bank: when given, it must
        /// be the one recorded.
        #[arg(long)]
        account_number: Option<String>,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        deciding: Deciding,
    },
    /// The bank refused a `PENDING` virtual account: `--reason` is shown as
    /// its `failure_reason`.
    Refuse {
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        deciding: Deciding,
    },
}

#[derive(Debug, Subcommand)]
pub enum PayoutsCommand {
    /// The off-ramps waiting for the bank's answer (`production`), and
    /// those whose stablecoin is owed back from the settlement wallet, with
    /// what each chain's settlement wallet must keep for them.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Record the bank's answer to an off-ramp's payout handed to it
    /// (`PAYOUT_INITIATED`): `paid` completes the conversion; `returned`
    /// (the payment came back) and `refused` (nothing was sent) send the
    /// stablecoin back to the account, after which it is `RETURNED` or
    /// `FAILED` with `--reason` as its `failure_reason`.
    /// Outside `sandbox`, `returned` and `refused` wait for a second
    /// operator's `confirm`.
    Record {
        id: String,
        #[arg(long, value_parser = ["paid", "returned", "refused"])]
        outcome: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        deciding: Deciding,
    },
    /// Confirm another operator's `returned` or `refused` answer: it
    /// applies, and the stablecoin goes back. Never the answering operator,
    /// never `--break-glass`.
    Confirm {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        deciding: Deciding,
    },
}

#[derive(Debug, Subcommand)]
pub enum RefundsCommand {
    /// Send an off-ramp's refund again now, without waiting out its
    /// backoff: refused unless the last refund provably can never land
    /// (dropped, reverted, failed before it was signed, or on Solana
    /// refused by every node until its blockhash expired). Recorded with
    /// `--reason`.
    Retry {
        /// The off-ramp conversion's id.
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        deciding: Deciding,
    },
}

pub async fn run(store: &Store, command: ConversionsCommand) -> anyhow::Result<()> {
    match command {
        ConversionsCommand::Wires(command) => wire_command(store, command).await?,
        ConversionsCommand::VirtualAccounts(command) => virtual_account(store, command).await?,
        ConversionsCommand::Payouts(PayoutsCommand::List { json }) => list_pending(store, json).await?,
        ConversionsCommand::Refunds(RefundsCommand::Retry { id, reason, deciding }) => {
            match deciding.via(store, Some(&reason), Action::Refund).await? {
                Via::Server(server) => {
                    let path = format!("/operator/v1/conversions/{}/refund/retry", segment(&id));
                    server.post(&path, &serde_json::json!({ "reason": reason })).await?;
                }
                Via::Store(actor) => {
                    crate::conversions::off_ramp::refunds::retry(store, &id, &actor, &reason).await?
                }
            }
            println!("conversion {id}: refund to be sent again at the chain's next step");
        }
        ConversionsCommand::Payouts(PayoutsCommand::Record { id, outcome, reason, deciding }) => {
            record_payout(store, &id, &outcome, &reason, deciding).await?
        }
        ConversionsCommand::Payouts(PayoutsCommand::Confirm { id, reason, deciding }) => {
            confirm_payout(store, &id, reason.as_deref(), deciding).await?
        }
        ConversionsCommand::Show { id, json } => {
            let conversion = store.conversion(None, &id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&conversion)?);
            } else {
                println!(
                    "{} {} {} {} {} -> {} {} {}",
                    conversion.id,
                    conversion.kind.as_str(),
                    conversion.status,
                    conversion.source.amount,
                    conversion.source.currency,
                    conversion.destination.amount.as_deref().unwrap_or("-"),
                    conversion.destination.currency,
                    conversion.failure_reason.as_deref().unwrap_or("")
                );
            }
        }
    }
    Ok(())
}

/// `conversions virtual-accounts`: the bank's answer to a virtual account.
async fn virtual_account(store: &Store, command: VirtualAccountsCommand) -> anyhow::Result<()> {
    if let VirtualAccountsCommand::Confirm { id, account_number, reason, deciding } = &command {
        return confirm_virtual_account(store, (id, account_number.as_deref()), reason.as_deref(), deciding)
            .await;
    }
    let (id, answer, reason, deciding) = match &command {
        VirtualAccountsCommand::Open { id, account_number, reason, deciding } => {
            (id, Ok(account_number.as_str()), reason.as_deref(), deciding)
        }
        VirtualAccountsCommand::Refuse { id, reason, deciding } => (id, Err(reason.as_str()), None, deciding),
        VirtualAccountsCommand::Confirm { .. } => unreachable!("confirmed above"),
    };
    let status = match deciding.via(store, reason.or(answer.err()), Action::VirtualAccount).await? {
        Via::Server(server) => {
            let (verb, body) = match answer {
                Ok(number) => ("open", json!({ "account_number": number, "reason": reason })),
                Err(why) => ("refuse", json!({ "reason": why })),
            };
            let path = format!("/operator/v1/virtual-accounts/{}/{verb}", segment(id));
            let account = server.post(&path, &body).await?;
            account["status"].as_str().unwrap_or_default().to_string()
        }
        Via::Store(actor) => {
            let environment =
                store.environment().await?.unwrap_or(crate::environment::Environment::Production);
            let account = match answer {
                Ok(number) => virtual_account::open(store, environment, (id, number), &actor, reason).await?,
                Err(_) => virtual_account::answer(store, id, answer, &actor, reason).await?,
            };
            account.status.as_str().to_string()
        }
    };
    println!("virtual account {id}: {status}");
    Ok(())
}

/// `conversions virtual-accounts confirm`: a second operator's
/// confirmation of a recorded account number.
async fn confirm_virtual_account(
    store: &Store,
    (id, number): (&str, Option<&str>),
    reason: Option<&str>,
    deciding: &Deciding,
) -> anyhow::Result<()> {
    let status = match deciding.via(store, reason, Action::VirtualAccount).await? {
        Via::Server(server) => {
            let path = format!("/operator/v1/virtual-accounts/{}/open/confirm", segment(id));
            let account = server.post(&path, &json!({ "account_number": number, "reason": reason })).await?;
            account["status"].as_str().unwrap_or_default().to_string()
        }
        Via::Store(actor) => {
            virtual_account::confirm(store, (id, number), &actor, reason).await?.status.as_str().to_string()
        }
    };
    println!("virtual account {id}: {status}");
    Ok(())
}

/// `conversions wires`: a wire to a virtual account recorded or imported.
async fn wire_command(store: &Store, command: WiresCommand) -> anyhow::Result<()> {
    match command {
        WiresCommand::Record { virtual_account_id, amount, reference, reason, deciding } => {
            let cents = Cents::parse(&amount).map_err(|e| anyhow::anyhow!("--amount: {e}"))?.0;
            let (id, status) = match deciding.via(store, Some(&reason), Action::Wire).await? {
                Via::Server(server) => {
                    let body = json!({ "virtual_account_id": virtual_account_id,
                        "amount": Cents(cents).to_string(), "reference": reference, "reason": reason });
                    let conversion = server.post("/operator/v1/conversions/wires", &body).await?;
                    (text(&conversion["id"]), text(&conversion["status"]))
                }
                Via::Store(recorder) => {
                    let new = NewVirtualWire {
                        organization: None,
                        virtual_account_id: &virtual_account_id,
                        wire: wires::by_operator("", cents, &reference, &recorder, &reason),
                    };
                    let conversion = on_ramp::record_wire(store, &new).await?.into_inner();
                    (conversion.id, conversion.status.to_string())
                }
            };
            println!(
                "wire {reference}: {} USD to virtual account {virtual_account_id}: conversion {status}",
                Cents(cents)
            );
            println!("{id}");
        }
        WiresCommand::Import(args) => super::bank::import(store, &args).await?,
    }
    Ok(())
}

/// A JSON string's text (empty when it is none).
fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// `payouts list`: each pending off-ramp, then what each chain's
/// settlement wallet owes back.
async fn list_pending(store: &Store, json: bool) -> anyhow::Result<()> {
    let pending = store.pending_payouts().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&pending)?);
        return Ok(());
    }
    let now = crate::store::now_micros();
    let mut owed: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for p in &pending {
        let minutes = (now - p.since_micros).max(0) / 60_000_000;
        println!(
            "{} {} {} {} {} on {} for {minutes} min (refunds tried {})",
            p.conversion_id,
            p.organization_id,
            p.waiting_for,
            p.amount,
            p.currency,
            p.chain,
            p.refund_attempts
        );
        if p.waiting_for == "REFUND" {
            *owed.entry((p.chain.clone(), p.currency.clone())).or_default() += p.cents;
        }
    }
    for ((chain, currency), cents) in owed {
        println!("the settlement wallet on {chain} owes back {} {currency}", Cents(cents));
    }
    Ok(())
}

/// `conversions payouts record`: an operator's answer to a payout.
async fn record_payout(
    store: &Store,
    id: &str,
    outcome: &str,
    reason: &str,
    deciding: Deciding,
) -> anyhow::Result<()> {
    let answer: Answer = outcome.to_uppercase().parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let said = match deciding.via(store, Some(reason), Action::Payout).await? {
        Via::Server(server) => {
            let body = serde_json::json!({ "outcome": answer.as_str(), "reason": reason });
            let answered =
                server.post(&format!("/operator/v1/conversions/{}/payout", segment(id)), &body).await?;
            answered["result"].as_str().unwrap_or_default().to_string()
        }
        Via::Store(actor) => {
            let alone = store.environment().await? == Some(crate::environment::Environment::Sandbox);
            match answers::answer(store, id, (answer, reason), &actor, alone).await? {
                Answered::Applied(_) => "APPLIED".to_string(),
                Answered::AwaitingConfirmation(_) => "AWAITING_CONFIRMATION".to_string(),
            }
        }
    };
    match said.as_str() {
        "AWAITING_CONFIRMATION" => println!(
            "conversion {id}: payout {}, awaiting a second operator's `conversions payouts confirm {id}`",
            answer.as_str()
        ),
        _ => println!("conversion {id}: payout {}", answer.as_str()),
    }
    Ok(())
}

/// `conversions payouts confirm`: a second operator's confirmation.
async fn confirm_payout(
    store: &Store,
    id: &str,
    reason: Option<&str>,
    deciding: Deciding,
) -> anyhow::Result<()> {
    let outcome = match deciding.via(store, reason, Action::Payout).await? {
        Via::Server(server) => {
            let body = serde_json::json!({ "reason": reason });
            let confirmed = server
                .post(&format!("/operator/v1/conversions/{}/payout/confirm", segment(id)), &body)
                .await?;
            confirmed["outcome"].as_str().unwrap_or_default().to_string()
        }
        Via::Store(actor) => answers::confirm(store, id, &actor, reason).await?.as_str().to_string(),
    };
    println!("conversion {id}: payout {outcome} confirmed");
    Ok(())
}
