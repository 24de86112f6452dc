//! The gas ledger across the upgrade that gave it the platform's own
//! entries, on both backends: every fee billed before it stays billed as it
//! was, and a nonce filler included before it gets its entry afterwards,
//! billed to no organization, once.

use crate::common;

use alloy::primitives::U256;
use common::{TestDb, db::BACKENDS};
use custody_indexer::keys::accounts;
use custody_indexer::transfers::hold;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    chain::Chain,
    store::{ChainGas, Created, Fee, NewAccount, NewTransfer, PlatformCost, Settlement, Store},
    transfers::{
        Route, TransferStatus,
        fillers::{filler_included, record_filler},
        settle::settle_transfer,
    },
};
use sqlx::AnyPool;

const CHAIN: Chain = Chain::EthereumTestnet;
const ALICE: &str = "0x1111111111111111111111111111111111111111";
const FILLER: &str = "0x00000000000000000000000000000000000000000000000000000000000000f1";
/// 2,000 USD per ETH, in micro-dollars.
const PRICE: u128 = 2_000_000_000;
const MILLI_ETH: u64 = 1_000_000_000_000_000;

/// The transfer of `identity-alice`'s account, settled with one fee of `milli`
/// thousandths of an ETH.
async fn settled_transfer_of_alice(store: &Store, milli: u64) -> String {
    let address = AccountAddress { chains: vec![CHAIN], address: ALICE.into() };
    let account = NewAccount {
        watch_from: Default::default(),
        id: "alice".into(),
        organization: "default".into(),
        identity_id: "identity-alice".into(),
        kind: AccountType::Segregated,
        request_id: None,
        addresses: vec![address],
    };
    accounts::add_account(store, account).await.unwrap();
    let new = NewTransfer {
        organization: "default".into(),
        request_id: "request-1".into(),
        account_id: "alice".into(),
        chain: CHAIN,
        source_address: ALICE.into(),
        destination_address: "0x2222222222222222222222222222222222222222".into(),
        currency_symbol: "ETH".into(),
        amount: Amount::from_raw(U256::from(1), 18),
        route: Route::TopUp,
        key_index: Some(2),
    };
    let Created::New(transfer) = hold::create(store, &new, U256::from(u64::MAX)).await.unwrap() else {
        panic!("a new transfer")
    };
    let settlement = Settlement {
        status: TransferStatus::Confirmed,
        transaction_hash: Some(format!("0x{:064x}", 1)),
        failure: None,
        fees: vec![fee(&format!("0x{:064x}", 1), milli)],
        native_symbol: "ETH".into(),
        native_decimals: 18,
        usd_micros_per_coin: PRICE,
    };
    settle_transfer(store, &transfer.id, &settlement).await.unwrap();
    transfer.id
}

fn fee(hash: &str, milli: u64) -> Fee {
    Fee { transaction_hash: hash.into(), kind: "NETWORK_FEE", amount: U256::from(milli * MILLI_ETH) }
}

/// One chain's sum as `gas usage` and `gas platform` show it.
fn eth(milli: u64, usd: &str, transactions: u64) -> ChainGas {
    ChainGas {
        chain: CHAIN,
        amount: Amount::from_raw(U256::from(milli * MILLI_ETH), 18).to_string(),
        currency_symbol: "ETH".into(),
        usd: usd.into(),
        transactions,
    }
}

#[tokio::test]
async fn billed_fees_survive_the_upgrade_and_an_earlier_fillers_fee_is_the_platforms_once() {
    for backend in BACKENDS {
        // The store before the platform's own entries.
        let db = TestDb::migrated_before(backend, 13).await;
        let store = &db.store;
        // The identity as that release wrote it, its label in plain text.
        sqlx::query(
            "INSERT INTO identities (organization_id, id, type, label, status, fiat_operations_enabled, created_at, updated_at)
             VALUES ('default', 'identity-alice', 'INDIVIDUAL', 'Alice', 'ACTIVE', 0, 0, 0)",
        )
        .execute(&AnyPool::connect(&db.url).await.unwrap())
        .await
        .unwrap();
        let id = settled_transfer_of_alice(store, 3).await;
        // A filler included before the upgrade: its fee only in its own row.
        record_filler(store, CHAIN, ALICE, 1, FILLER, "0x02", 0).await.unwrap();
        let pool = AnyPool::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE nonce_fillers SET state = 'MINED', fee_raw = $1 WHERE hash = $2")
            .bind((2 * MILLI_ETH).to_string())
            .bind(FILLER)
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;

        store.migrate().await.unwrap();
        let billed = store.gas_entries(&id).await.unwrap();
        let expected = (format!("0x{:064x}", 1), "NETWORK_FEE".to_string(), U256::from(3 * MILLI_ETH));
        assert_eq!(billed, [expected], "{backend:?}");
        assert_eq!(store.gas_usage("default", 0).await.unwrap().by_chain, [eth(3, "6", 1)]);
        assert_eq!(store.platform_gas().await.unwrap(), []);

        // The sender's next step reads the filler's receipt again and records
        // its fee as the platform's own; a second time changes nothing.
        let pending = store.pending_fillers(CHAIN).await.unwrap();
        assert_eq!(pending, [(FILLER.to_string(), ALICE.to_string(), 1, "0x02".to_string())], "{backend:?}");
        let cost = PlatformCost {
            fees: vec![fee(FILLER, 2)],
            native_symbol: "ETH".into(),
            native_decimals: 18,
            usd_micros_per_coin: PRICE,
        };
        for _ in 0..2 {
            filler_included(store, FILLER, 7, &cost).await.unwrap();
        }
        assert_eq!(store.platform_gas().await.unwrap(), [eth(2, "4", 1)], "{backend:?}");
        assert_eq!(store.pending_fillers(CHAIN).await.unwrap(), []);
        assert_eq!(store.gas_usage("default", 0).await.unwrap().by_chain, [eth(3, "6", 1)]);
    }
}
