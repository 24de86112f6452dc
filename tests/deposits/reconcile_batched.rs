//! `reconcile` reads balances in batches through Multicall3: on anvil with
//! the contract placed at its address, 110 watched addresses' ether and
//! TUSD (220 balances) are read in two `eth_call`s at the height, no
//! `eth_getBalance` nor single `balanceOf`, and every line agrees with the
//! deposits the watcher confirmed.

use crate::common;

use std::time::Duration;

use alloy::primitives::{Address, U256};
use common::{
    CHAIN,
    anvil::{Anvil, Mined},
    chain_toml,
    cli::Env,
    eventually, proxy,
};
use serde_json::Value;

const ADDRESSES: usize = 110;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balances_are_read_two_hundred_to_a_call_and_agree() {
    let anvil = Anvil::start().await;
    anvil.place_multicall3().await;
    let tusd = anvil.deploy_token("TUSD").await;
    let counted = proxy::start(anvil.url()).await;
    let env =
        Env::with_chain_file(&chain_toml(std::slice::from_ref(&counted.url), Some(&tusd.to_string()), ""));
    let start = anvil.head().await + 1;
    let watched: Vec<Address> =
        (0..ADDRESSES).map(|i| Address::left_padding_from(&[0xbb, i as u8 + 1])).collect();
    for (i, address) in watched.iter().enumerate() {
        env.add_account_from(&format!("acct-{i}"), &address.to_string(), start);
    }
    let run = env.spawn_run(CHAIN);
    // Every tenth address receives ether and TUSD.
    let (funder, token) = (anvil.accounts[0], anvil.token(tusd));
    for (i, address) in watched.iter().enumerate().step_by(10) {
        anvil.send_eth(funder, *address, U256::from(1_000 + i as u64)).await;
        token.mint(*address, U256::from(2_000_000 + i as u64)).from(anvil.accounts[5]).mined().await;
    }
    let last = anvil.head().await;
    anvil.mine(20).await;
    let store = env.store().await;
    eventually(Duration::from_secs(90), "every deposit CONFIRMED and indexed", || async {
        let deposits = store.deposits_on_chain(CHAIN).await.unwrap();
        let confirmed = deposits.len() == 22 && deposits.iter().all(|d| d.status.as_str() == "CONFIRMED");
        let indexed = store.chain_state(CHAIN).await.unwrap()?.next_block > last + 5;
        (confirmed && indexed).then_some(())
    })
    .await;
    drop(run);

    // The first pass records what baselines `run` did not; the second reads
    // each balance once, in batches.
    let reconcile = || env.output(&["reconcile", "--chain", CHAIN.as_str(), "--json"]);
    assert_eq!(reconcile().status.code(), Some(0));
    counted.faults.calls.lock().unwrap().clear();
    let out = reconcile();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2 * ADDRESSES);
    let funded = lines.iter().filter(|l| l["onchain"] != "0").count();
    assert_eq!(funded, 22, "the funded addresses' ether and TUSD are read");
    let calls: Vec<String> = counted.faults.calls.lock().unwrap().iter().map(|(_, m)| m.clone()).collect();
    let count = |method: &str| calls.iter().filter(|m| *m == method).count();
    assert_eq!((count("eth_getBalance"), count("eth_call")), (0, 2), "220 balances in two calls: {calls:?}");
}
