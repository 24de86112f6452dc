//! Decoding checked against real mainnet responses from `tests/fixtures/mainnet`.

use alloy::primitives::{Address, address};
use serde::de::DeserializeOwned;

use super::*;
use crate::config::{AssetConfig, Chains, NativeAsset};

fn fixture<T: DeserializeOwned>(name: &str) -> Option<T> {
    Some(serde_json::from_value(crate::fixtures::mainnet("evm", name)).unwrap())
}

fn mainnet_assets() -> EvmAssets {
    let chains = Chains::load(None).unwrap();
    EvmAssets::from_config(chains.get(Chain::EthereumMainnet).unwrap())
}

fn watch(addresses: impl IntoIterator<Item = Address>) -> EvmWatchSet {
    let pairs =
        addresses.into_iter().enumerate().map(|(i, a)| (a.to_checksum(None), format!("acc-{i}"))).collect();
    WatchSet::build(pairs, |s| s.parse().ok())
}

struct Block18m {
    block: RpcBlock,
    receipts: Vec<RpcReceipt>,
    logs: Vec<Log>,
}

fn block_18000000() -> Option<Block18m> {
    let block: RpcBlock = fixture("eth-mainnet-18000000.eth_getBlockByNumber_full.json")?;
    let receipts: Vec<serde_json::Value> = fixture("eth-mainnet-18000000.eth_getBlockReceipts.json")?;
    let logs = receipts
        .iter()
        .flat_map(|r| r["logs"].as_array().unwrap().clone())
        .map(|l| serde_json::from_value(l).unwrap())
        .collect();
    let receipts = receipts.into_iter().map(|r| serde_json::from_value(r).unwrap()).collect();
    Some(Block18m { block, receipts, logs })
}

/// Every recipient of value in the block: native `to`s and token `Transfer` recipients.
fn all_recipients(b: &Block18m) -> Vec<Address> {
    let mut out: Vec<Address> = b.block.transactions.iter().filter_map(|t| t.to).collect();
    out.extend(b.logs.iter().filter_map(|l| Transfer::decode_log(&l.inner).ok().map(|t| t.to)));
    out.sort();
    out.dedup();
    out
}

#[test]
fn block_18000000_yields_every_nonzero_listed_transfer_and_nothing_else() {
    let Some(b) = block_18000000() else { return };
    assert_eq!(b.block.transactions.len(), 94);
    let watch = watch(all_recipients(&b));
    let input =
        BlockInput { block: &b.block, succeeded: &succeeded(&b.receipts), logs: &b.logs, traces: None };
    let deposits = deposits_in_block(Chain::EthereumMainnet, &input, &watch, &mainnet_assets());

    // 39 successful value transfers (a 40th reverted) and 10 non-zero USDC/USDT
    // transfers; the block's 48 zero-value USDT transfers are address poisoning.
    let native = deposits.iter().filter(|d| d.position == Position::Native).count();
    let tokens: Vec<_> = deposits.iter().filter(|d| matches!(d.position, Position::Log(_))).collect();
    assert_eq!(native, 39);
    assert_eq!(tokens.len(), 10);
    assert!(deposits.iter().all(|d| !d.amount.is_zero()));
    assert!(deposits.iter().all(|d| d.block_number == 18_000_000 && d.block_time_ms == 0x64ea268f * 1000));

    // Base's `timestampMs` gives the time its milliseconds; one outside
    // `timestamp`'s second is not the block's time and is not taken.
    for (served, time) in
        [(0x64ea268f_u64 * 1000 + 600, 0x64ea268f_u64 * 1000 + 600), (0x64ea2690 * 1000, 0x64ea268f * 1000)]
    {
        let block = RpcBlock { timestamp_ms: Some(alloy::primitives::U64::from(served)), ..b.block.clone() };
        let input = BlockInput { block: &block, ..input };
        let deposits = deposits_in_block(Chain::EthereumMainnet, &input, &watch, &mainnet_assets());
        assert!(deposits.iter().all(|d| d.block_time_ms == time), "timestampMs {served}");
    }
    let reverted = "0x10a315bbd6c9500b24debc5882cc7d9193ed314b864e26a23a2d4d343dfdfc28";
    assert!(deposits.iter().all(|d| d.tx_hash != reverted), "a reverted transaction is no deposit");

    let usdc = tokens
        .iter()
        .find(|d| d.tx_hash == "0xde0ca4c3db355459e8573d7d6f6373256ef1e883e331f3aaf9e4cb8bd668138d")
        .unwrap();
    assert_eq!(usdc.currency_symbol, "USDC");
    assert_eq!(usdc.amount.to_string(), "8000");
    let key = TokenTransfer::new(
        "USDC",
        "0x98c23e9d8f34fefb1b7bd6a91b7ff122f4e16f5c",
        "0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c",
        "8000000000",
        0,
    );
    assert_eq!(usdc.position, Position::Log(key));
    assert_eq!(
        usdc.position.to_string(),
        "log:USDC:0x98c23e9d8f34fefb1b7bd6a91b7ff122f4e16f5c:0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c:8000000000:0"
    );
    // Stored as the first 128 bits of that text's SHA-256, base64url: the
    // same for every store and every upgrade, so this value never changes.
    assert_eq!(usdc.position.key(), "log:69j-dLdwv7geSCL3jn56-w");
    let checksummed = |hex: &str| hex.parse::<Address>().unwrap().to_checksum(None);
    assert_eq!(usdc.account_address, checksummed("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c"));
    assert_eq!(usdc.source_address, checksummed("0x98c23e9d8f34fefb1b7bd6a91b7ff122f4e16f5c"));
    assert!(usdc.source_account_id.is_none(), "the sender is not watched");

    let eth = deposits
        .iter()
        .find(|d| d.tx_hash == "0x8bd66e08dbe4a169dc82834cc382976ee80f39012e028195aa7f092929d96af5")
        .unwrap();
    assert_eq!((eth.currency_symbol.as_str(), eth.amount.to_string().as_str()), ("ETH", "29.9982"));
    assert_eq!(eth.block_hash, "0x95b198e154acbfc64109dfd22d8224fe927fd8dfdedfae01587674482ba4baf3");
}

#[test]
fn only_watched_addresses_and_listed_tokens_count() {
    let Some(b) = block_18000000() else { return };
    let input =
        BlockInput { block: &b.block, succeeded: &succeeded(&b.receipts), logs: &b.logs, traces: None };
    let assets = mainnet_assets();
    assert!(deposits_in_block(Chain::EthereumMainnet, &input, &watch([]), &assets).is_empty());

    let recipient: Address = "0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c".parse().unwrap();
    let sender: Address = "0x98c23e9d8f34fefb1b7bd6a91b7ff122f4e16f5c".parse().unwrap();
    let both = watch([recipient, sender]);
    let found = deposits_in_block(Chain::EthereumMainnet, &input, &both, &assets);
    let usdc: Vec<_> = found.iter().filter(|d| d.account_address == recipient.to_checksum(None)).collect();
    assert_eq!(usdc.len(), 1);
    assert_eq!(usdc[0].source_account_id.as_deref(), both.account_of(&sender).map(|s| &**s));

    // With USDC unlisted, the same log is ignored.
    let mut config = Chains::load(None).unwrap().get(Chain::EthereumMainnet).unwrap().clone();
    config.assets.retain(|a: &AssetConfig| a.symbol != "USDC");
    config.native = NativeAsset { symbol: "ETH".into(), decimals: 18 };
    let no_usdc = EvmAssets::from_config(&config);
    assert!(
        deposits_in_block(Chain::EthereumMainnet, &input, &both, &no_usdc)
            .iter()
            .all(|d| d.currency_symbol != "USDC")
    );
}

#[test]
fn a_token_deposit_keeps_its_position_when_its_logs_move_in_the_block() {
    let Some(mut b) = block_18000000() else { return };
    let watch = watch(all_recipients(&b));
    let assets = mainnet_assets();
    let positions = |b: &Block18m| {
        let input =
            BlockInput { block: &b.block, succeeded: &succeeded(&b.receipts), logs: &b.logs, traces: None };
        let mut found: Vec<_> = deposits_in_block(Chain::EthereumMainnet, &input, &watch, &assets)
            .into_iter()
            .map(|d| (d.tx_hash, d.position.to_string()))
            .collect();
        found.sort();
        found
    };
    let before = positions(&b);

    // The same transactions behind another transaction's 9 logs.
    for log in &mut b.logs {
        log.log_index = log.log_index.map(|i| i + 9);
    }
    assert_eq!(positions(&b), before);

    // A second, identical transfer in the same transaction is a deposit of its own.
    let usdc_tx = "0xde0ca4c3db355459e8573d7d6f6373256ef1e883e331f3aaf9e4cb8bd668138d";
    let recipient = address!("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c");
    let mut twin = b
        .logs
        .iter()
        .find(|l| {
            l.transaction_hash.is_some_and(|h| h.to_string() == usdc_tx)
                && assets.contracts().contains(&l.address())
                && Transfer::decode_log(&l.inner).is_ok_and(|t| t.to == recipient)
        })
        .unwrap()
        .clone();
    twin.log_index = Some(10_000);
    b.logs.push(twin);
    let after = positions(&b);
    assert_eq!(after.len(), before.len() + 1);
    let ours: Vec<&String> = after.iter().filter(|(tx, _)| tx == usdc_tx).map(|(_, p)| p).collect();
    assert_eq!(ours.len(), 2);
    assert!(ours[0].ends_with(":8000000000:0") && ours[1].ends_with(":8000000000:1"), "{ours:?}");
}

#[test]
fn pre_byzantium_receipts_without_status_count_as_successful() {
    let Some(receipt) =
        fixture::<RpcReceipt>("eth-mainnet-1755635.eth_getTransactionReceipt_0x2e3dcd05.json")
    else {
        return;
    };
    assert!(receipt.status.is_none());
    assert!(receipt.succeeded() && receipt.outcome_told(), "its state root tells it succeeded");
    let asked = [(receipt.transaction_hash, receipt.block_hash)];
    assert_eq!(check_receipts(&asked, std::slice::from_ref(&receipt)), Ok(()));
    let Some(block) = fixture::<RpcBlock>("eth-mainnet-1755635.eth_getBlockByNumber_full.json") else {
        return;
    };
    assert_eq!(block.transactions.len(), 2);
    let Some(empty) = fixture::<RpcBlock>("eth-mainnet-1755634.eth_getBlockByNumber_full.json") else {
        return;
    };
    assert!(empty.transactions.is_empty());
    assert_eq!(block.parent_hash, empty.hash, "consecutive blocks link by parent hash");
}

#[test]
fn block_21925176_receipts_decode_66_listed_transfers() {
    let Some(receipts) =
        fixture::<Vec<serde_json::Value>>("eth-mainnet-21925176.eth_getBlockReceipts.result.json")
    else {
        return;
    };
    let assets = mainnet_assets();
    let contracts = assets.contracts();
    let transfers = receipts
        .iter()
        .flat_map(|r| r["logs"].as_array().unwrap().clone())
        .map(|l| serde_json::from_value::<Log>(l).unwrap())
        .filter(|l| contracts.contains(&l.address()))
        .filter_map(|l| Transfer::decode_log(&l.inner).ok())
        .filter(|t| !t.value.is_zero())
        .count();
    assert_eq!(transfers, 66);
}

#[test]
fn reverted_subcalls_and_zero_values_are_not_internal_transfers() {
    let to = address!("0x00000000000000000000000000000000000000aa");
    let frame = |typ: &str, value: u64, error: Option<&str>, calls: Vec<CallFrame>| CallFrame {
        typ: typ.into(),
        from: address!("0x00000000000000000000000000000000000000bb"),
        to: Some(to),
        value: Some(U256::from(value)),
        error: error.map(String::from),
        calls,
        ..Default::default()
    };
    let root = frame(
        "CALL",
        0,
        None,
        vec![
            frame("CALL", 5, None, vec![frame("CALL", 2, None, vec![])]),
            frame("CALL", 7, Some("execution reverted"), vec![frame("CALL", 1, None, vec![])]),
            frame("STATICCALL", 0, None, vec![]),
            frame("DELEGATECALL", 9, None, vec![]),
            frame("CALL", 0, None, vec![]),
        ],
    );
    let found: Vec<_> = internal_transfers(&root).into_iter().map(|(p, f)| (p, f.value.unwrap())).collect();
    assert_eq!(found, vec![("0".to_string(), U256::from(5)), ("0.0".to_string(), U256::from(2))]);
    let failed = CallFrame { error: Some("out of gas".into()), ..root };
    assert!(internal_transfers(&failed).is_empty());
}

#[test]
fn a_candidates_receipt_must_be_its_own_and_of_its_block() {
    let Some(b) = block_18000000() else { return };
    let watch = watch(all_recipients(&b));
    let asked: Vec<(B256, B256)> =
        native_candidates(&b.block, &watch).into_iter().map(|tx| (tx, b.block.hash)).collect();
    assert_eq!(asked.len(), 40, "39 value transfers and one reverted");
    let own: Vec<RpcReceipt> = asked
        .iter()
        .map(|(tx, _)| b.receipts.iter().find(|r| r.transaction_hash == *tx).unwrap().clone())
        .collect();
    assert_eq!(check_receipts(&asked, &own), Ok(()));

    let other_fork = B256::repeat_byte(0x11);
    let changed = |i: usize, change: &dyn Fn(&mut RpcReceipt)| {
        let mut receipts = own.clone();
        change(&mut receipts[i]);
        receipts
    };
    // (what a backend answered, what the refusal names)
    let table: Vec<(Vec<RpcReceipt>, &str)> = vec![
        (changed(3, &|r| r.block_hash = other_fork), "but its receipt is of block 0x1111"),
        (changed(39, &|r| r.block_hash = other_fork), "but its receipt is of block 0x1111"),
        (changed(0, &|r| r.transaction_hash = asked[1].0), "is of 0x"),
        (changed(7, &|r| r.status = None), "holds neither a status nor a root"),
        (own[..39].to_vec(), "39 receipts answered for 40 transactions"),
        (Vec::new(), "0 receipts answered for 40 transactions"),
        (own.iter().rev().cloned().collect(), "is of 0x"),
    ];
    for (i, (receipts, refusal)) in table.into_iter().enumerate() {
        let refused = check_receipts(&asked, &receipts).expect_err(&format!("row {i} is refused"));
        assert!(refused.contains(refusal), "row {i}: {refused}");
    }
}

#[test]
fn a_block_answered_without_its_body_is_not_taken_for_an_empty_one() {
    let Some(b) = block_18000000() else { return };
    let Some(empty) = fixture::<RpcBlock>("eth-mainnet-1755634.eth_getBlockByNumber_full.json") else {
        return;
    };
    let Some(hashes) =
        fixture::<RpcBlock<B256>>("eth-mainnet-21925176.eth_getBlockByNumber_hashes-only.result.json")
    else {
        return;
    };
    let bodiless = |block: &RpcBlock| RpcBlock { transactions: Vec::new(), ..block.clone() };
    let bodiless_hashes = RpcBlock { transactions: Vec::new(), ..hashes.clone() };
    let rooted = RpcBlock { transactions_root: b.block.transactions_root, ..empty.clone() };
    // (answer, missing its body)
    let table = [
        (b.block.body_missing(), false),
        (bodiless(&b.block).body_missing(), true),
        (empty.body_missing(), false),
        (rooted.body_missing(), true),
        (hashes.body_missing(), false),
        (bodiless_hashes.body_missing(), true),
    ];
    for (row, (missing, expected)) in table.into_iter().enumerate() {
        assert_eq!(missing, expected, "row {row}");
    }
}

#[test]
fn from_eip7708_on_native_transfers_are_read_from_its_logs_only() {
    let mut b = block_18000000().unwrap();
    let watch = watch(all_recipients(&b));
    // The block's first listed token transfer, logged again by EIP-7708's
    // address: a native transfer as the protocol logs it.
    let listed = mainnet_assets().contracts();
    let moves = |l: &&Log| Transfer::decode_log(&l.inner).is_ok_and(|t| !t.value.is_zero());
    let mut logged = b.logs.iter().filter(|l| listed.contains(&l.address())).find(moves).unwrap().clone();
    logged.inner.address = EIP7708_SYSTEM.parse().unwrap();
    logged.log_index = Some(50_000);
    let moved = Transfer::decode_log(&logged.inner).unwrap();
    b.logs.push(logged);
    let found = |from: Option<u64>| {
        let mut assets = mainnet_assets();
        assets.eip7708_from = from;
        let input =
            BlockInput { block: &b.block, succeeded: &succeeded(&b.receipts), logs: &b.logs, traces: None };
        deposits_in_block(Chain::EthereumMainnet, &input, &watch, &assets)
    };
    for before in [None, Some(18_000_001)] {
        let deposits = found(before);
        assert_eq!(deposits.iter().filter(|d| d.position == Position::Native).count(), 39, "{before:?}");
        assert!(deposits.iter().all(|d| d.currency_symbol != "ETH" || d.position == Position::Native));
    }
    let deposits = found(Some(18_000_000));
    let native: Vec<&Detected> = deposits.iter().filter(|d| d.currency_symbol == "ETH").collect();
    assert_eq!(native.len(), 1, "the transaction values are not read again: {native:?}");
    assert!(matches!(&native[0].position, Position::Log(_)), "{native:?}");
    assert_eq!(native[0].amount, Amount::from_raw(moved.value, 18));
    assert_eq!(native[0].source_address, moved.from.to_checksum(None));
    assert_eq!(deposits.len() - 1, 10, "the token deposits stay");
}

#[test]
fn from_eip7708_on_a_transactions_value_keeps_its_position_and_needs_its_log() {
    let mut b = block_18000000().unwrap();
    let succeeded = succeeded(&b.receipts);
    let sent = |t: &&crate::evm::rpc::RpcTransaction| {
        !t.value.is_zero() && succeeded.contains(&t.hash) && t.to.is_some()
    };
    let receivers: Vec<Address> = b.block.transactions.iter().filter(sent).filter_map(|t| t.to).collect();
    let tx = b
        .block
        .transactions
        .iter()
        .filter(sent)
        .find(|t| receivers.iter().filter(|r| Some(**r) == t.to).count() == 1);
    let tx = tx.unwrap().clone();
    let to = tx.to.unwrap();
    let watch = watch([to]);
    let mut assets = mainnet_assets();
    assets.eip7708_from = Some(18_000_000);
    let unlogged =
        |b: &Block18m, assets: &EvmAssets| unlogged_value(&b.block, &b.logs, &succeeded, &watch, assets);
    assert_eq!(unlogged(&b, &assets), Some(tx.hash), "without its log the block is not read");

    let mut log = b.logs[0].clone();
    let topics = vec![transfer_topic(), tx.from.into_word(), to.into_word()];
    let data = alloy::primitives::Bytes::from(tx.value.to_be_bytes::<32>().to_vec());
    log.inner = alloy::primitives::Log::new_unchecked(EIP7708_SYSTEM.parse().unwrap(), topics, data);
    log.transaction_hash = Some(tx.hash);
    log.log_index = Some(60_000);
    b.logs.push(log);
    assert_eq!(unlogged(&b, &assets), None);

    let found = |assets: &EvmAssets| {
        let input = BlockInput { block: &b.block, succeeded: &succeeded, logs: &b.logs, traces: None };
        let mut found: Vec<(String, String, String)> =
            deposits_in_block(Chain::EthereumMainnet, &input, &watch, assets)
                .into_iter()
                .map(|d| (d.tx_hash, d.position.to_string(), d.amount.to_string()))
                .collect();
        found.sort();
        found
    };
    let logged = found(&assets);
    assert!(logged.iter().any(|(hash, position, _)| *hash == tx.hash.to_string() && position == "native"));
    assets.eip7708_from = None;
    assert_eq!(logged, found(&assets), "the same deposits at the same positions under either rule");
    assert_eq!(unlogged(&b, &assets), None, "before the fork nothing is asked of the logs");
}
