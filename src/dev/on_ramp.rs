//! `dev on-ramp`: dollars wired to a virtual account of the running
//! `dev`'s account, delivered on chain as its USDC through an `ON_RAMP`
//! conversion. The virtual account is opened once (through the API, by
//! a request id of its own) and the wire simulated; `--follow` prints each
//! status the conversion takes.

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use alloy::transports::http::reqwest::Client;
use anyhow::{Context, bail};
use serde_json::json;

use super::{
    conversion::{Asked, ConversionArgs, WITHIN, follow},
    wire::post,
};
use crate::amount::Cents;
use crate::conversions::VirtualAccountStatus;

pub async fn run(args: ConversionArgs) -> anyhow::Result<ExitCode> {
    let Asked { dev, store, cents, account, identity } = args.asked().await?;
    let chain = args.chain;
    let client = Client::new();
    let request = json!({ "request_id": format!("dev-va-{chain}-{account}"),
        "destination": { "account_id": &account, "currency": "USDC", "chain": chain.as_str() },
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
    let wire = json!({ "virtual_account_id": va, "amount": Cents(cents).to_string(), "currency": "USD" });
    let answer = post(&client, &dev, "/v2/simulation/virtual-account-deposit", &wire).await?;
    let id = answer["conversion_id"].as_str().context("no conversion_id")?.to_string();
    eprintln!("wired {} USD to virtual account {va} of {account}: conversion", Cents(cents));
    println!("{id}");
    let outcome = if args.follow { follow(&store, &id).await? } else { ExitCode::SUCCESS };
    store.close().await;
    Ok(outcome)
}
