//! Several `run` instances of a local Solana network on one PostgreSQL,
//! transfers of every sending route posted at once (the omnibus wallet's
//! SOL and TUSD, a `SEGREGATED` account's SOL and TUSD; the sponsor pays
//! every fee) and deposits arriving while the instances holding the chain
//! are killed (SIGKILL): every transfer lands exactly once (one of its
//! signatures on chain; each destination, owner and the sponsor moved by
//! exactly the amounts and the gas ledger), the chain's watcher and sender
//! are each held by one live instance at a time and taken over after a
//! kill, and no deposit is missed or doubled.

use std::collections::BTreeMap;

use futures::StreamExt;
use solana_commitment_config::CommitmentConfig;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use super::{
    fleet::{Order, Scenario},
    solana::transfer_sol,
    solana_cluster::SolanaCluster,
};
use custody_indexer::store::{TxRole, TxState, WorkerKind};

/// `per_route` orders of each route, amounts distinct within each asset
/// (SOL ones above the rent-exempt minimum of a new wallet).
fn orders(per_route: usize, payers: usize) -> Vec<Order> {
    let mut orders = Vec::new();
    for i in 0..per_route as u64 {
        let payer = format!("payer-{}", i as usize % payers);
        orders.push(SolanaCluster::order("treasury", "SOL", 1_000_000 + i));
        orders.push(SolanaCluster::order("treasury", "TUSD", 1_000_000 + i));
        orders.push(SolanaCluster::order(&payer, "SOL", 2_000_000 + i));
        orders.push(SolanaCluster::order(&payer, "TUSD", 2_000_000 + i));
    }
    orders
}

/// Every sending wallet's lamports and TUSD.
async fn balances(c: &SolanaCluster) -> BTreeMap<Pubkey, (u64, u64)> {
    let mut balances = BTreeMap::new();
    for wallet in [c.sponsor, c.omnibus].iter().chain(&c.payers) {
        balances.insert(*wallet, (c.lamports(wallet).await, c.tokens(wallet).await));
    }
    balances
}

/// A deposit to alice for each of `amounts`, a holder of the sender or the
/// watcher killed after each of the first `kills`; the killed (kind,
/// epoch) pairs.
async fn deposits_and_kills(c: &mut SolanaCluster, amounts: &[u64], kills: usize) -> Vec<(WorkerKind, i64)> {
    let mut epochs = Vec::new();
    for (round, amount) in amounts.iter().enumerate() {
        let from = &c.outsider;
        c.node.send(&[transfer_sol(&from.pubkey(), &c.alice, *amount)], from, &[]).await;
        if round < kills {
            epochs.push(c.kill_a_holder(round).await);
        }
    }
    epochs
}

/// Each transfer has exactly one signature that the network knows, which
/// is its included transaction; every destination holds exactly its
/// amount; the owners paid exactly their orders and the sponsor exactly
/// the gas ledger.
async fn assert_each_landed_once(
    c: &SolanaCluster,
    orders: &[Order],
    ids: &[String],
    before: &BTreeMap<Pubkey, (u64, u64)>,
) {
    let confirmed = c.node.slot(CommitmentConfig::confirmed()).await;
    c.node.wait_finalized(confirmed).await;
    for order in orders {
        assert_eq!(u128::from(c.received(order).await), order.raw, "{order:?}");
    }
    let mut fees = 0u64;
    for id in ids {
        let txs = c.store().transfer_transactions(id).await.unwrap();
        let signatures: Vec<_> = txs.iter().map(|t| t.hash.parse().unwrap()).collect();
        let statuses = c.node.rpc.get_signature_statuses_with_history(&signatures).await.unwrap().value;
        let landed: Vec<_> = txs.iter().zip(&statuses).filter(|(_, s)| s.is_some()).collect();
        assert_eq!(landed.len(), 1, "{id}: one signature on chain: {txs:?} {statuses:?}");
        let (tx, status) = landed[0];
        assert!(status.as_ref().unwrap().err.is_none(), "{id}: {status:?}");
        assert!(tx.role == TxRole::Transfer && tx.state == TxState::Mined, "{id}: {tx:?}");
        for (_, _, paid) in c.store().gas_entries(id).await.unwrap() {
            fees += u64::try_from(paid).unwrap();
        }
    }
    let after = balances(c).await;
    let paid = |account: &str, symbol: &str| -> u64 {
        let of = orders.iter().filter(|o| o.account == account && o.symbol == symbol);
        of.map(|o| u64::try_from(o.raw).unwrap()).sum()
    };
    let spent = |wallet: &Pubkey| (before[wallet].0 - after[wallet].0, before[wallet].1 - after[wallet].1);
    assert_eq!(spent(&c.sponsor), (fees, 0), "the sponsor paid the gas ledger's fees and rent");
    assert_eq!(spent(&c.omnibus), (paid("treasury", "SOL"), paid("treasury", "TUSD")), "the omnibus wallet");
    for (i, payer) in c.payers.iter().enumerate() {
        let account = format!("payer-{i}");
        assert_eq!(spent(payer), (paid(&account, "SOL"), paid(&account, "TUSD")), "{account}");
    }
}

const SENDER: [&str; 3] = ["sendTransaction", "getLatestBlockhash", "getEpochInfo"];
const WATCHER: [&str; 2] = ["getBlocks", "getBlock"];

pub async fn scenario(s: Scenario) {
    let _machine = super::machine(s.alone).await;
    let Scenario { instances, kills, per_route, deposits, slow_ms, lease, .. } = s;
    let payers = per_route.clamp(1, 10);
    let mut c = SolanaCluster::start(instances, payers, slow_ms, lease).await;
    let before = balances(&c).await;
    let orders = orders(per_route, payers);
    // Posted as a busy client does: many at a time, in order.
    let posts = orders.iter().enumerate().map(|(i, order)| c.post(i % instances, order));
    let ids: Vec<String> = futures::stream::iter(posts).buffered(32).collect().await;
    let amounts: Vec<u64> = (0..deposits as u64).map(|i| 5_000_000 + i).collect();
    let epochs = deposits_and_kills(&mut c, &amounts, kills).await;
    c.assert_one_at_a_time("the sender", &SENDER);
    c.assert_one_at_a_time("the watcher", &WATCHER);
    c.assert_taken_over(&epochs).await;
    c.all_confirmed(&ids, "alice", deposits, || async {}).await;

    assert!(!c.runs(&["sendTransaction"]).is_empty() && !c.runs(&["getBlock"]).is_empty());
    c.assert_one_at_a_time("the sender", &SENDER);
    c.assert_one_at_a_time("the watcher", &WATCHER);
    assert_each_landed_once(&c, &orders, &ids, &before).await;
    let amounts: Vec<u128> = amounts.into_iter().map(u128::from).collect();
    c.assert_deposits("alice", &amounts, 9).await;
    c.assert_health_names_live_holders();
}
