//! `dev off-ramp`: the running `dev`'s account's USDC paid out by a US
//! wire to a bank account of its identity, through an `OFF_RAMP`
//! conversion. The bank account is registered once per account number (the
//! sandbox bank returns a payout to one ending `9999` and refuses one
//! ending `8888`); `--follow` prints each status the conversion takes.

use std::process::ExitCode;

use alloy::transports::http::reqwest::Client;
use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::{
    conversion::{Asked, ConversionArgs, follow},
    wire::post,
};
use crate::amount::Cents;

#[derive(Debug, Args)]
pub struct OffRampArgs {
    #[command(flatten)]
    conversion: ConversionArgs,
    /// The US bank account number paid: ending `9999` the payment is
    /// returned, `8888` refused; anything else is paid.
    #[arg(long, default_value = "000123456789")]
    account_number: String,
}

pub async fn run(args: OffRampArgs) -> anyhow::Result<ExitCode> {
    let Asked { dev, store, cents, account, identity } = args.conversion.asked().await?;
    let client = Client::new();
    let number = &args.account_number;
    let details = json!({ "bank_name": "Dev Bank", "account_holder_name": "Dev Identity", "type": "CHECKING",
        "routing_number": "021000021", "account_number": number, "account_owner_type": "INDIVIDUAL",
        "address": { "street_line_1": "1 Main St", "city": "New York", "postal_code": "10001",
                     "country": "US", "region_code": "NY" } });
    let bank = json!({ "request_id": format!("dev-bank-{identity}-{number}"),
        "identity_id": identity, "bank_account_details": details });
    let bank = post(&client, &dev, "/v2/issuance/bank-accounts", &bank).await?;
    let bank = bank["id"].as_str().context("no bank account id")?.to_string();
    let request = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "type": "OFF_RAMP",
        "account_id": account, "payment_instructions_id": bank, "amount": Cents(cents).to_string(),
        "source": { "currency": "USDC", "chain": args.conversion.chain.as_str() } });
    let conversion = post(&client, &dev, "/v2/conversions", &request).await?;
    let id = conversion["id"].as_str().context("no conversion id")?.to_string();
    eprintln!("paying out {} USDC of {account} to bank account {bank}: conversion", Cents(cents));
    println!("{id}");
    let outcome = if args.conversion.follow { follow(&store, &id).await? } else { ExitCode::SUCCESS };
    store.close().await;
    Ok(outcome)
}
