//! Sending through RPC answers that lie or say nothing, on a real anvil:
//! a broadcast the node took but answered with an error, an EIP-3009
//! authorization the account holder submits before the sponsor's call
//! lands, a nonce gap below later transactions. Every transfer lands exactly
//! once, counted on chain, and every fee is where the gas ledger says.

use crate::common;

use alloy::{
    consensus::{Transaction as _, TxEnvelope},
    eips::eip2718::Decodable2718,
    network::TransactionResponse as _,
    primitives::{Address, B256, Bytes, U256},
    providers::Provider,
    rpc::types::{Filter, TransactionRequest},
    sol_types::{SolCall, SolEvent},
};
use common::{
    anvil::{Mined, TestAuthToken, TestToken},
    db::Backend,
    transfers::{ETH, Setup, usd, usd_micros},
};
use custody_indexer::{
    amount::Amount,
    store::{Store, TxRole, TxState},
    transfers::transactions::resync_nonce,
};
use serde_json::{Value, json};
use sqlx::Connection;
use std::time::Duration;

/// How many `Transfer` logs of `token` paid `to`.
async fn payments(s: &Setup, token: Address, to: Address) -> usize {
    let filter = Filter::new()
        .address(token)
        .event_signature(TestToken::Transfer::SIGNATURE_HASH)
        .topic2(to.into_word())
        .from_block(0);
    s.anvil.provider.get_logs(&filter).await.unwrap().len()
}

/// The available balance of `symbol` the API shows for `account`.
async fn available(s: &Setup, account: &str, symbol: &str) -> String {
    let balances = s.get(&format!("/v2/accounts/{account}/balances")).await.body;
    let balance = balances["balances"].as_array().unwrap().iter().find(|b| b["symbol"] == symbol).cloned();
    balance.unwrap()["available"].as_str().unwrap().to_string()
}

/// The EIP-3009 nonces of the authorizations the sponsor asked gas
/// estimates for, in order, with the calls' input.
fn estimated_authorizations(faults: &common::proxy::Faults) -> Vec<(B256, Bytes)> {
    let kept = faults.kept.lock().unwrap();
    // Acceptance estimates the token's plain `transfer` first: not an
    // authorization.
    kept.iter()
        .filter(|(method, _)| method == "eth_estimateGas")
        .filter_map(|(_, params)| {
            let input: Bytes = params[0]["input"].as_str().unwrap().parse().unwrap();
            let call = TestAuthToken::transferWithAuthorizationCall::abi_decode(&input).ok()?;
            Some((call.nonce, input))
        })
        .collect()
}

async fn automine(s: &Setup, on: bool) {
    s.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (on,)).await.unwrap();
}

#[tokio::test]
async fn a_broadcast_answered_with_an_error_or_a_timeout_confirms_once_funds_held_throughout() {
    for (code, message) in [(-32603, "internal error"), (-32000, "request timed out")] {
        let s = Setup::with_rpc(Backend::Sqlite, "", true).await;
        s.create_account("treasury", "OMNIBUS");
        let minter = s.anvil.accounts[5];
        s.anvil.token(s.tusd).mint(s.omnibus, U256::from(5_000_000)).from(minter).mined().await;
        let faults = &s.proxy.as_ref().unwrap().faults;
        // The node takes each transaction, but every answer (retries
        // included) is an error, and the backend asked next has not seen it.
        let times = 16;
        faults.answered_errors.lock().unwrap().push((
            "eth_sendRawTransaction".into(),
            code,
            message.into(),
            times,
        ));
        faults.nulled.lock().unwrap().push(("eth_getTransactionByHash".into(), 100));
        automine(&s, false).await;
        let mut run = s.start("run").await;
        let ether = s.transfer("treasury", "0.7", "ETH", s.outside).await;
        let token = s.transfer("treasury", "2", "TUSD", s.outside).await;
        for id in [&ether, &token] {
            s.until(id, "SUBMITTED", false).await;
        }
        // The node answered nothing that decides: both held, nothing released.
        assert_eq!(available(&s, "treasury", "TUSD").await, "3", "{message}");
        let held = s.eth(s.omnibus).await - U256::from(7 * ETH / 10);
        assert_eq!(
            available(&s, "treasury", "ETH").await,
            custody_indexer::amount::Amount::from_raw(held, 18).to_string()
        );
        automine(&s, true).await;
        for id in [&ether, &token] {
            s.until(id, "CONFIRMED", true).await;
        }
        assert!(
            faults.failed.load(std::sync::atomic::Ordering::SeqCst) >= 2,
            "{message}: the faults were hit"
        );

        // Each landed once: one signed transaction each, two nonces used.
        let store = s.env.store().await;
        for id in [&ether, &token] {
            let signed = store.transfer_transactions(id).await.unwrap();
            assert_eq!(signed.len(), 1, "{message}: never signed again: {signed:?}");
            assert_eq!(signed[0].state, TxState::Mined);
        }
        assert_eq!(s.eth(s.outside).await, U256::from(7 * ETH / 10), "{message}");
        assert_eq!(s.tokens(s.tusd, s.outside).await, U256::from(2_000_000), "{message}");
        assert_eq!(payments(&s, s.tusd, s.outside).await, 1, "{message}");
        assert_eq!(s.anvil.provider.get_transaction_count(s.omnibus).await.unwrap(), 2, "{message}");
        run.kill().unwrap();
    }
}

#[tokio::test]
async fn an_authorization_front_run_by_the_account_holder_confirms_with_the_front_runners_transaction() {
    let s = Setup::new(Backend::Postgres, "").await;
    let alice = s.create_account("alice", "SEGREGATED");
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.usdc).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
    let sponsor_before = s.eth(s.sponsor).await;
    automine(&s, false).await;
    let mut run = s.start("run").await;
    let id = s.transfer("alice", "10", "USDC", s.outside).await;
    s.until(&id, "SUBMITTED", false).await;

    // The authorization is public in the mempool: the account holder (any
    // funded address) submits the same call with a higher tip.
    let store = s.env.store().await;
    let ours = store.transfer_transactions(&id).await.unwrap().remove(0);
    let raw: Bytes = ours.raw.parse().unwrap();
    let input = TxEnvelope::decode_2718(&mut raw.as_ref()).unwrap().input().clone();
    let front = TransactionRequest::default()
        .from(s.anvil.accounts[1])
        .to(s.usdc)
        .input(input.into())
        .gas_limit(300_000)
        .max_fee_per_gas(200_000_000_000)
        .max_priority_fee_per_gas(100_000_000_000);
    let front: B256 = *s.anvil.provider.send_transaction(front).await.unwrap().tx_hash();
    s.anvil.mine(1).await;
    automine(&s, true).await;

    // The sponsor's call reverted behind it; the transfer confirms with the
    // transaction that moved the funds.
    let confirmed = s.until(&id, "CONFIRMED", true).await;
    assert_eq!(confirmed["transaction_hash"], format!("{front:#x}"));
    let receipt =
        s.anvil.provider.get_transaction_receipt(ours.hash.parse().unwrap()).await.unwrap().unwrap();
    assert!(!receipt.status(), "the sponsor's call reverted");
    let signed = store.transfer_transactions(&id).await.unwrap();
    assert_eq!(signed.len(), 1, "never signed again: {signed:?}");
    assert_eq!(signed[0].state, TxState::Reverted);

    // Funds moved once; the sponsor paid its reverted call's gas, which the
    // ledger holds.
    assert_eq!(s.tokens(s.usdc, s.outside).await, U256::from(10_000_000));
    assert_eq!(s.tokens(s.usdc, alice).await, U256::from(90_000_000));
    assert_eq!(payments(&s, s.usdc, s.outside).await, 1);
    let fee = s.fee(&ours.hash).await;
    assert_eq!(sponsor_before - s.eth(s.sponsor).await, fee);
    assert_eq!(store.gas_entries(&id).await.unwrap(), [(ours.hash.clone(), "NETWORK_FEE".to_string(), fee)]);
    assert_eq!(available(&s, "alice", "USDC").await, "90");
    run.kill().unwrap();
}

#[tokio::test]
async fn one_transfers_failing_receipt_lookups_hold_back_no_other_transfer() {
    let s = Setup::with_rpc(Backend::Postgres, "", true).await;
    s.create_account("treasury", "OMNIBUS");
    let faults = &s.proxy.as_ref().unwrap().faults;
    let mut run = s.start("run").await;
    let stuck = s.transfer("treasury", "0.1", "ETH", s.outside).await;
    s.until(&stuck, "SUBMITTED", false).await;
    // Every receipt lookup of its transaction fails from now on.
    let store = s.env.store().await;
    let hash = store.transfer_transactions(&stuck).await.unwrap()[0].hash.clone();
    faults.failing_params.lock().unwrap().push(("eth_getTransactionReceipt".into(), hash));

    // The transfers accepted after it confirm meanwhile; it waits on its own.
    let mut others = Vec::new();
    for amount in ["0.2", "0.3"] {
        others.push(s.transfer("treasury", amount, "ETH", s.outside).await);
    }
    for id in &others {
        s.until(id, "CONFIRMED", true).await;
    }
    assert_eq!(s.get(&format!("/v2/crypto/transfers/{stuck}")).await.body["status"], "SUBMITTED");
    assert!(faults.failed.load(std::sync::atomic::Ordering::SeqCst) > 0, "its lookups failed");

    // Once its lookups answer, it confirms too; each landed once.
    faults.failing_params.lock().unwrap().clear();
    s.until(&stuck, "CONFIRMED", true).await;
    assert_eq!(s.eth(s.outside).await, U256::from(6 * ETH / 10));
    assert_eq!(s.anvil.provider.get_transaction_count(s.omnibus).await.unwrap(), 3);
    for id in others.iter().chain([&stuck]) {
        assert_eq!(store.transfer_transactions(id).await.unwrap().len(), 1, "{id} signed once");
    }
    run.kill().unwrap();
}

#[tokio::test]
async fn a_nonce_gap_is_filled_and_the_transfers_after_it_confirm() {
    let s = Setup::new(Backend::Sqlite, "").await;
    s.create_account("treasury", "OMNIBUS");
    let mut run = s.start("run").await;
    let first = s.transfer("treasury", "0.1", "ETH", s.outside).await;
    s.until(&first, "CONFIRMED", true).await;
    // The omnibus wallet's counter skips nonce 1, which nothing will use
    // (as after a re-sync to a pending count whose transaction was dropped).
    let store = s.env.store().await;
    let omnibus = s.omnibus.to_string();
    assert!(resync_nonce(&store, common::CHAIN, &omnibus, 2).await.unwrap());
    let later = [
        s.transfer("treasury", "0.2", "ETH", s.outside).await,
        s.transfer("treasury", "0.3", "ETH", s.outside).await,
    ];
    for id in &later {
        s.until(id, "CONFIRMED", true).await;
    }

    // Nonce 1 went to a zero-value self-transfer; each transfer landed once,
    // at the nonces after it.
    assert_eq!(s.anvil.provider.get_transaction_count(s.omnibus).await.unwrap(), 4);
    for (id, nonce) in later.iter().zip([2, 3]) {
        let signed = store.transfer_transactions(id).await.unwrap();
        assert_eq!(signed.iter().map(|t| t.nonce).collect::<Vec<_>>(), [nonce], "{id}");
    }
    assert_eq!(s.eth(s.outside).await, U256::from(6 * ETH / 10));
    let filler = sent_at(&s, s.omnibus, 1).await;
    assert_platform_cost(&s, &store, &filler, &[&first, &later[0], &later[1]]).await;
    run.kill().unwrap();
}

/// The first broadcast reaches the node, which takes the transaction, and
/// its answer is lost; every broadcast after it meets "nonce too low", and
/// for a while the backends asked after it are behind: they know neither
/// the transaction nor that its nonce was used.
#[tokio::test]
async fn a_refusal_after_a_lost_answer_never_signs_the_transfer_again() {
    let s = Setup::with_rpc(Backend::Sqlite, "", true).await;
    s.create_account("treasury", "OMNIBUS");
    let faults = &s.proxy.as_ref().unwrap().faults;
    faults.lost_answers.lock().unwrap().push(("eth_sendRawTransaction".into(), 1));
    let behind = 12;
    for method in ["eth_getTransactionByHash", "eth_getTransactionReceipt"] {
        faults.nulled.lock().unwrap().push((method.into(), behind));
    }
    faults.stale.lock().unwrap().push(("eth_getTransactionCount".into(), json!("0x0"), behind));
    let mut run = s.start("run").await;
    let id = s.transfer("treasury", "0.7", "ETH", s.outside).await;
    let confirmed = s.until(&id, "CONFIRMED", true).await;
    let stale = faults.stale.lock().unwrap()[0].2;
    assert_eq!(stale, 0, "the backends behind answered first");

    assert_eq!(s.eth(s.outside).await, U256::from(7 * ETH / 10), "paid once");
    assert_eq!(s.anvil.provider.get_transaction_count(s.omnibus).await.unwrap(), 1, "one nonce used");
    let signed = s.env.store().await.transfer_transactions(&id).await.unwrap();
    assert_eq!(signed.len(), 1, "never signed again: {signed:?}");
    assert_eq!(confirmed["transaction_hash"], signed[0].hash);
    run.kill().unwrap();
}

/// The EIP-3009 nonce and `validBefore` a `transferWithAuthorization` call carries.
fn authorization_terms(raw: &str) -> (B256, U256) {
    let raw: Bytes = raw.parse().unwrap();
    let input = TxEnvelope::decode_2718(&mut raw.as_ref()).unwrap().input().clone();
    let word = |i: usize| B256::from_slice(&input[4 + 32 * i..4 + 32 * (i + 1)]);
    (word(5), U256::from_be_bytes(word(4).0))
}

#[tokio::test]
async fn a_refused_authorization_is_signed_again_with_the_same_authorization() {
    let s = Setup::with_rpc(Backend::Postgres, "", true).await;
    let alice = s.create_account("alice", "SEGREGATED");
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.usdc).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
    // The node refuses the first broadcast for a nonce it says is used.
    let faults = &s.proxy.as_ref().unwrap().faults;
    faults.method_errors.lock().unwrap().push((
        "eth_sendRawTransaction".into(),
        -32000,
        "nonce too low".into(),
        1,
    ));
    let mut run = s.start("run").await;
    let id = s.transfer("alice", "10", "USDC", s.outside).await;
    let confirmed = s.until(&id, "CONFIRMED", true).await;
    assert_eq!(faults.failed.load(std::sync::atomic::Ordering::SeqCst), 1, "refused once");

    // Every transaction signed for it carries one authorization: at most one
    // of them can ever move the funds.
    let signed = s.env.store().await.transfer_transactions(&id).await.unwrap();
    let terms: Vec<_> = signed.iter().map(|tx| authorization_terms(&tx.raw)).collect();
    assert!(terms.windows(2).all(|w| w[0] == w[1]), "one authorization: {terms:?}");
    assert!(signed.iter().any(|tx| confirmed["transaction_hash"] == tx.hash.as_str()));
    assert_eq!(payments(&s, s.usdc, s.outside).await, 1);
    assert_eq!(s.tokens(s.usdc, s.outside).await, U256::from(10_000_000));
    assert_eq!(available(&s, "alice", "USDC").await, "90");
    run.kill().unwrap();
}

#[tokio::test]
async fn a_nonce_gap_of_a_topped_up_address_is_filled_and_its_fee_taken_off_the_sponsors_money() {
    let s = Setup::new(Backend::Postgres, "").await;
    let alice = s.create_account("alice", "SEGREGATED");
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.tusd).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
    let mut run = s.start("run").await;
    let first = s.transfer("alice", "1", "TUSD", s.outside).await;
    s.until(&first, "CONFIRMED", true).await;
    // Alice's counter skips nonce 1: the gap is hers, filled from her
    // address with what the sponsor's top-ups left there.
    let store = s.env.store().await;
    let address = alice.to_string();
    assert!(resync_nonce(&store, common::CHAIN, &address, 2).await.unwrap());
    let second = s.transfer("alice", "2", "TUSD", s.outside).await;
    s.until(&second, "CONFIRMED", true).await;
    assert_eq!(s.tokens(s.tusd, s.outside).await, U256::from(3_000_000));
    assert_eq!(s.anvil.provider.get_transaction_count(alice).await.unwrap(), 3);
    let filler = sent_at(&s, alice, 1).await;

    // The sponsor's money left at her address: its top-ups less the fees of
    // her transactions, the filler's included, to the wei. She never had
    // ether of her own, so that is her whole balance.
    let (mut received, mut paid) = (U256::ZERO, U256::ZERO);
    for id in [&first, &second] {
        for tx in s.included(&store, id).await {
            match tx.role {
                TxRole::TopUp => received += tx.value,
                _ => paid += s.fee(&tx.hash).await,
            }
        }
    }
    let filler_fee = s.fee(&format!("{filler:#x}")).await;
    let left = store.sponsored_gas_left(common::CHAIN, &address).await.unwrap();
    assert_eq!(left, received - paid - filler_fee);
    assert_eq!(s.eth(alice).await, left);
    assert_platform_cost(&s, &store, &filler, &[&first, &second]).await;
    run.kill().unwrap();
}

/// The hash of `from`'s transaction at `nonce`, found in the chain's blocks.
async fn sent_at(s: &Setup, from: Address, nonce: u64) -> B256 {
    let head = s.anvil.provider.get_block_number().await.unwrap();
    for number in 0..=head {
        let block = s.anvil.provider.get_block_by_number(number.into()).full().await.unwrap().unwrap();
        if let Some(tx) =
            block.transactions.into_transactions().find(|t| t.from() == from && t.nonce() == nonce)
        {
            return tx.tx_hash();
        }
    }
    panic!("no transaction of {from} at nonce {nonce}");
}

/// The gas ledger holds `filler`'s fee, from its receipt, as the platform's
/// own cost (`gas platform`), and bills the organization only its
/// `transfers`' fees (`gas usage`).
async fn assert_platform_cost(s: &Setup, store: &Store, filler: &B256, transfers: &[&String]) {
    let fee = s.fee(&format!("{filler:#x}")).await;
    let platform: Value = serde_json::from_str(&s.cli(&["gas", "platform", "--json"])).unwrap();
    assert_eq!(
        platform,
        json!([{
            "chain": common::CHAIN.as_str(), "amount": Amount::from_raw(fee, 18).to_string(),
            "currency_symbol": "ETH", "usd": usd(usd_micros(fee)), "transactions": 1,
        }])
    );
    let mut billed = U256::ZERO;
    let mut hashes = Vec::new();
    for id in transfers {
        for (hash, _, amount) in store.gas_entries(id).await.unwrap() {
            assert_ne!(hash, format!("{filler:#x}"), "the filler is billed to no transfer");
            billed += amount;
            hashes.push(hash);
        }
    }
    let usage: Value =
        serde_json::from_str(&s.cli(&["gas", "usage", "--organization", "acme", "--json"])).unwrap();
    let chain = &usage[0]["by_chain"][0];
    assert_eq!(chain["amount"], Amount::from_raw(billed, 18).to_string(), "{usage}");
    assert_eq!(chain["transactions"], hashes.len(), "{usage}");
}

/// A provider that keeps the authorizations it is asked to estimate and
/// executes one itself, while its answers are lost: every estimate (and the
/// sponsor's retries) carries the one authorization kept before any node saw
/// it, and the transfer confirms with the provider's transaction instead of
/// failing or paying a second time with a fresh authorization.
#[tokio::test]
async fn an_authorization_executed_by_the_provider_that_estimated_it_confirms_once() {
    let s = Setup::with_rpc(Backend::Postgres, "", true).await;
    let alice = s.create_account("alice", "SEGREGATED");
    let minter = s.anvil.accounts[5];
    s.anvil.token(s.usdc).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
    let faults = &s.proxy.as_ref().unwrap().faults;
    faults.kept_methods.lock().unwrap().push("eth_estimateGas".into());
    // Accepted by an API without senders, so that the answers lost below
    // are the sponsor's (acceptance estimates the call too).
    let serve = s.start("serve").await;
    let id = s.transfer("alice", "10", "USDC", s.outside).await;
    drop(serve);
    // The node estimates, the answers are lost: two steps' worth with retries.
    faults.lost_answers.lock().unwrap().push(("eth_estimateGas".into(), 8));
    let mut run = s.start("run").await;

    let input = common::eventually(Duration::from_secs(30), "a gas estimate", || async {
        estimated_authorizations(faults).first().map(|(_, input)| input.clone())
    })
    .await;
    let hostile = TransactionRequest::default().from(s.anvil.accounts[1]).to(s.usdc).input(input.into());
    let hostile: B256 = *s.anvil.provider.send_transaction(hostile).await.unwrap().tx_hash();

    let confirmed = s.until(&id, "CONFIRMED", true).await;
    assert_eq!(
        confirmed["transaction_hash"],
        format!("{hostile:#x}"),
        "the transaction that moved the funds"
    );
    assert_eq!(payments(&s, s.usdc, s.outside).await, 1, "paid once");
    assert_eq!(s.tokens(s.usdc, s.outside).await, U256::from(10_000_000));
    let estimated = estimated_authorizations(faults);
    assert!(estimated.len() >= 5, "the sponsor estimated again after lost answers: {}", estimated.len());
    let mut db = sqlx::PgConnection::connect(&s._db.url).await.unwrap();
    let kept: String = sqlx::query_scalar("SELECT authorization_nonce FROM transfers WHERE id = $1")
        .bind(&id)
        .fetch_one(&mut db)
        .await
        .unwrap();
    for (nonce, _) in &estimated {
        assert_eq!(format!("{nonce:#x}"), kept, "every estimate carries the authorization kept first");
    }
    assert_eq!(available(&s, "alice", "USDC").await, "90");
    run.kill().unwrap();
}
