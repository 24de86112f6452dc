//! Gas-sponsored transfers end to end: `run` with keys from a mnemonic,
//! sending on a real anvil through every route (EIP-3009 authorization, gas
//! top-up, omnibus), fee bumps and cancellation on a node that does not mine,
//! restarts, nonce drift, validation, idempotency and the gas ledger checked
//! against the receipts.

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use alloy::{
    primitives::{Address, B256, U256},
    providers::Provider,
    transports::http::reqwest::Method,
};
use common::{
    CHAIN, OPERATOR_TOKEN,
    anvil::Mined,
    api::{answers, send},
    db::Backend,
    eventually,
    transfers::{ETH, Setup, usd, usd_micros},
};
use custody_indexer::{
    amount::Amount,
    store::{SentTransaction, TxRole},
};
use serde_json::{Value, json};

#[tokio::test]
async fn every_route_sends_once_and_the_gas_ledger_matches_the_receipts() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let s = Setup::new(backend, "").await;
        let alice = s.create_account("alice", "SEGREGATED");
        let bob = s.create_account("bob", "SEGREGATED");
        let treasury = s.create_account("treasury", "OMNIBUS");
        assert_eq!(treasury, s.omnibus, "the omnibus account is the omnibus wallet");
        assert_ne!(alice, bob);

        let minter = s.anvil.accounts[5];
        s.anvil.token(s.tusd).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
        s.anvil.token(s.usdc).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
        s.anvil.token(s.tusd).mint(s.omnibus, U256::from(50_000_000)).from(minter).mined().await;
        s.anvil.send_eth(s.anvil.accounts[5], alice, U256::from(ETH / 2)).await;
        let (sponsor_before, omnibus_before) = (s.eth(s.sponsor).await, s.eth(s.omnibus).await);

        let mut run = s.start("run").await;
        let authorization = s.transfer("alice", "10", "USDC", s.outside).await;
        // The legacy destination form, to another platform account.
        let legacy = json!({
            "request_id": uuid::Uuid::new_v4().to_string(), "account_id": "alice", "amount": "5",
            "currency_symbol": "TUSD", "destination_address": bob.to_string(), "destination_chain": CHAIN.as_str(),
        });
        let answer = s.post(&legacy).await;
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        let top_up_token = answer.body["id"].as_str().unwrap().to_string();
        let omnibus_native = s.transfer("treasury", "1.5", "ETH", s.outside).await;
        let omnibus_token = s.transfer("treasury", "3", "TUSD", s.outside).await;
        let mut settled = BTreeMap::new();
        // Between the block that includes alice's token transfer and the step
        // that records its fee, her address holds less than the store knows
        // of: acceptance then under-states what she may send, never the
        // reverse. So all her ether is asked for once that fee is recorded.
        settled.insert(top_up_token.clone(), s.until(&top_up_token, "CONFIRMED", true).await);
        // All of alice's ether: the sponsor must top up the gas.
        let top_up_native = s.transfer("alice", "0.5", "ETH", s.outside).await;
        let all = [&authorization, &top_up_token, &omnibus_native, &omnibus_token, &top_up_native];
        for id in all {
            settled.insert(id.clone(), s.until(id, "CONFIRMED", true).await);
        }

        // Funds arrived exactly.
        assert_eq!(s.eth(s.outside).await, U256::from(2 * ETH));
        assert_eq!(s.tokens(s.usdc, s.outside).await, U256::from(10_000_000));
        assert_eq!(s.tokens(s.tusd, s.outside).await, U256::from(3_000_000));
        assert_eq!(s.tokens(s.tusd, bob).await, U256::from(5_000_000));
        assert_eq!(s.tokens(s.usdc, alice).await, U256::from(90_000_000));

        // Who sent what: the routes.
        let store = s.env.store().await;
        let senders = |txs: &[SentTransaction]| -> Vec<(TxRole, String)> {
            txs.iter().map(|t| (t.role, t.sender.clone())).collect()
        };
        let included = s.included(&store, &authorization).await;
        assert_eq!(
            senders(&included),
            [(TxRole::Transfer, s.sponsor.to_string())],
            "EIP-3009: the sponsor sends"
        );
        let included = s.included(&store, &top_up_token).await;
        assert_eq!(
            senders(&included),
            [(TxRole::TopUp, s.sponsor.to_string()), (TxRole::Transfer, alice.to_string())],
            "top-up first, then the account's own transaction"
        );
        // The second transfer tops up only what the first one's gas money lacks.
        let included = s.included(&store, &top_up_native).await;
        assert_eq!(
            included.last().map(|t| (t.role, t.sender.clone())),
            Some((TxRole::Transfer, alice.to_string()))
        );
        assert!(
            included.iter().filter(|t| t.role == TxRole::TopUp).all(|t| t.sender == s.sponsor.to_string())
        );
        // Alice's own ether paid no gas: all that is left at her address is the
        // sponsor's, and none of it is available to her.
        let left = store.sponsored_gas_left(CHAIN, &alice.to_string()).await.unwrap();
        assert_eq!(s.eth(alice).await, left);
        let balances = s.get("/v2/accounts/alice/balances").await.body;
        let eth =
            balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == "ETH").unwrap().clone();
        assert_eq!(eth["available"], "0", "{balances}");
        for id in [&omnibus_native, &omnibus_token] {
            assert_eq!(senders(&s.included(&store, id).await), [(TxRole::Transfer, s.omnibus.to_string())]);
        }

        // The ledger holds each included transaction's receipt fee, to the wei,
        // and the API's network_fee is their sum.
        let mut sponsor_paid = U256::ZERO;
        let mut omnibus_paid = U256::ZERO;
        let mut expected_usd = U256::ZERO;
        for id in all {
            let mut total = U256::ZERO;
            let mut entries = store.gas_entries(id).await.unwrap();
            entries.sort();
            let mut expected = Vec::new();
            for tx in s.included(&store, id).await {
                let fee = s.fee(&tx.hash).await;
                total += fee;
                expected_usd += usd_micros(fee);
                expected.push((tx.hash.clone(), "NETWORK_FEE".to_string(), fee));
                match tx.sender.parse::<Address>().unwrap() {
                    a if a == s.sponsor => sponsor_paid += fee,
                    a if a == s.omnibus => omnibus_paid += fee,
                    _ => {}
                }
                if tx.role == TxRole::TopUp {
                    // The top-up's value left the sponsor too.
                    let sent = s
                        .anvil
                        .provider
                        .get_transaction_by_hash(tx.hash.parse().unwrap())
                        .await
                        .unwrap()
                        .unwrap();
                    sponsor_paid += alloy::consensus::Transaction::value(sent.inner.inner());
                }
            }
            expected.sort();
            assert_eq!(entries, expected, "{id}");
            let fee = &settled[id]["network_fee"];
            assert_eq!(fee["currency_symbol"], "ETH");
            assert_eq!(Amount::parse(fee["amount"].as_str().unwrap(), 18).unwrap().raw(), total, "{id}");
            assert!(settled[id]["transaction_hash"].is_string());
            assert!(settled[id]["confirmed_at"].is_string());
        }
        assert_eq!(
            sponsor_before - s.eth(s.sponsor).await,
            sponsor_paid,
            "the sponsor paid fees and top-ups only"
        );
        assert_eq!(
            omnibus_before - s.eth(s.omnibus).await,
            omnibus_paid + U256::from(3 * ETH / 2),
            "the omnibus wallet paid its ether sent and its own gas"
        );

        // The credit: spent valued per entry, remaining zero past 100 USD, the rest billable.
        let usage = s.get("/v2/gas/usage").await.body;
        assert_eq!(usage["spent_usd"], usd(expected_usd));
        assert!(expected_usd > U256::from(100_000_000u64), "the test spends past the credit");
        assert_eq!(usage["credit_usd"], "100");
        assert_eq!(usage["remaining_credit_usd"], "0");
        assert_eq!(usage["billable_usd"], usd(expected_usd - U256::from(100_000_000u64)));
        // Exactly at the boundary, and one micro-dollar below it.
        let spent = usd(expected_usd);
        let at: Value = serde_json::from_str(&s.cli(&[
            "gas",
            "usage",
            "--organization",
            "acme",
            "--gas-credit-usd",
            &spent,
            "--json",
        ]))
        .unwrap();
        assert_eq!(
            (at[0]["remaining_credit_usd"].as_str(), at[0]["billable_usd"].as_str()),
            (Some("0"), Some("0"))
        );
        let below = usd(expected_usd - U256::from(1));
        let under: Value = serde_json::from_str(&s.cli(&[
            "gas",
            "usage",
            "--organization",
            "acme",
            "--gas-credit-usd",
            &below,
            "--json",
        ]))
        .unwrap();
        assert_eq!(under[0]["billable_usd"], "0.000001");

        // Bob received a deposit from another platform account.
        let deposits = eventually(Duration::from_secs(30), "bob's deposit", || async {
            let list = s.get("/v2/crypto/deposits?account_id=bob").await.body;
            (list["deposits"].as_array().is_some_and(|d| d.len() == 1)).then_some(list)
        })
        .await;
        let deposit = &deposits["deposits"][0];
        assert_eq!(
            (deposit["amount"].as_str(), deposit["currency_symbol"].as_str()),
            (Some("5"), Some("TUSD"))
        );
        assert_eq!(deposit["source_type"], "ACCOUNT");
        assert_eq!(deposit["source_account_id"], "alice");
        assert_eq!(deposit["transaction_hash"], settled[&top_up_token]["transaction_hash"]);

        // Each transfer announced SUBMITTED, then CONFIRMED, once.
        for id in all {
            assert_eq!(
                events_of(&s, id).await,
                [
                    ("crypto_transfer_submitted".to_string(), "SUBMITTED".to_string()),
                    ("crypto_transfer_updated".to_string(), "CONFIRMED".to_string())
                ],
                "{id}"
            );
        }
        // Listing filters by account, identity and status.
        let alices = s.get("/v2/crypto/transfers?account_id=alice&limit=100").await.body;
        assert_eq!(alices["transfers"].as_array().unwrap().len(), 3);
        let by_identity = s.get("/v2/crypto/transfers?identity_id=identity-treasury").await.body;
        assert_eq!(by_identity["transfers"].as_array().unwrap().len(), 2);
        let failed = s.get("/v2/crypto/transfers?status=FAILED").await.body;
        assert_eq!(failed["transfers"], json!([]));
        let metrics =
            send(Method::GET, &format!("http://127.0.0.1:{}/metrics", s.port), Some(OPERATOR_TOKEN))
                .await
                .body;
        let metrics = metrics.as_str().unwrap();
        assert!(
            metrics
                .contains(&format!("custody_indexer_transfers{{chain=\"{CHAIN}\",status=\"CONFIRMED\"}} 5")),
            "{metrics}"
        );
        assert!(
            metrics.contains(&format!("custody_indexer_transfers{{chain=\"{CHAIN}\",status=\"FAILED\"}} 0")),
            "{metrics}"
        );
        // Pages of two walk all five, newest first, without a repeat.
        let mut walked = Vec::new();
        let mut cursor = String::new();
        loop {
            let after = if cursor.is_empty() { String::new() } else { format!("&cursor={cursor}") };
            let page = s.get(&format!("/v2/crypto/transfers?limit=2{after}")).await.body;
            walked.extend(
                page["transfers"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()),
            );
            match page["cursor"].as_str() {
                Some(next) => cursor = next.to_string(),
                None => break,
            }
        }
        let mut newest_first: Vec<String> = all.iter().rev().map(|id| id.to_string()).collect();
        assert_eq!(walked, newest_first);
        newest_first.sort();
        newest_first.dedup();
        assert_eq!(newest_first.len(), 5);
        run.kill().unwrap();
        run.wait().unwrap();

        // No key material reached a log.
        for entry in std::fs::read_dir(s.env.dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                let log = std::fs::read_to_string(&path).unwrap();
                assert!(log.contains("transfer settled"), "{}", path.display());
                assert!(!log.contains("abandon"), "the mnemonic leaked into {}", path.display());
            }
        }
    }
}

/// `(event type, status)` of every event of one transfer, in commit order.
async fn events_of(s: &Setup, id: &str) -> Vec<(String, String)> {
    let events = s.get("/v2/events?limit=100").await.body;
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["id"] == id)
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["data"]["status"].as_str().unwrap().to_string()))
        .collect()
}

fn roles(txs: &[SentTransaction], role: TxRole) -> Vec<&SentTransaction> {
    txs.iter().filter(|t| t.role == role).collect()
}

#[tokio::test]
async fn stuck_transfers_are_bumped_then_cancelled_and_a_late_original_still_confirms() {
    let s =
        Setup::new(Backend::Sqlite, "window_secs = 3\nsubmit_within_secs = 120\nrebroadcast_after_secs = 1")
            .await;
    s.create_account("treasury", "OMNIBUS");
    let alice = s.create_account("alice", "SEGREGATED");
    s.anvil.token(s.tusd).mint(alice, U256::from(9_000_000)).from(s.anvil.accounts[5]).mined().await;
    let omnibus_before = s.eth(s.omnibus).await;
    s.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (false,)).await.unwrap();
    let mut run = s.start("run").await;
    let late = s.transfer("treasury", "0.1", "ETH", s.outside).await;
    let dropped = s.transfer("treasury", "0.2", "ETH", s.outside).await;
    // A top-up transfer: its gas top-up cannot be mined either.
    let topped = s.transfer("alice", "9", "TUSD", s.outside).await;
    s.until(&late, "SUBMITTED", false).await;
    s.until(&dropped, "SUBMITTED", false).await;

    // In flight, the amounts are held from the available balance.
    let balances = s.get("/v2/accounts/treasury/balances").await.body;
    let eth = balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == "ETH").unwrap().clone();
    assert_eq!(eth["total"].as_str().unwrap(), Amount::from_raw(omnibus_before, 18).to_string());
    let available = omnibus_before - U256::from(3 * ETH / 10);
    assert_eq!(eth["available"].as_str().unwrap(), Amount::from_raw(available, 18).to_string());

    // Nothing is mined: each is sent again with a higher fee at its nonce,
    // then cancelled when its window ends. A cancellation is recorded before
    // it is broadcast: wait until the node holds both.
    let store = s.env.store().await;
    eventually(Duration::from_secs(30), "both cancellations in the node's pool", || async {
        let mut cancelled = 0;
        for id in [&late, &dropped] {
            let txs = store.transfer_transactions(id).await.unwrap();
            for cancel in roles(&txs, TxRole::Cancel) {
                let pooled: Value = s
                    .anvil
                    .provider
                    .raw_request("eth_getTransactionByHash".into(), (&cancel.hash,))
                    .await
                    .unwrap();
                cancelled += usize::from(!pooled.is_null());
            }
        }
        (cancelled >= 2).then_some(())
    })
    .await;
    // The top-up was sent again with a higher fee at the sponsor's nonce,
    // while the transfer itself waits for it.
    let top_ups = store.transfer_transactions(&topped).await.unwrap();
    assert!(top_ups.len() >= 2 && top_ups.iter().all(|t| t.role == TxRole::TopUp), "{top_ups:?}");
    assert!(top_ups.iter().all(|t| t.nonce == top_ups[0].nonce && t.sender == s.sponsor.to_string()));
    assert_eq!(s.get(&format!("/v2/crypto/transfers/{topped}")).await.body["status"], "ACCEPTED");
    // kill -9 while the cancellations and the top-up are pending.
    run.kill().unwrap();
    run.wait().unwrap();
    let late_txs = store.transfer_transactions(&late).await.unwrap();
    let dropped_txs = store.transfer_transactions(&dropped).await.unwrap();
    for txs in [&late_txs, &dropped_txs] {
        let sent = roles(txs, TxRole::Transfer);
        assert!(sent.len() >= 2, "sent again with a higher fee");
        assert!(sent.windows(2).all(|w| w[1].max_fee_per_gas > w[0].max_fee_per_gas));
        assert!(txs.iter().all(|t| t.nonce == txs[0].nonce), "replacements share the nonce");
        let cancel = roles(txs, TxRole::Cancel)[0];
        assert!(cancel.max_fee_per_gas > sent.last().unwrap().max_fee_per_gas);
    }
    assert_eq!(dropped_txs[0].nonce, late_txs[0].nonce + 1);

    // The node loses `late`'s cancellation and includes its transfer after all.
    for tx in roles(&late_txs, TxRole::Cancel) {
        s.anvil.provider.raw_request::<_, Value>("anvil_dropTransaction".into(), (&tx.hash,)).await.unwrap();
    }
    let original = *roles(&late_txs, TxRole::Transfer).last().unwrap();
    let raw: alloy::primitives::Bytes = original.raw.parse().unwrap();
    s.anvil.provider.raw_request::<_, B256>("eth_sendRawTransaction".into(), (raw,)).await.unwrap();
    // Someone else sends from the omnibus wallet meanwhile: its nonce drifts.
    s.anvil.provider.raw_request::<_, ()>("anvil_impersonateAccount".into(), (s.omnibus,)).await.unwrap();
    let outside_send = alloy::rpc::types::TransactionRequest::default()
        .from(s.omnibus)
        .to(s.omnibus)
        .value(U256::ZERO)
        .nonce(dropped_txs[0].nonce + 1);
    let drift = *s.anvil.provider.send_transaction(outside_send).await.unwrap().tx_hash();
    s.anvil.mine(1).await;
    s.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (true,)).await.unwrap();

    // A transfer accepted while no sender runs (the API alone) waits ACCEPTED.
    let serve = s.start("serve").await;
    let waiting = s.transfer("treasury", "0.3", "ETH", s.outside).await;
    drop(serve);

    let mut run = s.start("run").await;
    let confirmed = s.until(&late, "CONFIRMED", true).await;
    assert_eq!(
        confirmed["transaction_hash"].as_str(),
        Some(original.hash.as_str()),
        "the original settled it"
    );
    s.until(&dropped, "DROPPED", true).await;
    s.until(&waiting, "CONFIRMED", true).await;
    // The top-up route resumed: one top-up included, then alice's own transfer.
    s.until(&topped, "CONFIRMED", true).await;
    assert_eq!(s.tokens(s.tusd, s.outside).await, U256::from(9_000_000));
    let included = s.included(&store, &topped).await;
    assert_eq!(
        included.iter().map(|t| (t.role, t.sender.clone())).collect::<Vec<_>>(),
        [(TxRole::TopUp, s.sponsor.to_string()), (TxRole::Transfer, alice.to_string())]
    );
    let mut expected = Vec::new();
    for tx in &included {
        expected.push((tx.hash.clone(), "NETWORK_FEE".to_string(), s.fee(&tx.hash).await));
    }
    let mut entries = store.gas_entries(&topped).await.unwrap();
    entries.sort();
    expected.sort();
    assert_eq!(entries, expected);

    assert_eq!(
        events_of(&s, &late).await,
        [
            ("crypto_transfer_submitted".to_string(), "SUBMITTED".to_string()),
            ("crypto_transfer_updated".to_string(), "CONFIRMED".to_string())
        ],
        "confirmed, never dropped"
    );
    assert_eq!(
        events_of(&s, &dropped).await,
        [
            ("crypto_transfer_submitted".to_string(), "SUBMITTED".to_string()),
            ("crypto_transfer_updated".to_string(), "DROPPED".to_string())
        ]
    );
    // The nonce manager re-synced past the outside transaction.
    let waiting_tx = s.included(&store, &waiting).await;
    assert_eq!(waiting_tx.len(), 1);
    assert_eq!(waiting_tx[0].nonce, dropped_txs[0].nonce + 2);

    // Only `late` and `waiting` moved funds; the ledger holds each settling
    // transaction's fee, the cancellation's for `dropped`.
    assert_eq!(s.eth(s.outside).await, U256::from(4 * ETH / 10));
    let mut fees = U256::ZERO;
    for id in [&late, &dropped, &waiting] {
        let included = s.included(&store, id).await;
        assert_eq!(included.len(), 1, "{id}: one transaction was included");
        let fee = s.fee(&included[0].hash).await;
        assert_eq!(
            store.gas_entries(id).await.unwrap(),
            [(included[0].hash.clone(), "NETWORK_FEE".to_string(), fee)]
        );
        fees += fee;
    }
    assert_eq!(roles(&s.included(&store, &dropped).await, TxRole::Cancel).len(), 1);
    let drift_fee = s.fee(&format!("{drift:#x}")).await;
    assert_eq!(omnibus_before - s.eth(s.omnibus).await, U256::from(4 * ETH / 10) + fees + drift_fee);
    run.kill().unwrap();
}

#[tokio::test]
async fn requests_are_validated_and_idempotent_by_request_id() {
    let s = Setup::new(Backend::Postgres, "").await;
    let alice = s.create_account("alice", "SEGREGATED");
    let watched = Address::repeat_byte(0x17).to_string();
    s.env.add_account_of("acme", "watched", "SEGREGATED", &watched, CHAIN);
    let frozen = Address::repeat_byte(0x18).to_string();
    s.env.identity_in("acme", "identity-frozen", "SUSPENDED");
    s.env.ok(&[
        "accounts",
        "add",
        "--organization",
        "acme",
        "--account-id",
        "frozen",
        "--identity-id",
        "identity-frozen",
        "--type",
        "SEGREGATED",
        "--address",
        &frozen,
        "--chains",
        CHAIN.as_str(),
    ]);
    // An identity still onboarding: its account receives but cannot send.
    s.env.identity_in("acme", "identity-pending", "PENDING_ONBOARDING");
    s.cli(&[
        "accounts",
        "create",
        "--organization",
        "acme",
        "--account-id",
        "pending",
        "--identity-id",
        "identity-pending",
        "--type",
        "SEGREGATED",
    ]);
    // An identity terminated after its account opened: the account is CLOSED.
    s.env.identity_in("acme", "identity-closed", "ACTIVE");
    s.cli(&[
        "accounts",
        "create",
        "--organization",
        "acme",
        "--account-id",
        "closed",
        "--identity-id",
        "identity-closed",
        "--type",
        "SEGREGATED",
    ]);
    s.env.ok(&[
        "identities",
        "terminate",
        "identity-closed",
        "--organization",
        "acme",
        "--by",
        "t",
        "--reason",
        "closed",
    ]);
    s.env.ok(&["organizations", "create", "--id", "other"]);
    let other_key = s
        .env
        .ok(&["api-keys", "create", "--organization", "other", "--name", "x"])
        .lines()
        .last()
        .unwrap()
        .to_string();
    s.env.identity("other", "s");
    s.cli(&[
        "accounts",
        "create",
        "--organization",
        "other",
        "--account-id",
        "stranger",
        "--identity-id",
        "s",
        "--type",
        "SEGREGATED",
    ]);
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.tusd).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
    let policy: Value = serde_json::from_str(&s.env.ok(&[
        "limits",
        "create",
        "--organization",
        "acme",
        "--account-id",
        "alice",
        "--currency-symbol",
        "TUSD",
        "--max-per-transfer",
        "50",
        "--max-24h",
        "60",
        "--json",
    ]))
    .unwrap();
    let policy_id = policy["id"].as_str().unwrap();
    let identity_policy = s.env.ok(&[
        "limits",
        "create",
        "--organization",
        "acme",
        "--identity-id",
        "identity-alice",
        "--currency-symbol",
        "TUSD",
        "--max-per-transfer",
        "45",
    ]);
    let identity_policy = identity_policy.trim();

    // Without keys, transfers are refused as unavailable.
    let keyless = s.env.listen("serve", CHAIN, s.port, &[]);
    let healthz = format!("http://127.0.0.1:{}/healthz", s.port);
    eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) }).await;
    let base = json!({
        "request_id": uuid::Uuid::new_v4().to_string(), "account_id": "alice", "amount": "1", "currency_symbol": "TUSD",
        "address_destination": { "address": s.outside.to_string(), "chain": CHAIN.as_str() },
    });
    let answer = s.post(&base).await;
    assert_eq!((answer.status, answer.body["code"].as_str()), (503, Some("TRANSFERS_UNAVAILABLE")));
    drop(keyless);

    // The API alone accepts transfers and sends nothing: they stay ACCEPTED.
    let serve = s.start("serve").await;
    let with = |changes: Value| {
        let mut body = base.clone();
        body["request_id"] = json!(uuid::Uuid::new_v4().to_string());
        for (key, value) in changes.as_object().unwrap() {
            if value.is_null() {
                body.as_object_mut().unwrap().remove(key);
            } else {
                body[key] = value.clone();
            }
        }
        body
    };
    let destination = |address: &str, chain: &str| json!({ "address": address, "chain": chain });
    let refusals = [
        (json!({ "requestId": "x" }), 400, "INVALID_REQUEST", "requestId"),
        (json!({ "request_id": "not-a-uuid" }), 400, "INVALID_REQUEST", "UUID"),
        (
            json!({ "destination_address": s.outside.to_string(), "destination_chain": CHAIN.as_str() }),
            400,
            "INVALID_REQUEST",
            "not a mix",
        ),
        (json!({ "address_destination": null }), 400, "INVALID_REQUEST", "destination is required"),
        (
            json!({ "address_destination": destination("0xa0B86991c6218b36c1d19D4a2e9Eb0cE3606eB48", CHAIN.as_str()) }),
            400,
            "INVALID_REQUEST",
            "checksum",
        ),
        (
            json!({ "address_destination": destination("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", CHAIN.as_str()) }),
            400,
            "INVALID_REQUEST",
            "20-byte",
        ),
        (
            json!({ "address_destination": destination(&s.outside.to_string(), "DOGE_MAINNET") }),
            400,
            "INVALID_REQUEST",
            "unknown chain",
        ),
        (
            json!({ "address_destination": destination(&s.outside.to_string(), "CHAIN_UNSPECIFIED") }),
            400,
            "INVALID_REQUEST",
            "address_destination.chain: CHAIN_UNSPECIFIED names no chain",
        ),
        (
            json!({ "address_destination": null, "destination_address": s.outside.to_string(), "destination_chain": "CHAIN_UNSPECIFIED" }),
            400,
            "INVALID_REQUEST",
            "destination_chain: CHAIN_UNSPECIFIED",
        ),
        (
            json!({ "address_destination": { "address": s.outside.to_string(), "chain": 7 } }),
            400,
            "INVALID_REQUEST",
            "address_destination.chain: invalid type: integer `7`",
        ),
        (
            json!({ "address_destination": destination(&s.outside.to_string(), "SOLANA_DEVNET") }),
            400,
            "INVALID_REQUEST",
            "not configured",
        ),
        (
            json!({ "currency_symbol": "DOGE" }),
            400,
            "INVALID_REQUEST",
            "currency_symbol: DOGE is not supported",
        ),
        (json!({ "amount": "1.0000001" }), 400, "INVALID_REQUEST", "amount: "),
        (json!({ "amount": "0" }), 400, "INVALID_REQUEST", "amount: must be positive"),
        (json!({ "amount": "-1" }), 400, "INVALID_REQUEST", "not a decimal"),
        (json!({ "amount": 1 }), 400, "INVALID_REQUEST", "amount"),
        (json!({ "account_id": "nobody" }), 404, "NOT_FOUND", "nobody"),
        (json!({ "account_id": "stranger" }), 404, "NOT_FOUND", "stranger"),
        (json!({ "account_id": "watched" }), 400, "INVALID_REQUEST", "watch-only"),
        (json!({ "account_id": "frozen" }), 400, "ACCOUNT_NOT_ACTIVE", "FROZEN"),
        (json!({ "account_id": "pending" }), 400, "ACCOUNT_NOT_ACTIVE", "identity is PENDING_ONBOARDING"),
        (json!({ "account_id": "closed" }), 400, "ACCOUNT_NOT_ACTIVE", "CLOSED"),
        (
            json!({ "address_destination": destination(&alice.to_string(), CHAIN.as_str()) }),
            400,
            "INVALID_REQUEST",
            "own address",
        ),
        (json!({ "amount": "101" }), 400, "INSUFFICIENT_BALANCE", "100 TUSD available"),
        (json!({ "amount": "51" }), 400, "LIMIT_EXCEEDED", "per transfer"),
        (json!({ "amount": "46" }), 400, "LIMIT_EXCEEDED", identity_policy),
    ];
    for (changes, status, code, mentions) in refusals {
        let body = with(changes.clone());
        let answer = s.post(&body).await;
        assert_eq!(answer.status, status, "{changes}: {:?}", answer.body);
        assert_eq!(answer.body["code"], code, "{changes}: {:?}", answer.body);
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(mentions), "{changes}: {message}");
    }

    let first = with(json!({ "amount": "40" }));
    let created = s.post(&first).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let id = created.body["id"].as_str().unwrap().to_string();
    // 40 held: 60 available; the rolling 24 h limit counts the 40.
    let balances = s.get("/v2/accounts/alice/balances").await.body;
    let tusd =
        balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == "TUSD").unwrap().clone();
    assert_eq!((tusd["total"].as_str(), tusd["available"].as_str()), (Some("100"), Some("60")));
    let over = s.post(&with(json!({ "amount": "30" }))).await;
    assert_eq!((over.status, over.body["code"].as_str()), (400, Some("LIMIT_EXCEEDED")));
    assert!(over.body["message"].as_str().unwrap().contains("24 hours"), "{:?}", over.body);
    assert!(over.body["message"].as_str().unwrap().contains(policy_id));
    let policy = s.get(&format!("/v2/transaction-limits/policies/{policy_id}")).await;
    assert_eq!(policy.status, 200);
    assert_eq!(
        (
            policy.body["account_id"].as_str(),
            policy.body["max_per_transfer"].as_str(),
            policy.body["max_rolling_24h"].as_str()
        ),
        (Some("alice"), Some("50"), Some("60"))
    );
    assert_eq!(s.get("/v2/transaction-limits/policies/nope").await.status, 404);

    // The same request again: the same transfer. Another request with its
    // request_id: refused, naming the transfer.
    let again = s.post(&first).await;
    assert_eq!((again.status, again.body["id"].as_str()), (201, Some(id.as_str())));
    let mut reused = first.clone();
    reused["amount"] = json!("41");
    let reused = s.post(&reused).await;
    assert_eq!((reused.status, reused.body["code"].as_str()), (409, Some("REQUEST_ID_REUSED")));
    assert_eq!(reused.body["transfer_id"], id.as_str());

    // Concurrent duplicates create one transfer.
    let duplicate = with(json!({ "amount": "1" }));
    let answers = futures::future::join_all((0..8).map(|_| s.post(&duplicate))).await;
    let mut statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    statuses.sort();
    assert_eq!(statuses, [201; 8], "{answers:?}");
    assert!(answers.iter().all(|a| a.body["id"] == answers[0].body["id"]));
    let listed = s.get("/v2/crypto/transfers?account_id=alice&limit=100").await.body;
    let same: Vec<&Value> = listed["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["request_id"] == duplicate["request_id"])
        .collect();
    assert_eq!(same.len(), 1);

    // Another organization sees none of it.
    let url = format!("http://127.0.0.1:{}/v2/crypto/transfers/{id}", s.port);
    assert_eq!(send(Method::GET, &url, Some(&other_key)).await.status, 404);
    let url = format!("http://127.0.0.1:{}/v2/crypto/transfers", s.port);
    assert_eq!(send(Method::GET, &url, Some(&other_key)).await.body["transfers"], json!([]));
    drop(serve);

    // Once processed, the same request is a duplicate transaction.
    let mut run = s.start("run").await;
    s.until(&id, "CONFIRMED", true).await;
    let duplicate = s.post(&first).await;
    assert_eq!((duplicate.status, duplicate.body["code"].as_str()), (409, Some("DUPLICATE_TRANSACTION")));
    assert_eq!(duplicate.body["transfer_id"], id.as_str());
    assert_eq!(s.get("/v2/crypto/transfers/not-a-transfer").await.status, 404);

    // An omnibus wallet without ether for gas: the transfer fails, says why,
    // and its hold is released.
    s.create_account("treasury", "OMNIBUS");
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.tusd).mint(s.omnibus, U256::from(7_000_000)).from(minter).mined().await;
    s.anvil
        .provider
        .raw_request::<_, Value>("anvil_setBalance".into(), (s.omnibus, U256::ZERO))
        .await
        .unwrap();
    let doomed = s.transfer("treasury", "7", "TUSD", s.outside).await;
    let failed = s.until(&doomed, "FAILED", true).await;
    let code = failed["failure_details"]["code"].as_str().unwrap();
    assert!(["REJECTED_BY_NODE", "INVALID_TRANSFER"].contains(&code), "{failed}");
    assert!(failed["failure_details"]["message"].as_str().unwrap().contains("funds"), "{failed}");
    let events = events_of(&s, &doomed).await;
    assert_eq!(events.last().unwrap(), &("crypto_transfer_failed".to_string(), "FAILED".to_string()));
    let event = s.get("/v2/events?limit=100").await.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "crypto_transfer_failed")
        .unwrap()
        .clone();
    assert_eq!(event["data"]["failure_details"], failed["failure_details"]);
    assert_eq!(s.env.store().await.gas_entries(&doomed).await.unwrap(), []);
    let balances = s.get("/v2/accounts/treasury/balances").await.body;
    let tusd =
        balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == "TUSD").unwrap().clone();
    assert_eq!(tusd["available"], "7", "nothing is held any more");
    run.kill().unwrap();
}

#[tokio::test]
async fn a_lost_broadcast_answer_never_sends_twice() {
    let s = Setup::with_rpc(Backend::Sqlite, "", true).await;
    s.create_account("treasury", "OMNIBUS");
    // The node takes (and mines) the transaction, but its answer is lost:
    // the sender's next attempt meets its own transaction already mined.
    let faults = &s.proxy.as_ref().unwrap().faults;
    faults.lost_answers.lock().unwrap().push(("eth_sendRawTransaction".into(), 1));
    let mut run = s.start("run").await;
    let id = s.transfer("treasury", "0.7", "ETH", s.outside).await;
    s.until(&id, "CONFIRMED", true).await;
    assert_eq!(faults.failed.load(std::sync::atomic::Ordering::SeqCst), 1, "the answer was lost once");

    assert_eq!(s.eth(s.outside).await, U256::from(7 * ETH / 10), "sent once");
    assert_eq!(s.anvil.provider.get_transaction_count(s.omnibus).await.unwrap(), 1, "one nonce used");
    let signed = s.env.store().await.transfer_transactions(&id).await.unwrap();
    assert_eq!(signed.len(), 1, "never signed again: {signed:?}");
    assert!(signed[0].block_number.is_some());
    run.kill().unwrap();
}
