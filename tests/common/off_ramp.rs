//! Off-ramps on a real chain: a platform whose identity holds USDC minted
//! for a wire, its bank accounts, off-ramp requests and their ends.

use std::time::Duration;

use alloy::{
    primitives::{Address, U256},
    transports::http::reqwest::Method,
};
use serde_json::{Value, json};

use super::{
    api::{Answer, send_json},
    cli::Process,
    db::Backend,
    dead_port, eventually,
    issuance::us_bank,
    platform::{Coin, Platform},
};

/// 1 USDC in its smallest unit.
pub const USDC: u64 = 1_000_000;

/// A platform whose identity `ada` holds 300 USDC at `ada-1`, minted for a
/// wire, with `run` (sandbox, quotes living `ttl` seconds) on `port`, and
/// its settlement wallet funded for gas.
pub async fn funded(backend: Backend, ttl: &str) -> (Platform, u16, Process, Address) {
    funded_with_keys(backend, ttl, super::transfers::mnemonic_keys()).await
}

/// As [`funded`], every key where `keys` (a signer's variables) says.
pub async fn funded_with_keys(
    backend: Backend,
    ttl: &str,
    keys: Vec<(String, String)>,
) -> (Platform, u16, Process, Address) {
    let platform = Platform::with_keys(backend, keys).await;
    let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
    let settlement: Address = wallets[0]["settlement"].as_str().unwrap().parse().unwrap();
    let anvil = &platform.anvil;
    anvil.send_eth(anvil.accounts[0], settlement, U256::from(super::transfers::ETH)).await;
    let port = dead_port();
    let env = [("CUSTODY_INDEXER_ENVIRONMENT", "sandbox"), ("CUSTODY_INDEXER_QUOTE_TTL_SECS", ttl)];
    let run = platform.run_with(port, &env);
    let mint = platform.wire(port, "300.00").await;
    platform.completed(port, &mint).await;
    assert_eq!(platform.balance().await, U256::from(300 * USDC));
    (platform, port, run, settlement)
}

/// A bank account of `ada`: a US one with `number`, or over `rail` (`mx`,
/// `swift`): its id.
pub async fn bank(platform: &Platform, port: u16, rail: &str, number: &str) -> String {
    let mut details = us_bank(number);
    let map = details.as_object_mut().unwrap();
    match rail {
        "mx" => {
            map.remove("routing_number");
            map.insert("clabe".into(), json!("032180000118359719"));
        }
        "swift" => {
            map.remove("routing_number");
            map.insert("swift_or_bic_number".into(), json!("DEUTDEFF"));
        }
        _ => {}
    }
    let body = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "identity_id": "ada",
        "bank_account_details": details });
    platform.post(port, "/v2/issuance/bank-accounts", &body).await["id"].as_str().unwrap().to_string()
}

pub fn off_ramp(request_id: &str, bank: &str, amount: &str, quote: Option<&str>) -> Value {
    let mut body = json!({ "request_id": request_id, "type": "OFF_RAMP", "account_id": "ada-1",
        "payment_instructions_id": bank, "amount": amount,
        "source": { "currency": "USDC", "chain": super::CHAIN.as_str() } });
    if let Some(quote) = quote {
        body["quote_id"] = json!(quote);
    }
    body
}

pub async fn submit(platform: &Platform, port: u16, body: &Value) -> Answer {
    let url = format!("http://127.0.0.1:{port}/v2/conversions");
    send_json(Method::POST, &url, Some(&platform.key), Some(body)).await
}

pub async fn quote(platform: &Platform, port: u16, bank: &str, amount: &str) -> Value {
    let query = format!(
        "/v2/conversions/quotes?source_currency=USDC&source_amount={amount}&destination_currency=MXN&payment_instructions_id={bank}"
    );
    let url = format!("http://127.0.0.1:{port}{query}");
    let answer = super::api::send(Method::GET, &url, Some(&platform.key)).await;
    assert_eq!(answer.status, 201, "{answer:?}");
    answer.body
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Every event of the organization, in commit order.
pub async fn all_events(platform: &Platform, port: u16) -> Vec<Value> {
    let (mut events, mut after) = (Vec::new(), String::new());
    loop {
        let page = platform.get(port, &format!("/v2/events?limit=100{after}")).await;
        let batch = page["events"].as_array().unwrap().clone();
        if batch.is_empty() {
            return events;
        }
        after = format!("&after={}", page["cursor"].as_str().unwrap());
        events.extend(batch);
    }
}

/// The statuses `conversion_notification_update` announced for `id`, with
/// their envelope ids checked stable.
pub async fn announced(platform: &Platform, port: u16, id: &str) -> Vec<String> {
    let events = all_events(platform, port).await;
    let page = json!({ "events": events });
    super::api::events_about(&page, "conversion_notification_update", id)
        .iter()
        .map(|e| {
            let status = e["data"]["status"].as_str().unwrap().to_string();
            assert_eq!(e["id"], format!("{id}-{}", status.to_lowercase()), "{e}");
            status
        })
        .collect()
}

/// Mines a block each poll until conversion `id` is terminal: its read.
pub async fn ended(platform: &Platform, port: u16, id: &str) -> Value {
    eventually(Duration::from_secs(120), &format!("conversion {id} terminal"), || async {
        platform.anvil.mine(1).await;
        let conversion = platform.get(port, &format!("/v2/conversions/{id}")).await;
        ["COMPLETED", "FAILED", "RETURNED"].contains(&conversion["status"].as_str()?).then_some(conversion)
    })
    .await
}

pub async fn usdc_of(platform: &Platform, owner: Address) -> U256 {
    Coin::new(platform.usdc, &platform.anvil.provider).balanceOf(owner).call().await.unwrap()
}

/// Mints `amount` USDC to `ada-1` as the issuer, outside any wire (anvil
/// lets the test send as the issuer's address).
pub async fn fund_directly(platform: &Platform, amount: u64) {
    use alloy::providers::Provider;
    let provider = &platform.anvil.provider;
    provider.raw_request::<_, Value>("anvil_impersonateAccount".into(), (platform.issuer,)).await.unwrap();
    let coin = Coin::new(platform.usdc, provider);
    let minted =
        coin.mint(platform.account, U256::from(amount * USDC)).from(platform.issuer).send().await.unwrap();
    assert!(minted.get_receipt().await.unwrap().status());
}
