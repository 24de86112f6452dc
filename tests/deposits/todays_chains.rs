//! Today's EVM chains on anvil: native deposits read from EIP-7708's logs
//! from the fork block on, and the milliseconds of Base's 200 ms blocks.

use crate::common;

use std::sync::atomic::Ordering::SeqCst;

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
};
use common::{Backend, CHAIN, add_account, catch_up};

use crate::evm_watcher::{Setup, setup, token_transfers_through_a_proxy, watcher};

const ETH: u64 = 1_000_000_000_000_000_000;

/// The address EIP-7708 logs native transfers from.
const EIP7708: &str = "0xfffffffffffffffffffffffffffffffffffffffe";

/// Code for the EIP-7708 address that, called with `from`, `to` and
/// `value` (32 bytes each), emits exactly the log the EIP specifies for a
/// native transfer: `LOG3(Transfer, from, to)` with `value` as data.
/// CALLDATACOPY(0, 0x40, 0x20); push to, from, the topic; LOG3(0, 0x20).
fn eip7708_code() -> String {
    let topic = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
    format!("0x602060406000376020356000357f{topic}60206000a300")
}

/// A transaction from `sender` that makes the EIP-7708 address log a native
/// transfer of `wei` from `from` to `to`, as the protocol would.
fn logged(sender: Address, from: Address, to: Address, wei: U256) -> TransactionRequest {
    let mut input = Vec::with_capacity(96);
    input.extend_from_slice(from.into_word().as_slice());
    input.extend_from_slice(to.into_word().as_slice());
    input.extend_from_slice(&wei.to_be_bytes::<32>());
    TransactionRequest::default()
        .with_from(sender)
        .with_to(EIP7708.parse().unwrap())
        .with_input(alloy::primitives::Bytes::from(input))
}

/// Code for a watched address that, paid, has the EIP-7708 address log the
/// payment as the protocol would, in the same transaction: it calls it with
/// (`CALLER`, `ADDRESS`, `CALLVALUE`).
fn logs_its_payments() -> String {
    let system = EIP7708.trim_start_matches("0x");
    format!("0x3360005230602052346040526000600060606000600073{system}5af100")
}

#[tokio::test]
async fn from_eip7708_on_native_deposits_are_read_from_its_logs_and_counted_once() {
    let setup = setup(Backend::Sqlite).await;
    let Setup { anvil, db, outsider, .. } = &setup;
    let provider = &anvil.provider;
    let system: Address = EIP7708.parse().unwrap();
    provider.raw_request::<_, ()>("anvil_setCode".into(), (system, eip7708_code())).await.unwrap();
    // A watched address whose code logs what it is paid.
    let alice = &Address::repeat_byte(0xa1);
    add_account(&db.store, "wallet", &alice.to_string()).await;
    provider.raw_request::<_, ()>("anvil_setCode".into(), (*alice, logs_its_payments())).await.unwrap();
    let code = provider.get_code_at(*alice).await.unwrap();
    assert_eq!(code.len(), 46, "{code}");
    let tusd = anvil.deploy_token("TUSD").await;
    let send = |tx: TransactionRequest| async move {
        let receipt = provider.send_transaction(tx).await.unwrap().get_receipt().await.unwrap();
        assert!(receipt.status());
        receipt
    };
    let eth = |tenths: u64| U256::from(ETH / 10 * tenths);
    // Gas given, not estimated: the estimate is the least that succeeds,
    // and a logging call that fails for want of gas reverts nothing.
    let pay = |tenths: u64| {
        let payment = TransactionRequest::default().with_from(*outsider).with_to(*alice);
        payment.with_value(eth(tenths)).with_gas_limit(100_000)
    };

    // Before the fork block the transaction's value counts, once; a log
    // there is not the protocol's and counts for nothing.
    assert_eq!(send(pay(1)).await.inner.logs().len(), 1, "the payment is logged");
    send(logged(*outsider, *outsider, *alice, eth(50))).await;
    let fork = anvil.head().await + 1;

    // From it on: a payment and its log count once; an internal transfer is
    // found from its log alone, without traces; a log never is a token's.
    let paid = send(pay(2)).await;
    assert_eq!(paid.block_number, Some(fork));
    let contract = Address::repeat_byte(0xc0);
    send(logged(*outsider, contract, *alice, eth(3))).await;
    send(logged(*outsider, tusd, *alice, eth(4))).await;

    let extra = format!("eip7708_from_block = {fork}");
    let mut watcher = watcher(anvil, &db.store, Some(tusd), &extra).await;
    catch_up(&mut watcher).await;
    let deposits = db.store.deposits_on_chain(CHAIN).await.unwrap();
    let mut found: Vec<(String, String, String)> = deposits
        .iter()
        .map(|d| (d.currency_symbol.clone(), d.amount.clone(), d.source_address.to_lowercase()))
        .collect();
    found.sort();
    let from = |a: &Address| format!("{a:#x}");
    assert_eq!(
        found,
        [
            ("ETH".to_string(), "0.1".to_string(), from(outsider)),
            ("ETH".to_string(), "0.2".to_string(), from(outsider)),
            ("ETH".to_string(), "0.3".to_string(), from(&contract)),
            ("ETH".to_string(), "0.4".to_string(), from(&tusd)),
        ]
    );
    let second = deposits.iter().find(|d| d.amount == "0.2").unwrap();
    assert_eq!(second.transaction_hash, paid.transaction_hash.to_string());
}

/// Base serves `timestampMs` since its blocks come every 200 ms: a
/// deposit's `created_at` carries the block's milliseconds, so deposits
/// of blocks sharing one second still read in block order.
#[tokio::test]
async fn a_node_serving_milliseconds_gives_created_at_its_sub_second_part() {
    let setup = setup(Backend::Sqlite).await;
    let (rpc, mut watcher) = token_transfers_through_a_proxy(&setup).await;
    let from = 1_800_000_000_000;
    rpc.faults.millisecond_blocks_from.store(from, SeqCst);
    catch_up(&mut watcher).await;
    let deposits = setup.db.store.deposits_on_chain(CHAIN).await.unwrap();
    assert_eq!(deposits.len(), 12);
    let mut by_block = Vec::new();
    for deposit in &deposits {
        let hash = deposit.transaction_hash.parse().unwrap();
        let receipt = setup.anvil.provider.get_transaction_receipt(hash).await.unwrap().unwrap();
        let number = receipt.block_number.unwrap();
        let expected = (from + number * 200) as i64;
        assert_eq!(deposit.created_at.timestamp_millis(), expected, "block {number}: {deposit:?}");
        by_block.push((number, deposit.created_at));
    }
    by_block.sort();
    assert!(by_block.windows(2).all(|w| w[0].1 < w[1].1), "later blocks, later times: {by_block:?}");
    let seconds: std::collections::BTreeSet<i64> = by_block.iter().map(|(_, t)| t.timestamp()).collect();
    assert!(seconds.len() < by_block.len(), "blocks share seconds: {by_block:?}");
}
