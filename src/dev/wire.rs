//! `dev deposit --asset USDC`: USDC reaches an account as the platform
//! issues it, never from a faucet. A simulated wire of the amount in
//! dollars, quoting the memo of the account's mint instruction (created
//! once through the API), becomes a mint the chain's sender sends; the
//! deposit to follow is that mint transaction's.

use std::time::{Duration, Instant};

use alloy::transports::http::reqwest::Client;
use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::Summary;
use crate::amount::Cents;
use crate::{chain::Chain, issuance::state::Status, store::Store, transfers::TxRole};

/// How long `dev deposit` waits for the mint's transaction.
const SENT_WITHIN: Duration = Duration::from_secs(60);

/// Wires `amount` dollars for `account`'s `symbol` on `chain` and answers
/// the hash of the transaction that mints them.
pub async fn wire(
    dev: &Summary,
    chain: Chain,
    account: &str,
    symbol: &str,
    amount: &str,
) -> anyhow::Result<String> {
    let cents = Cents::parse(amount)
        .map_err(|e| anyhow::anyhow!("--amount {amount}: {symbol} arrives as dollars wired: {e}"))?
        .0;
    let store = Store::open(&dev.database_url).await?;
    let identity = store.account(account).await.with_context(|| format!("account {account}"))?.identity_id;
    let client = Client::new();
    let instruction = json!({
        "request_id": format!("dev-{symbol}-{chain}-{account}"), "identity_id": identity,
        "stablecoin_symbol": symbol, "chain": chain.as_str(), "mint_destination_address_id": account,
    });
    let memo = post(&client, dev, "/v2/issuance/mint-instructions", &instruction).await?["memo_id"].clone();
    let wire = json!({ "amount": Cents(cents).to_string(), "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
    let answer = post(&client, dev, "/v2/simulation/fiat-deposit", &wire).await?;
    let mint = answer["mint_id"].as_str().context("the simulation answered no mint_id")?.to_string();
    eprintln!("wired {} USD quoting memo {}: mint {mint}", Cents(cents), memo.as_str().unwrap_or_default());
    let started = Instant::now();
    let hash = loop {
        if let Some(hash) = sent(&store, &mint).await? {
            break hash;
        }
        if started.elapsed() > SENT_WITHIN {
            bail!("mint {mint} has no transaction after {} s: see the dev's log", SENT_WITHIN.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    store.close().await;
    Ok(hash)
}

/// The hash of the transaction minting `mint`, once signed; an error if
/// the mint failed.
async fn sent(store: &Store, mint: &str) -> anyhow::Result<Option<String>> {
    let found = store.mint(None, mint).await?;
    if found.status == Status::Failed {
        bail!("mint {mint} failed: {}", found.failure_reason.unwrap_or_default());
    }
    let Some(transfer) = store.mint_transfer(mint).await? else { return Ok(None) };
    let txs = store.transfer_transactions(&transfer).await?;
    Ok(txs.into_iter().find(|t| t.role == TxRole::Transfer).map(|t| t.hash))
}

/// POSTs `body` to the running dev's API with its key: the answer's JSON.
pub(super) async fn post(client: &Client, dev: &Summary, path: &str, body: &Value) -> anyhow::Result<Value> {
    let answer = client
        .post(format!("{}{path}", dev.api_url))
        .bearer_auth(&dev.api_key)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .with_context(|| format!("POST {path} to the running dev"))?;
    let status = answer.status();
    let bytes = answer.bytes().await?;
    if !status.is_success() {
        bail!("POST {path} answered {status}: {}", String::from_utf8_lossy(&bytes));
    }
    serde_json::from_slice(&bytes).with_context(|| format!("POST {path} answered no JSON"))
}
