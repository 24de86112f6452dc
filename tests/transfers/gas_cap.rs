//! EIP-7825's cap on one transaction's gas, at acceptance: a transfer whose
//! call needs more than 16,777,216 gas is refused with `400
//! GAS_LIMIT_EXCEEDED`, whether the node says how much it needs (anvil) or
//! only that its estimate stopped at the cap (geth since Osaka); a node's
//! own trouble is asked again and, lasting, answered `503`, never so.

use crate::common;

use alloy::primitives::U256;
use common::{anvil::Mined, api::Answer, db::Backend, transfers::Setup};
use serde_json::json;

const CAP: &str = "16777216";

/// A new transfer request of `amount` TUSD from the omnibus account.
async fn post(s: &Setup, amount: &str) -> Answer {
    let body = json!({
        "request_id": uuid::Uuid::new_v4().to_string(),
        "account_id": "treasury",
        "amount": amount,
        "currency_symbol": "TUSD",
        "address_destination": { "address": s.outside.to_string(), "chain": common::CHAIN.as_str() },
    });
    s.post(&body).await
}

#[tokio::test]
async fn a_transfer_needing_more_gas_than_a_transaction_may_carry_is_refused_at_acceptance() {
    let s = Setup::with_rpc(Backend::Sqlite, "", true).await;
    s.create_account("treasury", "OMNIBUS");
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.tusd).mint(s.omnibus, U256::from(50_000_000)).from(minter).mined().await;
    s.anvil.make_heavy(s.tusd, 20_000_000).await;
    let faults = &s.proxy.as_ref().unwrap().faults;
    let _serve = s.start("serve").await;

    let refused = post(&s, "1").await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str()),
        (400, Some("GAS_LIMIT_EXCEEDED")),
        "{refused:?}"
    );
    let message = refused.body["message"].as_str().unwrap();
    assert!(message.contains(CAP) && message.contains("EIP-7825"), "{message}");
    let needed: u64 = message.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(needed > 20_000_000, "the node's estimate is named: {message}");

    // Six answers of a backend behind: more than the transport's own three
    // retries, so acceptance asks again too.
    let behind = ("eth_estimateGas".to_string(), -32000, "header not found".to_string(), 6);
    faults.method_errors.lock().unwrap().push(behind);
    let refused = post(&s, "2").await;
    assert_eq!(refused.body["code"], "GAS_LIMIT_EXCEEDED", "{refused:?}");

    // geth since Osaka stops its estimate at the cap and says so.
    let geth = ("eth_estimateGas".to_string(), -32000, format!("gas required exceeds allowance ({CAP})"), 1);
    faults.method_errors.lock().unwrap().push(geth);
    let refused = post(&s, "3").await;
    assert_eq!(refused.body["code"], "GAS_LIMIT_EXCEEDED", "{refused:?}");
    let message = refused.body["message"].as_str().unwrap();
    assert!(message.contains("more gas than its estimate allows") && message.contains(CAP), "{message}");

    // A revert whose reason reads like it is the call's own answer: the
    // balance checks decide (here: accepted).
    let revert = (
        "eth_estimateGas".to_string(),
        3,
        format!("execution reverted: gas required exceeds allowance ({CAP})"),
        1,
    );
    faults.method_errors.lock().unwrap().push(revert);
    let accepted = post(&s, "3.5").await;
    assert_eq!(accepted.status, 201, "{accepted:?}");

    // A node that keeps failing is unavailable, not a verdict on the call.
    let down = ("eth_estimateGas".to_string(), -32000, "header not found".to_string(), 1000);
    faults.method_errors.lock().unwrap().push(down);
    let unavailable = post(&s, "4").await;
    faults.method_errors.lock().unwrap().clear();
    assert_eq!(
        (unavailable.status, unavailable.body["code"].as_str()),
        (503, Some("CHAIN_UNAVAILABLE")),
        "{unavailable:?}"
    );
    assert!(unavailable.body["message"].as_str().unwrap().contains("eth_estimateGas"), "{unavailable:?}");

    // Nothing was held for the refused ones; a lighter call is accepted.
    s.anvil.make_heavy(s.tusd, 100_000).await;
    let accepted = post(&s, "5").await;
    assert_eq!((accepted.status, accepted.body["status"].as_str()), (201, Some("ACCEPTED")), "{accepted:?}");
    let transfers = s.get("/v2/crypto/transfers?account_id=treasury").await.body;
    assert_eq!(transfers["transfers"].as_array().unwrap().len(), 2, "only the accepted ones: {transfers}");
}

/// A request is judged on what the service knows before it asks a node:
/// while the chain's node answers nothing, an account whose identity
/// cannot transact, an unknown asset and a bad destination are refused
/// with their `400`, and only a request the node must judge answers `503`.
#[tokio::test]
async fn a_request_is_judged_on_what_the_service_knows_before_any_node_is_asked() {
    let s = Setup::with_rpc(Backend::Sqlite, "", true).await;
    s.create_account("treasury", "OMNIBUS");
    for (account, status) in [("suspended", "SUSPENDED"), ("pending", "PENDING_ONBOARDING")] {
        let identity = format!("identity-{account}");
        s.env.identity_in("acme", &identity, status);
        let create = ["accounts", "create", "--organization", "acme", "--account-id", account];
        s.cli(&[&create[..], &["--identity-id", &identity, "--type", "SEGREGATED"]].concat());
    }
    let _serve = s.start("serve").await;
    let faults = &s.proxy.as_ref().unwrap().faults;
    faults.status.store(503, std::sync::atomic::Ordering::SeqCst);
    faults.fail_next.store(1_000_000, std::sync::atomic::Ordering::SeqCst);

    let request = |changes: serde_json::Value| {
        let mut body = json!({
            "request_id": uuid::Uuid::new_v4().to_string(),
            "account_id": "treasury",
            "amount": "1",
            "currency_symbol": "TUSD",
            "address_destination": { "address": s.outside.to_string(), "chain": common::CHAIN.as_str() },
        });
        for (key, value) in changes.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };
    let cases = [
        (json!({ "account_id": "suspended" }), 400, "ACCOUNT_NOT_ACTIVE", "FROZEN"),
        (json!({ "account_id": "pending" }), 400, "ACCOUNT_NOT_ACTIVE", "identity is PENDING_ONBOARDING"),
        (
            json!({ "currency_symbol": "DOGE" }),
            400,
            "INVALID_REQUEST",
            "currency_symbol: DOGE is not supported",
        ),
        (
            json!({ "address_destination": { "address": "0x12", "chain": common::CHAIN.as_str() } }),
            400,
            "INVALID_REQUEST",
            "address_destination.address:",
        ),
        (json!({ "amount": "0" }), 400, "INVALID_REQUEST", "amount: must be positive"),
        // Control: a request only the node can judge (the account's balance
        // and the call's gas) waits for it.
        (json!({}), 503, "CHAIN_UNAVAILABLE", ""),
    ];
    for (changes, status, code, mentions) in cases {
        let answer = s.post(&request(changes.clone())).await;
        assert_eq!(
            (answer.status, answer.body["code"].as_str()),
            (status, Some(code)),
            "{changes}: {answer:?}"
        );
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(mentions), "{changes}: {message}");
    }
}
