//! A platform whose every key is in a PKCS#11 token (SoftHSM2) and nowhere
//! else: the stablecoin deployed by the sponsor, a wire minted by the
//! issuer, two off-ramps' collects out of the client's account (its key
//! made in the token when the account was created, signing EIP-3009
//! authorizations the sponsor sends), one paid out and one
//! returned whose refund the settlement wallet sends back. Each moves the
//! money once, and every transaction on the chain comes from the key the
//! role names.

use crate::common;

use alloy::{
    network::TransactionResponse,
    primitives::{Address, B256, U256},
    providers::Provider,
    rpc::types::Filter,
    sol,
    sol_types::SolEvent,
};
use common::{
    db::Backend,
    off_ramp::{USDC, bank, ended, funded_with_keys, new_id, off_ramp, submit, usdc_of},
    platform::Platform,
    softhsm::Token,
};
use serde_json::Value;

sol! {
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
}

/// Every transaction anvil mined: its sender and hash.
async fn every_transaction(platform: &Platform) -> Vec<(Address, B256)> {
    let provider = &platform.anvil.provider;
    let head = provider.get_block_number().await.unwrap();
    let mut sent = Vec::new();
    for number in 0..=head {
        let block = provider.get_block_by_number(number.into()).full().await.unwrap().unwrap();
        for tx in block.transactions.txns() {
            sent.push((tx.from(), tx.tx_hash()));
        }
    }
    sent
}

async fn sender_of(platform: &Platform, hash: &Value) -> Address {
    let hash: B256 = hash.as_str().expect("a transaction hash").parse().unwrap();
    let tx = platform.anvil.provider.get_transaction_by_hash(hash).await.unwrap().unwrap();
    tx.inner.signer()
}

#[tokio::test]
async fn deploy_mint_collects_and_a_refund_are_signed_in_the_token_once_each() {
    let token = Token::new("platform");
    // Deployed, onboarded and 300 USDC minted, all through the token.
    let (platform, port, _run, settlement) = funded_with_keys(Backend::Sqlite, "60", token.vars()).await;
    let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
    let role = |name: &str| -> Address { wallets[0][name].as_str().unwrap().parse().unwrap() };
    let sponsor = role("sponsor");
    assert!(wallets[0]["backend"].as_str().unwrap().contains("pkcs11"), "{wallets}");

    let paid_to = bank(&platform, port, "us", "000123456789").await;
    let returned_by = bank(&platform, port, "us", "000123459999").await;
    let paid = submit(&platform, port, &off_ramp(&new_id(), &paid_to, "100.00", None)).await;
    let back = submit(&platform, port, &off_ramp(&new_id(), &returned_by, "50.00", None)).await;
    assert_eq!((paid.status, back.status), (201, 201), "{paid:?} {back:?}");
    let paid = ended(&platform, port, paid.body["id"].as_str().unwrap()).await;
    let returned = ended(&platform, port, back.body["id"].as_str().unwrap()).await;
    assert_eq!((paid["status"].as_str(), returned["status"].as_str()), (Some("COMPLETED"), Some("RETURNED")));

    // The money moved once: 300 minted, 100 collected and kept, 50
    // collected and sent back.
    assert_eq!(platform.supply().await, U256::from(300 * USDC), "minted once");
    assert_eq!(platform.balance().await, U256::from(200 * USDC));
    assert_eq!(usdc_of(&platform, settlement).await, U256::from(100 * USDC));

    // Every key was made in the token, sensitive and never extractable.
    let keys = token.private_keys();
    for label in [
        "custody-indexer:sponsor:platform:evm",
        "custody-indexer:issuer:platform:evm",
        "custody-indexer:settlement:platform:evm",
        "custody-indexer:account:",
    ] {
        assert!(keys.contains(label), "{label} in the token: {keys}");
    }
    let labels = keys.matches("label:").count();
    let guarded = keys
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Access:"))
        .filter(|access| access.trim().starts_with("sensitive") && access.contains("never extractable"))
        .count();
    assert_eq!(guarded, labels, "each key sensitive and never extractable: {keys}");

    // The mint is the issuer's, the refund the settlement wallet's, and
    // every transaction was sent by one of the platform's keys (or by the
    // test's funding account, which only sends ether).
    let deposits = platform.get(port, "/v2/crypto/deposits?account_id=ada-1").await;
    let minted = deposits["deposits"].as_array().unwrap().iter().find(|d| d["amount"] == "300");
    let minted = minted.unwrap_or_else(|| panic!("the minted deposit: {deposits}"));
    assert_eq!(sender_of(&platform, &minted["transaction_hash"]).await, platform.issuer, "{minted}");
    let refund = &returned["refund_details"]["transaction_hash"];
    assert_eq!(sender_of(&platform, refund).await, settlement, "{returned}");
    let funder = platform.anvil.accounts[0];
    let ours = [funder, sponsor, platform.issuer, settlement, platform.account];
    let sent = every_transaction(&platform).await;
    for (from, hash) in &sent {
        assert!(ours.contains(from), "{hash} sent by {from}, not a key of the platform");
    }
    let count = |who: Address| sent.iter().filter(|(from, _)| *from == who).count();
    assert_eq!(count(platform.issuer), 1, "the issuer sent the one mint");
    assert_eq!(count(settlement), 1, "the settlement wallet sent the one refund");
    // The two collects moved the account's USDC by EIP-3009 authorizations
    // the stablecoin checked against the account's address, the sponsor
    // sending them: the account's key, in the token alone, signed both.
    let used = Filter::new()
        .address(platform.usdc)
        .event_signature(AuthorizationUsed::SIGNATURE_HASH)
        .topic1(platform.account.into_word())
        .from_block(0);
    let used = platform.anvil.provider.get_logs(&used).await.unwrap();
    assert_eq!(used.len(), 2, "the account authorized its two collects: {used:?}");
    for log in &used {
        let hash = log.transaction_hash.unwrap();
        assert!(sent.contains(&(sponsor, hash)), "{hash} sent by the sponsor");
    }
    assert_eq!(count(platform.account), 0, "the account itself sends nothing");
}
