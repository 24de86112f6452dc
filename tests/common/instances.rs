//! Several `run` instances on one PostgreSQL, transfers of every sending
//! route posted at once (omnibus ETH and TUSD, a `SEGREGATED` account's TUSD
//! with a gas top-up, its USDC by EIP-3009 authorization) and deposits
//! arriving while the instances holding the chain are killed (SIGKILL):
//! every transfer lands exactly once, no sending address has a nonce gap or
//! a transaction left pending, the chain's watcher and sender are each held
//! by one live instance and taken over after a kill, and no deposit is
//! missed or doubled. Once with every RPC answer slowed past the worker
//! lease's time to live, once with many transfers.

use std::collections::BTreeSet;

use futures::StreamExt;

use super::{
    CHAIN,
    cluster::{Cluster, order},
    fleet::{Order, Scenario},
    transfers::ETH,
};
use alloy::primitives::U256;
use custody_indexer::store::{TxRole, TxState, WorkerKind};

/// `per_route` orders of each route, amounts distinct within each asset.
fn orders(per_route: usize, payers: usize) -> Vec<Order> {
    let mut orders = Vec::new();
    for i in 0..per_route {
        let payer = format!("payer-{}", i % payers);
        orders.push(order("treasury", "ETH", ETH / 1000 + i as u128));
        orders.push(order("treasury", "TUSD", 1_000_000 + i as u128));
        orders.push(order(&payer, "TUSD", 2_000_000 + i as u128));
        orders.push(order(&payer, "USDC", 3_000_000 + i as u128));
    }
    orders
}

/// A deposit to alice for each of `amounts`, a holder of the sender or the
/// watcher killed after each of the first `kills`; the killed (kind,
/// epoch) pairs.
async fn deposits_and_kills(c: &mut Cluster, amounts: &[u128], kills: usize) -> Vec<(WorkerKind, i64)> {
    let mut epochs = Vec::new();
    for (round, amount) in amounts.iter().enumerate() {
        c.anvil.send_eth(c.anvil.accounts[1], c.alice, U256::from(*amount)).await;
        if round < kills {
            epochs.push(c.kill_a_holder(round).await);
        }
    }
    epochs
}

/// Every destination holds exactly its amount, each transfer has one
/// included transaction of its own, and every sending address used one
/// nonce per transaction, none skipped or left pending.
async fn assert_each_landed_once(c: &Cluster, orders: &[Order], ids: &[String], omnibus_before: u64) {
    for order in orders {
        assert_eq!(c.received(order).await, U256::from(order.raw), "{order:?}");
    }
    let mut omnibus_nonces = BTreeSet::new();
    for id in ids {
        let txs = c.store().transfer_transactions(id).await.unwrap();
        let included: Vec<_> =
            txs.iter().filter(|t| t.role == TxRole::Transfer && t.state == TxState::Mined).collect();
        assert_eq!(included.len(), 1, "{id}: {txs:?}");
        if included[0].sender == c.omnibus.to_string() {
            assert!(omnibus_nonces.insert(included[0].nonce), "{id}: nonce {} used twice", included[0].nonce);
        }
    }
    let expected: BTreeSet<u64> = (omnibus_before..c.nonces(c.omnibus).await.0).collect();
    assert_eq!(omnibus_nonces, expected, "the omnibus transfers' nonces are contiguous");
    for address in [c.omnibus, c.sponsor].into_iter().chain(c.payers.iter().copied()) {
        let (mined, pending) = c.nonces(address).await;
        assert_eq!(pending, mined, "{address}: nothing left pending at a later nonce");
        assert_eq!(
            c.store().stored_nonce(CHAIN, &address.to_string()).await.unwrap().unwrap_or(mined),
            mined
        );
    }
    for (i, payer) in c.payers.iter().enumerate() {
        let sent = orders.iter().filter(|o| o.account == format!("payer-{i}") && o.symbol == "TUSD").count();
        assert_eq!(
            c.nonces(*payer).await.0,
            sent as u64,
            "payer-{i}: one transaction per topped-up transfer"
        );
    }
}

pub async fn scenario(s: Scenario) {
    let _machine = super::machine(s.alone).await;
    let Scenario { instances, kills, per_route, deposits, slow_ms, lease: ttl, .. } = s;
    let payers = per_route.clamp(1, 10);
    let mut c = Cluster::start(instances, payers, slow_ms, ttl).await;
    let omnibus_before = c.nonces(c.omnibus).await.0;
    let orders = orders(per_route, payers);
    // Posted as a busy client does: many at a time, in order.
    let posts = orders.iter().enumerate().map(|(i, order)| c.post(i % instances, order));
    let ids: Vec<String> = futures::stream::iter(posts).buffered(32).collect().await;
    let amounts: Vec<u128> = (0..deposits).map(|i| ETH / 100 + i as u128).collect();
    let epochs = deposits_and_kills(&mut c, &amounts, kills).await;
    // Told by its broadcasts: every instance reads its keys' nonces once
    // at its start (the restore's witness, see `restore::chains`).
    c.assert_one_at_a_time("the sender", &["eth_sendRawTransaction"]);
    c.assert_one_at_a_time("the watcher", &["eth_getBlockByNumber(full)"]);
    c.assert_taken_over(&epochs).await;
    c.all_confirmed(&ids, "alice", deposits, || c.anvil.mine(1)).await;

    // The chain's watcher and sender each ran on one instance at a time.
    assert!(
        !c.runs(&["eth_sendRawTransaction"]).is_empty()
            && !c.runs(&["eth_getBlockByNumber(full)"]).is_empty()
    );
    // Told by its broadcasts: every instance reads its keys' nonces once
    // at its start (the restore's witness, see `restore::chains`).
    c.assert_one_at_a_time("the sender", &["eth_sendRawTransaction"]);
    c.assert_one_at_a_time("the watcher", &["eth_getBlockByNumber(full)"]);
    assert_each_landed_once(&c, &orders, &ids, omnibus_before).await;

    c.assert_deposits("alice", &amounts, 18).await;
    c.assert_health_names_live_holders();
}
