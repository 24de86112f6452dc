//! A transfer's transactions on both backends: at most one live lineage per
//! transfer, whatever races to record one, and the expiry of transfers no
//! sender took serialised against recording.

use crate::common;

use alloy::primitives::U256;
use common::{Backend, TestDb, db::BACKENDS};
use custody_indexer::identity::change as lifecycle;
use custody_indexer::identity::change::Change;
use custody_indexer::keys::accounts;
use custody_indexer::lease;
use custody_indexer::transfers::hold;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    chain::Chain,
    identity::Event,
    store::{
        Created, Fence, Lineage, NewAccount, NewTransfer, SentTransaction, Settlement, Store, StoreError,
        TxRole, TxState, WorkerKind,
    },
    transfers::{
        FailureDetails, Route, TransferStatus, expiry::expire_before, record, retries,
        settle::settle_transfer, transactions,
    },
};
use sqlx::{Connection, Executor, PgConnection, Row};

const EVM: Chain = Chain::EthereumTestnet;
pub(crate) const SOLANA: Chain = Chain::SolanaDevnet;
const ALICE: &str = "0x1111111111111111111111111111111111111111";
const BOB: &str = "0x2222222222222222222222222222222222222222";
const SPONSOR: &str = "0x3333333333333333333333333333333333333333";
const ALICE_SOL: &str = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";
pub(crate) const BOB_SOL: &str = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T";

/// A store with alice's account on both chains.
pub(crate) async fn store(backend: Backend) -> TestDb {
    let db = TestDb::new(backend).await;
    let address = |chain, address: &str| AccountAddress { chains: vec![chain], address: address.into() };
    common::identity(&db.store, "default", "identity-alice").await;
    accounts::add_account(
        &db.store,
        NewAccount {
            watch_from: Default::default(),
            id: "alice".into(),
            organization: "default".into(),
            identity_id: "identity-alice".into(),
            kind: AccountType::Segregated,
            request_id: None,
            addresses: vec![address(EVM, ALICE), address(SOLANA, ALICE_SOL)],
        },
    )
    .await
    .unwrap();
    db
}

/// An `ACCEPTED` transfer of alice's on `chain`; its id.
pub(crate) async fn accepted(store: &Store, chain: Chain) -> String {
    let (source, destination) = if chain == EVM { (ALICE, BOB) } else { (ALICE_SOL, BOB_SOL) };
    let new = NewTransfer {
        organization: "default".into(),
        request_id: uuid::Uuid::new_v4().to_string(),
        account_id: "alice".into(),
        chain,
        source_address: source.into(),
        destination_address: destination.into(),
        currency_symbol: "ETH".into(),
        amount: Amount::from_raw(U256::from(1), 18),
        route: if chain == EVM { Route::TopUp } else { Route::FeePayer },
        key_index: Some(2),
    };
    match hold::create(store, &new, U256::from(u64::MAX)).await.unwrap() {
        Created::New(transfer) => transfer.id,
        other => panic!("{other:?}"),
    }
}

/// A signed transaction as a sender records it; `tag` makes its hash.
pub(crate) fn signed(tag: u64, role: TxRole, sender: &str, nonce: u64) -> SentTransaction {
    let created_at = custody_indexer::store::now_micros() + tag as i64;
    common::sent(
        format!("0x{tag:064x}"),
        role,
        sender,
        nonce,
        U256::ZERO,
        2_000_000_000 + u128::from(tag),
        created_at,
    )
}

pub(crate) async fn record(
    store: &Store,
    id: &str,
    chain: Chain,
    sent: &SentTransaction,
    lineage: Lineage<'_>,
) -> Result<(), StoreError> {
    let fenced = store.fenced(sender_lease(store, chain).await);
    record::record(&fenced, (id, chain), sent, lineage, None, None).await
}

/// The chain's sender lease, held by these tests for an hour.
pub(crate) async fn sender_lease(store: &Store, chain: Chain) -> Fence {
    let owner = "lineage-tests";
    if let Some(fence) =
        lease::take_lease(store, WorkerKind::Sender, chain, owner, 3_600_000_000, false).await.unwrap()
    {
        return fence;
    }
    let held = store.worker_leases().await.unwrap();
    let lease = held.iter().find(|l| l.kind == WorkerKind::Sender && l.chain == chain).unwrap();
    assert_eq!(lease.owner, owner);
    Fence { kind: WorkerKind::Sender, chain, owner: owner.into(), epoch: lease.epoch }
}

fn conflict(result: Result<(), StoreError>, what: &str) {
    assert!(matches!(result, Err(StoreError::Raced(_))), "{what}: {result:?}");
}

/// What a handle whose lease was taken over is answered.
fn lease_lost(result: Result<(), StoreError>, what: &str) {
    assert!(matches!(result, Err(StoreError::LeaseLost(_))), "{what}: {result:?}");
}

#[tokio::test]
async fn two_senders_racing_to_sign_one_accepted_transfer_record_one_transaction() {
    for backend in BACKENDS {
        let db = store(backend).await;
        let store = &db.store;
        for round in 0..8u64 {
            // Two instances sign the same ACCEPTED transfer: on EVM from two
            // senders (so no nonce counter can tell them apart), on Solana
            // with two blockhashes.
            for chain in [EVM, SOLANA] {
                let id = accepted(store, chain).await;
                // Fresh senders each round: their nonce counters start empty.
                let (one, other) = (format!("0x{:040x}", 2 * round + 1), format!("0x{:040x}", 2 * round + 2));
                let (first, second) = if chain == EVM {
                    (
                        signed(round * 10 + 1, TxRole::Transfer, &one, 0),
                        signed(round * 10 + 2, TxRole::Transfer, &other, 0),
                    )
                } else {
                    (
                        signed(round * 10 + 3, TxRole::Transfer, BOB_SOL, 100),
                        signed(round * 10 + 4, TxRole::Transfer, BOB_SOL, 101),
                    )
                };
                let (a, b) = tokio::join!(
                    record(store, &id, chain, &first, Lineage::Start),
                    record(store, &id, chain, &second, Lineage::Start)
                );
                let won = [&a, &b].iter().filter(|r| r.is_ok()).count();
                assert_eq!(won, 1, "{backend:?} {chain}: exactly one wins: {a:?} {b:?}");
                let loser = if a.is_ok() { b } else { a };
                conflict(loser, "the second lineage");
                let recorded = store.transfer_transactions(&id).await.unwrap();
                assert_eq!(recorded.len(), 1, "{backend:?} {chain}: {recorded:?}");
                let transfer = store.transfer(&id).await.unwrap();
                assert_eq!(transfer.transaction_hash.as_deref(), Some(recorded[0].hash.as_str()));
            }
        }
    }
}

#[tokio::test]
async fn a_lineage_goes_on_only_from_its_newest_transaction_at_its_nonce() {
    for backend in BACKENDS {
        let db = store(backend).await;
        let store = &db.store;
        let id = accepted(store, EVM).await;
        let original = signed(1, TxRole::Transfer, ALICE, 0);
        record(store, &id, EVM, &original, Lineage::Start).await.unwrap();
        // A second lineage at the next nonce: the double send of two senders.
        conflict(
            record(store, &id, EVM, &signed(2, TxRole::Transfer, ALICE, 1), Lineage::Start).await,
            "a new nonce while one lives",
        );
        assert_eq!(store.stored_nonce(EVM, ALICE).await.unwrap(), Some(1), "the refused one took no nonce");

        // Two fee bumps of the original at once: one is recorded.
        let (bump_a, bump_b) = (signed(3, TxRole::Transfer, ALICE, 0), signed(4, TxRole::Transfer, ALICE, 0));
        let (a, b) = tokio::join!(
            record(store, &id, EVM, &bump_a, Lineage::After(&original.hash)),
            record(store, &id, EVM, &bump_b, Lineage::After(&original.hash))
        );
        assert_eq!([&a, &b].iter().filter(|r| r.is_ok()).count(), 1, "{backend:?}: {a:?} {b:?}");
        let bump = if a.is_ok() { &bump_a } else { &bump_b };
        // The cancellation follows the newest, at its nonce only.
        conflict(
            record(store, &id, EVM, &signed(5, TxRole::Cancel, ALICE, 0), Lineage::After(&original.hash))
                .await,
            "after a superseded transaction",
        );
        conflict(
            record(store, &id, EVM, &signed(6, TxRole::Cancel, ALICE, 7), Lineage::After(&bump.hash)).await,
            "at another nonce",
        );
        let cancel = signed(7, TxRole::Cancel, ALICE, 0);
        record(store, &id, EVM, &cancel, Lineage::After(&bump.hash)).await.unwrap();

        // Once every transaction was refused, a new lineage may start.
        for sent in [&original, bump, &cancel] {
            transactions::reject_transaction(store, EVM, sent).await.unwrap();
        }
        record(store, &id, EVM, &signed(8, TxRole::Transfer, ALICE, 0), Lineage::Start).await.unwrap();

        // A terminal transfer takes nothing more.
        settle_transfer(store, &id, &failed("REVERTED")).await.unwrap();
        conflict(
            record(
                store,
                &id,
                EVM,
                &signed(9, TxRole::Transfer, ALICE, 0),
                Lineage::After(&signed(8, TxRole::Transfer, ALICE, 0).hash),
            )
            .await,
            "a terminal transfer",
        );
        let roles: Vec<(TxRole, TxState)> =
            store.transfer_transactions(&id).await.unwrap().iter().map(|t| (t.role, t.state)).collect();
        assert_eq!(
            roles,
            [
                (TxRole::Transfer, TxState::Rejected),
                (TxRole::Transfer, TxState::Rejected),
                (TxRole::Cancel, TxState::Rejected),
                (TxRole::Transfer, TxState::Sent)
            ],
            "{backend:?}"
        );
    }
}

#[tokio::test]
async fn a_top_up_and_the_transfer_transaction_never_overlap() {
    for backend in BACKENDS {
        let db = store(backend).await;
        let store = &db.store;
        let id = accepted(store, EVM).await;
        let top_up = signed(1, TxRole::TopUp, SPONSOR, 0);
        record(store, &id, EVM, &top_up, Lineage::Start).await.unwrap();
        conflict(
            record(store, &id, EVM, &signed(2, TxRole::TopUp, SPONSOR, 1), Lineage::Start).await,
            "a second top-up while one is pending",
        );
        conflict(
            record(store, &id, EVM, &signed(3, TxRole::Transfer, ALICE, 0), Lineage::Start).await,
            "the transfer while its top-up is pending",
        );
        // The pending top-up's fee bump is its own lineage.
        let bumped = signed(4, TxRole::TopUp, SPONSOR, 0);
        record(store, &id, EVM, &bumped, Lineage::After(&top_up.hash)).await.unwrap();
        let fee = Some(U256::from(21));
        transactions::update_transaction(store, &bumped.hash, TxState::Mined, Some((5, "0xb5")), fee)
            .await
            .unwrap();
        record(store, &id, EVM, &signed(5, TxRole::Transfer, ALICE, 0), Lineage::Start).await.unwrap();
        conflict(
            record(store, &id, EVM, &signed(6, TxRole::TopUp, SPONSOR, 1), Lineage::Start).await,
            "a top-up once the transfer transaction lives",
        );
    }
}

/// A failure with no fees.
fn failed(code: &str) -> Settlement {
    Settlement {
        status: TransferStatus::Failed,
        transaction_hash: None,
        failure: Some(FailureDetails { code: code.into(), message: "test".into() }),
        fees: Vec::new(),
        native_symbol: "ETH".into(),
        native_decimals: 18,
        usd_micros_per_coin: 0,
    }
}

#[tokio::test]
async fn expiring_an_unsent_transfer_and_recording_its_transaction_exclude_each_other() {
    for backend in BACKENDS {
        let db = store(backend).await;
        let store = &db.store;
        let late = custody_indexer::store::now_micros() + 3_600_000_000;
        let mut outcomes = [0usize; 2];
        for round in 0..6u64 {
            let id = accepted(store, EVM).await;
            let events_before = store.event_count().await.unwrap();
            // Each round from its own sender, at its first nonce.
            let sender = format!("0x{:040x}", round + 0xa0);
            let sent = signed(round + 1, TxRole::Transfer, &sender, 0);
            // Two instances expire while a sender records.
            let settlement = failed("NOT_SUBMITTED");
            let (first, second, recorded) = tokio::join!(
                expire_before(store, EVM, late, &settlement),
                expire_before(store, EVM, late, &settlement),
                record(store, &id, EVM, &sent, Lineage::Start)
            );
            let expired = first.unwrap().len() + second.unwrap().len();
            let transfer = store.transfer(&id).await.unwrap();
            let events = store.event_count().await.unwrap() - events_before;
            if recorded.is_ok() {
                assert_eq!(
                    (expired, transfer.status, events),
                    (0, TransferStatus::Accepted, 0),
                    "{backend:?}"
                );
                settle_transfer(store, &id, &failed("REVERTED")).await.unwrap();
                outcomes[0] += 1;
            } else {
                conflict(recorded, "recording after the expiry");
                assert_eq!((expired, transfer.status, events), (1, TransferStatus::Failed, 1), "{backend:?}");
                assert_eq!(transfer.failure_details.unwrap().code, "NOT_SUBMITTED");
                assert!(store.transfer_transactions(&id).await.unwrap().is_empty());
                outcomes[1] += 1;
            }
        }
        // Only transfers created before the cut-off expire.
        let young = accepted(store, EVM).await;
        let cutoff = custody_indexer::store::now_micros() - 3_600_000_000;
        assert_eq!(
            expire_before(store, EVM, cutoff, &failed("NOT_SUBMITTED")).await.unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(store.transfer(&young).await.unwrap().status, TransferStatus::Accepted);
        assert_eq!(outcomes.iter().sum::<usize>(), 6, "{outcomes:?}");
    }
}

#[tokio::test]
async fn a_sender_whose_lease_was_taken_over_records_nothing() {
    for backend in BACKENDS {
        let db = store(backend).await;
        let store = &db.store;
        let id = accepted(store, EVM).await;
        let minute = 60_000_000;
        let stale =
            lease::take_lease(store, WorkerKind::Sender, EVM, "first", minute, false).await.unwrap().unwrap();
        // The first instance is presumed dead; another takes the chain over.
        let current =
            lease::take_lease(store, WorkerKind::Sender, EVM, "second", minute, true).await.unwrap().unwrap();
        assert_eq!(current.epoch, stale.epoch + 1);
        let sent = signed(1, TxRole::Transfer, SPONSOR, 0);
        let refused =
            record::record(&store.fenced(stale.clone()), (&id, EVM), &sent, Lineage::Start, None, None).await;
        lease_lost(refused, &format!("{backend:?}: a stale epoch"));
        assert!(store.transfer_transactions(&id).await.unwrap().is_empty(), "{backend:?}");
        assert_eq!(store.stored_nonce(EVM, SPONSOR).await.unwrap(), None, "{backend:?}: no nonce taken");
        assert_eq!(store.transfer(&id).await.unwrap().transaction_hash, None);
        let current = store.fenced(current);
        record::record(&current, (&id, EVM), &sent, Lineage::Start, None, None).await.unwrap();
        assert_eq!(store.stored_nonce(EVM, SPONSOR).await.unwrap(), Some(1));

        // Nor does the stale sender write anything else of the transfer: it
        // neither submits, defers, follows nor ends what the new holder sends.
        let stale = store.fenced(stale);
        lease_lost(transactions::mark_submitted(&stale, &id).await, &format!("{backend:?}: stale submit"));
        lease_lost(
            retries::defer_transfer(&stale, &id, 5, i64::MAX, "x").await,
            &format!("{backend:?}: stale deferral"),
        );
        lease_lost(
            transactions::update_transaction(&stale, &sent.hash, TxState::Rejected, None, None).await,
            &format!("{backend:?}: stale follow-up"),
        );
        lease_lost(
            transactions::reject_transaction(&stale, EVM, &sent).await,
            &format!("{backend:?}: stale refusal"),
        );
        lease_lost(
            settle_transfer(&stale, &id, &failed("LOST")).await,
            &format!("{backend:?}: stale settlement"),
        );
        let transfer = store.transfer(&id).await.unwrap();
        assert_eq!(transfer.status, TransferStatus::Accepted, "{backend:?}");
        assert_eq!(store.transfer_transactions(&id).await.unwrap()[0].state, TxState::Sent, "{backend:?}");
        transactions::mark_submitted(&current, &id).await.unwrap();
        assert_eq!(store.transfer(&id).await.unwrap().status, TransferStatus::Submitted, "{backend:?}");
    }
}

/// A suspension that reaches a transfer while a sender is recording its
/// transaction (PostgreSQL: the sender holds the transfer's row, its insert
/// slowed by a trigger) waits for the row and then sees the transaction: the
/// transfer is left to the sender, never failed with a transaction that a
/// node may already hold.
#[tokio::test]
async fn a_suspension_racing_a_recording_fails_no_transfer_that_was_recorded() {
    let db = store(Backend::Postgres).await;
    let store = db.store.clone();
    let mut admin = PgConnection::connect(&db.url).await.unwrap();
    admin
        .execute(
            "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN PERFORM pg_sleep(1.5); RETURN NEW; END $$;
             CREATE TRIGGER slow_insert BEFORE INSERT ON transfer_transactions
               FOR EACH ROW EXECUTE FUNCTION slow_insert();",
        )
        .await
        .unwrap();
    let id = accepted(&store, EVM).await;
    let fence = sender_lease(&store, EVM).await;
    let recording = {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move {
            let sent = signed(1, TxRole::Transfer, SPONSOR, 0);
            record::record(&store.fenced(fence), (&id, EVM), &sent, Lineage::Start, None, None).await
        })
    };
    // The sender holds the row and sleeps inside its insert.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let sleeping: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event = 'PgSleep'",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap()
        .get("n");
        if sleeping == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the sender's insert never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let suspension = Change {
        organization: "default",
        identity_id: "identity-alice",
        event: Event::Suspended,
        actor: "operator:test",
        reason: Some("fraud review"),
        decider: None,
    };
    lifecycle::change(&store, &suspension, &|_| failed("ACCOUNT_NOT_ACTIVE")).await.unwrap();
    recording.await.unwrap().unwrap();

    let transfer = store.transfer(&id).await.unwrap();
    let transactions = store.transfer_transactions(&id).await.unwrap();
    assert_eq!(transactions.len(), 1, "the sender recorded its transaction");
    assert_eq!(
        transfer.status,
        TransferStatus::Accepted,
        "a transfer with a recorded transaction is the sender's to finish: {:?}",
        transfer.failure_details
    );
}
