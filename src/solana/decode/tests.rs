//! Decoding checked against real mainnet responses from `tests/fixtures/mainnet`.

use solana_transaction_status_client_types::EncodedConfirmedTransactionWithStatusMeta;

use solana_transaction::versioned::TransactionVersion;

use super::*;
use crate::config::Chains;

fn fixture(name: &str) -> EncodedConfirmedTransactionWithStatusMeta {
    serde_json::from_value(raw_fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn raw_fixture(name: &str) -> serde_json::Value {
    crate::fixtures::mainnet("solana", name)
}

fn mainnet() -> ChainConfig {
    Chains::load(None).unwrap().get(Chain::SolanaMainnet).unwrap().clone()
}

fn watch(wallets: &[&str]) -> SolanaWatchSet {
    let pairs = wallets.iter().map(|w| (w.to_string(), format!("acc-{w}"))).collect();
    WatchSet::build(pairs, |s| Some(Box::from(s)))
}

/// `(account_address, symbol, amount, source_address)` of each deposit.
fn decode(name: &str, wallets: &[&str], config: &ChainConfig) -> Vec<(String, String, String, String)> {
    let tx = fixture(name);
    let at = Slot { chain: config.chain, slot: tx.slot, block_hash: "hash", block_time: 1 };
    let assets = SolanaAssets::from_config(config);
    let mut out: Vec<_> = deposits_in_transaction(at, &tx.transaction, &watch(wallets), &assets)
        .into_iter()
        .map(|d| (d.account_address, d.currency_symbol, d.amount.to_string(), d.source_address))
        .collect();
    out.sort();
    out
}

fn row(to: &str, symbol: &str, amount: &str, from: &str) -> (String, String, String, String) {
    (to.into(), symbol.into(), amount.into(), from.into())
}

#[test]
fn a_sol_transfer_credits_the_receiver_only() {
    let name = "sol-mainnet.getTransaction.sol-transfer.2kHbPUGz.json";
    let (to, from) =
        ("3eF3iBQqi2DmDLS7o9y8gG7necF5VBbwYy5gqF7sh899", "4Y5YjAPB4hMdCsiFy7BaBSscyiAvB7cuAbhxnBZ5xmgy");
    let found = decode(name, &[to, from], &mainnet());
    assert_eq!(found, vec![row(to, "SOL", "0.024922118", from)]);

    let tx = fixture(name);
    let at = Slot { chain: Chain::SolanaMainnet, slot: tx.slot, block_hash: "h", block_time: 7 };
    let both = watch(&[to, from]);
    let deposit =
        &deposits_in_transaction(at, &tx.transaction, &both, &SolanaAssets::from_config(&mainnet()))[0];
    assert_eq!(deposit.source_account_id.as_deref(), Some(&*format!("acc-{from}")), "wallet to wallet");
    assert_eq!(deposit.position, Position::Lamports { wallet: to.into() });
    assert!(deposit.tx_hash.starts_with("2kHbPUGz"));
    assert_eq!((deposit.block_number, deposit.block_time), (399_683_256, 7));
}

#[test]
fn two_transfers_in_one_transaction_are_two_deposits() {
    let name = "sol-mainnet.getTransaction.sol-two-transfers-nonce.2msqMqeU.json";
    let (a, b) =
        ("9AcRtqNTy4wUD9KKuB2mKrP5n6U3i2dMqeJchrsQU4ke", "Ah6ubKzHJMDStLD1i6P51bugRMggARUhDCc8Gxfsg4sU");
    let from = "5tzFkiKscXHK5ZXCGbXZxdw7gTjjD1mBwuoFbhUvuAi9";
    let found = decode(name, &[a, b], &mainnet());
    assert_eq!(found, vec![row(a, "SOL", "0.10567307", from), row(b, "SOL", "30.92350865", from)]);
}

#[test]
fn dust_is_recorded_exactly() {
    let name = "sol-mainnet.getTransaction.dust-20x1-lamport.5LUArY58.json";
    let tx = fixture(name);
    let EncodedTransaction::Json(ui) = &tx.transaction.transaction else { panic!("json encoding") };
    let UiMessage::Raw(raw) = &ui.message else { panic!("raw message") };
    let wallets: Vec<&str> = raw.account_keys[1..21].iter().map(String::as_str).collect();
    let found = decode(name, &wallets, &mainnet());
    assert_eq!(found.len(), 20);
    assert!(found.iter().all(|(_, symbol, amount, _)| symbol == "SOL" && amount == "0.000000001"));
}

#[test]
fn spl_deposits_to_new_and_existing_token_accounts() {
    let config = mainnet();
    let creates = "sol-mainnet.getTransaction.usdc-transfer-creates-ata.LPaVYsnh.json";
    let (to, from) =
        ("9fE6zKgca6K2EEa3yjbcq7zGMusUNqSQeWQNL2YDZ2Yi", "FQT9SSwEZ6UUQxsmTzgt5JzjrS4M5zm13M1QiYF8TEo6");
    let found = decode(creates, &[to], &config);
    assert_eq!(found, vec![row(to, "USDC", "1", from)], "the new token account started at 0");
    assert_eq!(decode(creates, &[from], &config), vec![], "outgoing is no deposit");

    let existing = "sol-mainnet.getTransaction.usdc-transferChecked-existing-ata.4LXpF3MC.json";
    let (to, from) =
        ("B2v68t8MXb9zUms1VQKuCcvjrjKDK6fLd8ZngqmBGy1M", "3V9bd3EN5aNuhE4RiHGbZ1eZakJ1F9cDb8V4YLjCG8cg");
    assert_eq!(decode(existing, &[to], &config), vec![row(to, "USDC", "3.8", from)]);
}

#[test]
fn token_2022_is_matched_with_its_program() {
    let name = "sol-mainnet.getTransaction.token2022-transfer-creates-ata.4G24SgaZ.json";
    let (to, from) =
        ("BYh4CfuGDvFMKaZp3RPmkw9y6qg3sWukA2TiGJDeLKZi", "EMmTjuHsYCYX7vgPcQ2QVbNwYAwcvGoSMCEaHKc19DdE");
    let tx = fixture(name);
    let mint = tx.transaction.meta.as_ref().unwrap().post_token_balances.clone().unwrap()[0].mint.clone();
    let mut config = mainnet();
    assert!(decode(name, &[to], &config).is_empty(), "an unlisted mint is ignored");
    config.assets.push(crate::config::AssetConfig {
        symbol: "HELP".into(),
        contract_address: mint,
        decimals: 9,
        token_program: Some(TOKEN_2022_PROGRAM.into()),
        eip3009: false,
    });
    assert_eq!(decode(name, &[to], &config), vec![row(to, "HELP", "0.01", from)]);
    config.assets.last_mut().unwrap().token_program = Some(TOKEN_PROGRAM.into());
    assert!(decode(name, &[to], &config).is_empty(), "the mint's program must match");
}

#[test]
fn cpi_transfers_credit_each_watched_owner() {
    let name = "sol-mainnet.getTransaction-result.usdc-cpi-transfer-hyperlane.hSCrDMhM.json";
    let (a, b) =
        ("6KFjWcLbGE6cRafEfzRAQJNpncTCYGoty8rPZnqAQ4uu", "CcquFeCYNZM48kLPyG3HWxdwgigmyxPBi6iHwve9Myhj");
    let source = "EPvHL5ZBdqFqx7E3LJEjkApzbhHXaXjgsPs6X2PGqC4v";
    let found = decode(name, &[a, b], &mainnet());
    assert_eq!(found, vec![row(a, "USDC", "0.696238", source), row(b, "USDC", "138.551462", source)]);
}

#[test]
fn failed_self_and_account_creation_transactions_produce_nothing() {
    let config = mainnet();
    for (name, wallets) in [
        (
            "sol-mainnet.getTransaction.jup-self-transfer-same-account.4zvFGpqj.json",
            vec!["DtMUkCoeyzs35B6EpQQxPyyog6TRwXxV1W1Acp8nWBNa"],
        ),
        (
            "sol-mainnet.getTransaction.create-ata-only-no-transfer.4c5dH6XV.json",
            vec!["Jp8xRDtkd8LQwGvPV8z4DdARsCy23Vi9m2dqyqNsszG"],
        ),
        (
            "sol-mainnet.getTransaction.FAILED-v0-alt-swap-with-sol-transfers.43VK3TtY.json",
            vec![
                "4cLUBQKZgCv2AqGXbh8ncGhrDRcicUe3WSDzjgPY2oTA",
                "9QQjgi73MnaeeMvUYZr9LTaZj4dt3ktstUF8s25zfiJ1",
            ],
        ),
    ] {
        let found = decode(name, &wallets, &config);
        assert!(found.is_empty(), "{name}: {found:?}");
    }
    // The failed swap's token owners get nothing either.
    let failed = "sol-mainnet.getTransaction.FAILED-v0-alt-swap.58FymkjJ.json";
    let tx = fixture(failed);
    let owners: Vec<String> = tx
        .transaction
        .meta
        .as_ref()
        .unwrap()
        .post_token_balances
        .clone()
        .unwrap()
        .into_iter()
        .filter_map(|b| Option::<String>::from(b.owner))
        .collect();
    let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
    assert!(decode(failed, &owners, &config).is_empty());
}

#[test]
fn version_0_keys_include_lookup_table_addresses() {
    let name = "sol-mainnet.getTransaction.v0-alt-swap-trump-to-jup-fees.4VhDRLUK.json";
    let tx = fixture(name);
    let EncodedTransaction::Json(ui) = &tx.transaction.transaction else { panic!("json encoding") };
    let meta = tx.transaction.meta.as_ref().unwrap();
    let keys = account_keys(&ui.message, meta);
    assert_eq!(keys.len(), 44, "24 static + 13 writable + 7 read-only loaded");
    assert_eq!(keys.len(), meta.post_balances.len());
    assert_eq!(keys[25], "7fibbSXkUuc4HqPWnyszmtgwUnPzZJUQFBhZJTHUS5cL");
    // A pool's wrapped-SOL vault: its lamports rose by a token transfer of
    // wrapped SOL, neither a system transfer nor a token account paying out
    // its lamports: no SOL deposit.
    assert!(decode(name, &["7fibbSXkUuc4HqPWnyszmtgwUnPzZJUQFBhZJTHUS5cL"], &mainnet()).is_empty());
}

#[test]
fn a_get_block_response_decodes_and_its_failed_votes_yield_nothing() {
    let value = raw_fixture("sol-mainnet-2021.getBlock.79662905.TRIMMED-2-txs.json");
    let block: solana_transaction_status_client_types::UiConfirmedBlock =
        serde_json::from_value(value).unwrap();
    assert_eq!(
        (block.parent_slot, block.blockhash.as_str()),
        (79_662_904, "5wLhsKAH9SCPbRZc4qWf3GBiod9CD8sCEZfMiU25qW8")
    );
    let transactions = block.transactions.clone().unwrap();
    assert_eq!(transactions.len(), 2);
    // Watch every key of both transactions: failed votes move nothing.
    let mut keys = Vec::new();
    for tx in &transactions {
        let EncodedTransaction::Json(ui) = &tx.transaction else { panic!("json encoding") };
        keys.extend(account_keys(&ui.message, tx.meta.as_ref().unwrap()));
    }
    let wallets: Vec<&str> = keys.iter().map(String::as_str).collect();
    let at =
        Slot { chain: Chain::SolanaMainnet, slot: 79_662_905, block_hash: &block.blockhash, block_time: 0 };
    let assets = SolanaAssets::from_config(&mainnet());
    assert!(
        transactions.iter().all(|tx| deposits_in_transaction(at, tx, &watch(&wallets), &assets).is_empty())
    );
}

#[test]
fn a_signatures_page_decodes_with_slots_and_statuses() {
    let value = raw_fixture("sol-mainnet-2021.getSignaturesForAddress.4Rf9mGD7.json");
    let page: Vec<solana_rpc_client_api::response::RpcConfirmedTransactionStatusWithSignature> =
        serde_json::from_value(value).unwrap();
    let slots: Vec<u64> = page.iter().map(|s| s.slot).collect();
    assert_eq!(slots, vec![68_710_495, 66_979_017, 62_482_980], "newest first");
    assert!(page.iter().all(|s| s.err.is_none()));
    assert!(page[0].signature.starts_with("5Jofwx5J"));
}

const V1_BLOCK: &str = "sol-mainnet.getBlock.449391489.v1-EXCERPT-1-tx.json";
const V1_SLOT: u64 = 449_391_489;

fn v1_block() -> solana_transaction_status_client_types::UiConfirmedBlock {
    serde_json::from_value(raw_fixture(V1_BLOCK)).unwrap()
}

#[test]
fn a_recorded_version_1_block_decodes_and_its_failed_transaction_yields_nothing() {
    let block = v1_block();
    assert_eq!((block.parent_slot, block.block_time), (V1_SLOT - 1, Some(1_790_083_456)));
    let transactions = block.transactions.unwrap();
    let [tx] = transactions.as_slice() else { panic!("one transaction") };
    assert_eq!(tx.version, Some(TransactionVersion::Number(1)));
    assert_eq!(readable(V1_SLOT, tx), Ok(()), "version 1 is read");
    let EncodedTransaction::Json(ui) = &tx.transaction else { panic!("json encoding") };
    let UiMessage::Raw(raw) = &ui.message else { panic!("raw message") };
    let config = raw.transaction_config.as_ref().expect("message.transactionConfig");
    assert_eq!((config.priority_fee, config.compute_unit_limit), (Some(3), Some(19)));
    assert!(raw.address_table_lookups.is_none(), "no lookup tables in version 1");
    let meta = tx.meta.as_ref().unwrap();
    assert_eq!(meta.fee, 5_003, "base fee and priority fee in one");
    let keys = account_keys(&ui.message, meta);
    assert_eq!(keys, raw.account_keys, "static keys only");
    assert_eq!(keys.len(), meta.pre_balances.len());
    // It failed: every key watched, still nothing, not even the fee payer's
    // or the instruction's receiver.
    let wallets: Vec<&str> = keys.iter().map(String::as_str).collect();
    let at = Slot { chain: Chain::SolanaMainnet, slot: V1_SLOT, block_hash: &block.blockhash, block_time: 1 };
    let assets = SolanaAssets::from_config(&mainnet());
    assert!(deposits_in_transaction(at, tx, &watch(&wallets), &assets).is_empty());
}

/// The recorded version-1 transaction rewritten: `keys` (the system and
/// token programs appended), compiled `instructions` as
/// `(program index, accounts, data)`, balances and token balances, and
/// whether it failed. The version, header and `transactionConfig` stay.
struct V1 {
    keys: Vec<&'static str>,
    instructions: Vec<(u8, Vec<u8>, Vec<u8>)>,
    balances: (Vec<u64>, Vec<u64>),
    token_balances: (serde_json::Value, serde_json::Value),
    err: Option<serde_json::Value>,
    fee: u64,
}

impl V1 {
    fn build(&self) -> EncodedTransactionWithStatusMeta {
        let mut tx = raw_fixture(V1_BLOCK)["transactions"][0].clone();
        let message = &mut tx["transaction"]["message"];
        message["accountKeys"] = serde_json::json!(self.keys);
        message["instructions"] = self
            .instructions
            .iter()
            .map(|(program, accounts, data)| {
                serde_json::json!({
                    "programIdIndex": program, "accounts": accounts,
                    "data": bs58::encode(data).into_string(), "stackHeight": 1,
                })
            })
            .collect();
        let meta = &mut tx["meta"];
        meta["preBalances"] = serde_json::json!(self.balances.0);
        meta["postBalances"] = serde_json::json!(self.balances.1);
        meta["preTokenBalances"] = self.token_balances.0.clone();
        meta["postTokenBalances"] = self.token_balances.1.clone();
        meta["fee"] = self.fee.into();
        meta["err"] = self.err.clone().unwrap_or_default();
        meta["status"] = match &self.err {
            Some(err) => serde_json::json!({ "Err": err }),
            None => serde_json::json!({ "Ok": null }),
        };
        meta["logMessages"] = serde_json::json!([]);
        serde_json::from_value(tx).unwrap()
    }

    fn deposits(&self, wallets: &[&str], config: &ChainConfig) -> Vec<(String, String, String, String)> {
        let at = Slot { chain: Chain::SolanaMainnet, slot: V1_SLOT, block_hash: "h", block_time: 1 };
        let tx = self.build();
        assert_eq!(readable(V1_SLOT, &tx), Ok(()));
        let mut out: Vec<_> =
            deposits_in_transaction(at, &tx, &watch(wallets), &SolanaAssets::from_config(config))
                .into_iter()
                .map(|d| (d.account_address, d.currency_symbol, d.amount.to_string(), d.source_address))
                .collect();
        out.sort();
        out
    }
}

const PAYER: &str = "updftC18GBD8tzneHb87mf5FyZJUZ9YMcS6PgEiSWmB";
const WALLET: &str = "Cr7GWeCZbsQfbtkYUVCdCfJNQvKUV9rZ9weptryRU3ds";
const TOKEN_ACCOUNT: &str = "W1LDCARDa67SPBG7TFpQivHnEZXRtxCFP13ysEd1bWR";
const WRAPPED_SOL: &str = "So11111111111111111111111111111111111111112";

fn system_transfer_data(lamports: u64) -> Vec<u8> {
    [2u32.to_le_bytes().as_slice(), &lamports.to_le_bytes()].concat()
}

/// A version-1 transaction paying 1,000,000 lamports from the payer to the
/// wallet, in `json` encoding.
fn v1_transfer() -> V1 {
    V1 {
        keys: vec![PAYER, WALLET, TOKEN_ACCOUNT, SYSTEM_PROGRAM],
        instructions: vec![(3, vec![0, 1], system_transfer_data(1_000_000))],
        balances: (vec![588_947_744, 1_781_760, 1_141_440, 1], vec![587_942_741, 2_781_760, 1_141_440, 1]),
        token_balances: (serde_json::json!([]), serde_json::json!([])),
        err: None,
        fee: 5_003,
    }
}

#[test]
fn a_version_1_system_transfer_is_a_deposit_unless_it_did_not_execute() {
    let config = mainnet();
    let transfer = v1_transfer();
    assert_eq!(transfer.deposits(&[WALLET, PAYER], &config), vec![row(WALLET, "SOL", "0.001", PAYER)]);

    let failed =
        V1 { err: Some(serde_json::json!({ "InstructionError": [0, { "Custom": 2 }] })), ..v1_transfer() };
    assert!(failed.deposits(&[WALLET], &config).is_empty(), "failed");
    // SIMD-0290: included without executing, no fee charged, balances as
    // before; even a node reporting the transfer's balances changes nothing.
    let not_executed =
        V1 { err: Some(serde_json::json!("InsufficientFundsForFee")), fee: 0, ..v1_transfer() };
    assert!(not_executed.deposits(&[WALLET], &config).is_empty(), "not executed");
}

/// `tx` in `jsonParsed` encoding with its instructions given parsed.
fn json_parsed(tx: &V1, instructions: serde_json::Value) -> EncodedTransactionWithStatusMeta {
    let mut value = serde_json::to_value(tx.build()).unwrap();
    let keys: Vec<serde_json::Value> = tx
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| serde_json::json!({ "pubkey": k, "writable": i < 3, "signer": i == 0, "source": "transaction" }))
        .collect();
    let message = &mut value["transaction"]["message"];
    message["accountKeys"] = keys.into();
    message["instructions"] = instructions;
    message.as_object_mut().unwrap().remove("header");
    let parsed: EncodedTransactionWithStatusMeta = serde_json::from_value(value).unwrap();
    let EncodedTransaction::Json(ui) = &parsed.transaction else { panic!("json") };
    let UiMessage::Parsed(message) = &ui.message else { panic!("jsonParsed message") };
    assert_eq!(message.transaction_config.as_ref().and_then(|c| c.priority_fee), Some(3));
    parsed
}

fn deposits_of(tx: &EncodedTransactionWithStatusMeta, wallets: &[&str]) -> Vec<(String, String)> {
    let at = Slot { chain: Chain::SolanaMainnet, slot: V1_SLOT, block_hash: "h", block_time: 1 };
    let assets = SolanaAssets::from_config(&mainnet());
    let found = deposits_in_transaction(at, tx, &watch(wallets), &assets);
    found.into_iter().map(|d| (d.amount.to_string(), d.source_address)).collect()
}

#[test]
fn a_version_1_transaction_in_json_parsed_encoding_decodes_the_same() {
    let transfer = serde_json::json!([{
        "program": "system", "programId": SYSTEM_PROGRAM, "stackHeight": 1,
        "parsed": { "type": "transfer", "info": { "source": PAYER, "destination": WALLET, "lamports": 1_000_000 } },
    }]);
    let tx = json_parsed(&v1_transfer(), transfer);
    assert_eq!(deposits_of(&tx, &[WALLET]), vec![("0.001".into(), PAYER.into())]);

    // Token payouts, parsed: from the account's owner, not the wallet's own.
    for (kind, account, authority) in
        [("closeAccount", "account", "owner"), ("unwrapLamports", "source", "authority")]
    {
        for (owner, expected) in
            [(PAYER, vec![("0.05203928".to_string(), PAYER.to_string())]), (WALLET, vec![])]
        {
            let instruction = serde_json::json!([{
                "program": "spl-token", "programId": TOKEN_PROGRAM, "stackHeight": 1,
                "parsed": { "type": kind, "info": { account: TOKEN_ACCOUNT, "destination": WALLET, authority: owner } },
            }]);
            let tx = json_parsed(&payout(owner, vec![]), instruction);
            assert_eq!(deposits_of(&tx, &[WALLET]), expected, "{kind} of {owner}'s account");
        }
    }
}

#[test]
fn a_version_the_decoder_cannot_read_is_named_with_its_slot_and_signature() {
    let block = raw_fixture(V1_BLOCK);
    let signature = block["transactions"][0]["transaction"]["signatures"][0].as_str().unwrap().to_string();
    let with = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut tx = block["transactions"][0].clone();
        change(&mut tx);
        readable(V1_SLOT, &serde_json::from_value(tx).unwrap())
    };
    assert_eq!(with(&|tx| tx["version"] = "legacy".into()), Ok(()));
    assert_eq!(with(&|tx| tx["version"] = 0.into()), Ok(()));
    let newer = with(&|tx| tx["version"] = 2.into()).unwrap_err();
    assert_eq!((newer.slot, newer.signature.as_deref()), (Some(V1_SLOT), Some(signature.as_str())));
    let text = newer.to_string();
    assert!(
        text.contains("slot 449391489") && text.contains(&signature) && text.contains("version 2"),
        "{text}"
    );
    let no_meta = with(&|tx| tx["meta"] = serde_json::Value::Null).unwrap_err();
    assert!(no_meta.reason.contains("meta"), "{no_meta}");
    let binary = with(&|tx| tx["transaction"] = serde_json::json!(["AQID", "base64"])).unwrap_err();
    assert!(binary.reason.contains("json"), "{binary}");
}

/// Token account `TOKEN_ACCOUNT` of `owner` holding `lamports` pays them out
/// to the wallet by the token program instruction `data`, signed by
/// `owner` (the payer or the wallet).
fn payout(owner: &str, data: Vec<u8>) -> V1 {
    let owner_index = if owner == PAYER { 0 } else { 1 };
    let balance = |amount: &str| {
        serde_json::json!([{
            "accountIndex": 2, "mint": WRAPPED_SOL, "owner": owner, "programId": TOKEN_PROGRAM,
            "uiTokenAmount": { "amount": amount, "decimals": 9, "uiAmount": null, "uiAmountString": "0" },
        }])
    };
    V1 {
        keys: vec![PAYER, WALLET, TOKEN_ACCOUNT, TOKEN_PROGRAM],
        instructions: vec![(3, vec![2, 1, owner_index], data)],
        balances: (vec![1_000_000_000, 5_000_000, 52_039_280, 1], vec![999_995_000, 57_039_280, 0, 1]),
        token_balances: (balance("50000000"), balance("0")),
        err: None,
        fee: 5_000,
    }
}

#[test]
fn lamports_paid_out_of_another_partys_token_account_are_a_deposit() {
    let config = mainnet();
    for (what, data) in [("CloseAccount", vec![9]), ("UnwrapLamports", vec![45, 0])] {
        assert_eq!(
            payout(PAYER, data.clone()).deposits(&[WALLET], &config),
            vec![row(WALLET, "SOL", "0.05203928", PAYER)],
            "{what} of the payer's wrapped SOL into the wallet"
        );
        assert!(
            payout(WALLET, data).deposits(&[WALLET], &config).is_empty(),
            "{what} of the wallet's own token account returns its own lamports"
        );
    }
}

#[test]
fn a_token_2022_transfer_fee_is_not_credited() {
    // 1,000 units sent, 1% withheld by the mint's transfer fee: the wallet's
    // token account received 990, and 990 is the deposit.
    let mint = "2b1kV6DkPAnxd5ixfnxCpjxmKwqjjaYmCZfHsFu24GXo";
    let balance = |owner: &str, index: u8, amount: &str| {
        serde_json::json!({
            "accountIndex": index, "mint": mint, "owner": owner, "programId": TOKEN_2022_PROGRAM,
            "uiTokenAmount": { "amount": amount, "decimals": 2, "uiAmount": null, "uiAmountString": "0" },
        })
    };
    let fee_data =
        [vec![26, 1], 1_000u64.to_le_bytes().to_vec(), vec![2], 10u64.to_le_bytes().to_vec()].concat();
    let tx = V1 {
        keys: vec![
            PAYER,
            "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
            TOKEN_ACCOUNT,
            mint,
            WALLET,
            TOKEN_2022_PROGRAM,
        ],
        instructions: vec![(5, vec![1, 3, 2, 0], fee_data)],
        balances: (
            vec![1_000_000_000, 2_074_080, 2_074_080, 1, 1, 1],
            vec![999_995_000, 2_074_080, 2_074_080, 1, 1, 1],
        ),
        token_balances: (
            serde_json::json!([balance(PAYER, 1, "5000"), balance(WALLET, 2, "0")]),
            serde_json::json!([balance(PAYER, 1, "4000"), balance(WALLET, 2, "990")]),
        ),
        err: None,
        fee: 5_000,
    };
    let mut config = mainnet();
    config.assets.push(crate::config::AssetConfig {
        symbol: "FEE".into(),
        contract_address: mint.into(),
        decimals: 2,
        token_program: Some(TOKEN_2022_PROGRAM.into()),
        eip3009: false,
    });
    assert_eq!(tx.deposits(&[WALLET], &config), vec![row(WALLET, "FEE", "9.9", PAYER)]);
}
