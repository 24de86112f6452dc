//! Decoding checked against real mainnet responses from `tests/fixtures/mainnet`.

use solana_transaction_status_client_types::EncodedConfirmedTransactionWithStatusMeta;

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
    assert_eq!((deposit.block_number, deposit.block_time_ms), (399_683_256, 7_000));
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
        issued: false,
        daily_mint_cap: None,
        usd: None,
        precompile: false,
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

#[test]
fn an_unreadable_transaction_names_the_newest_version_this_release_reads() {
    let refused = refused(Some(7), Some("5Jofwx5J"), "Transaction version (2) is not supported");
    let text = refused.to_string();
    assert!(text.starts_with("transaction 5Jofwx5J in slot 7 cannot be read by this release"), "{text}");
    assert!(text.contains(&format!("versions legacy to {READABLE_VERSION})")), "{text}");
    assert!(text.ends_with("(Transaction version (2) is not supported)"), "{text}");
}

mod versions;
