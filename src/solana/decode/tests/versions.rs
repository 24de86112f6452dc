//! Version-1 transactions (recorded, and rewritten from the recording),
//! transactions that did not execute, token accounts paying out lamports,
//! Token-2022 transfer fees, and versions the decoder cannot read.

use solana_transaction::versioned::TransactionVersion;

use super::*;

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
        issued: false,
        daily_mint_cap: None,
        usd: None,
        precompile: false,
    });
    assert_eq!(tx.deposits(&[WALLET], &config), vec![row(WALLET, "FEE", "9.9", PAYER)]);
}
