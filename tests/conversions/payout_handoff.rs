//! An off-ramp's payout handed to the bank, on both stores, by the step
//! the conversions worker runs, against a bank that is slow or cannot
//! answer (a fake: a real bank's outage cannot be provoked; the store, the
//! off-ramp and its legs are real). The bank is asked under the off-ramp's
//! id as the idempotency key, outside any transaction; a bank that cannot
//! answer is asked again at the next step; two instances racing hand the
//! payout over once; a claim whose instance died lapses and another
//! instance pays under the same key, even when the identity lost its
//! entitlement meanwhile (the bank may hold the payout: it is followed to
//! the bank's answer, never refunded behind it).

use crate::common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy::primitives::U256;
use common::{
    db::{BACKENDS, TestDb, unlocked},
    issuance::us_bank,
};
use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    amount::Amount,
    audit::Actor,
    bank::{Answer, Bank, BankError, BankEvent, Opening, Payout, PayoutSent, Settlement},
    chain::Chain,
    conversions::{
        answers::{self, AnswerError, Answered},
        off_ramp, payout,
    },
    identity::{State, Type},
    issuance::BankAccount,
    pii::Masked,
    store::{
        Made, NewAccount, NewIdentity, NewOffRamp, NewTransfer, Store, TransferPage, now_micros,
        payouts::CLAIM_MICROS,
    },
    transfers::{Route, TransferStatus, settle::settle_transfer},
};
use serde_json::Value;

const CHAIN: Chain = Chain::EthereumTestnet;
const ADA: &str = "0x00000000000000000000000000000000000000A1";

/// A bank whose first `failures` calls answer that it is unavailable, each
/// call taking `delay`; it pays every payout it takes, or (`holds`) takes
/// it and answers later, as a production bank's operators do.
struct Flaky {
    calls: Mutex<Vec<String>>,
    failures: Mutex<usize>,
    delay: Duration,
    holds: bool,
}

impl Flaky {
    fn new(failures: usize, delay: Duration) -> Arc<Self> {
        Arc::new(Flaky { calls: Mutex::new(Vec::new()), failures: Mutex::new(failures), delay, holds: false })
    }

    fn holding() -> Arc<Self> {
        Arc::new(Flaky {
            calls: Mutex::new(Vec::new()),
            failures: Mutex::new(0),
            delay: Duration::ZERO,
            holds: true,
        })
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Bank for Flaky {
    fn receiving_account(&self) -> Option<Value> {
        None
    }

    fn receive(&self, _cents: i64) -> Settlement {
        Settlement::SETTLED
    }

    fn open_virtual_account(&self, _country: &str) -> Opening {
        None
    }

    async fn pay_out(&self, payout: &Payout) -> Result<PayoutSent, BankError> {
        self.calls.lock().unwrap().push(payout.key.clone());
        tokio::time::sleep(self.delay).await;
        let mut failures = self.failures.lock().unwrap();
        if *failures > 0 {
            *failures -= 1;
            return Err(BankError::Unavailable("503 from the bank".into()));
        }
        let answer = (Answer::Paid, "paid".to_string(), Duration::ZERO);
        let answer = (!self.holds).then_some(answer);
        Ok(PayoutSent { reference: format!("FLAKY-{}", payout.key), answer })
    }

    fn notification(&self, _content_type: &str, _body: &[u8]) -> Result<Vec<BankEvent>, BankError> {
        Err(BankError::Invalid("no notifications".into()))
    }
}

/// `ada`, `ACTIVE` and fiat-enabled, with the account `ada-1` and the US
/// bank account `bank-1`.
async fn ada(store: &Store) {
    let new = NewIdentity {
        organization: "default".into(),
        id: "ada".into(),
        request_id: None,
        kind: Type::Individual,
        label: "Ada".into(),
        state: State::Active { rfi: false },
        actor: "operator:test".into(),
    };
    custody_indexer::identity::register::create_identity(store, &new).await.unwrap();
    assert!(common::set_fiat(store, "default", "ada", true, "kyc done").await.unwrap());
    let account = NewAccount {
        id: "ada-1".into(),
        organization: "default".into(),
        identity_id: "ada".into(),
        request_id: None,
        kind: AccountType::Segregated,
        addresses: vec![AccountAddress { chains: vec![CHAIN], address: ADA.into() }],
        watch_from: Default::default(),
    };
    accounts::add_account(store, account).await.unwrap();
    let bank = BankAccount {
        id: "bank-1".into(),
        identity_id: "ada".into(),
        bank_account_details: Masked::new(us_bank("000123456789")),
    };
    custody_indexer::issuance::requested::create_bank_account(store, "default", "bank-request-1", &bank)
        .await
        .unwrap();
}

/// An off-ramp of 50 USDC to `bank-1` whose collect is `CONFIRMED`: its id.
async fn collected(store: &Store, request_id: &str) -> String {
    let collect = NewTransfer {
        organization: "default".into(),
        request_id: format!("collect-{request_id}"),
        account_id: "ada-1".into(),
        chain: CHAIN,
        source_address: ADA.into(),
        destination_address: "0x00000000000000000000000000000000000000B2".into(),
        currency_symbol: "USDC".into(),
        amount: Amount::from_raw(U256::from(50_000_000u64), 6),
        route: Route::TopUp,
        key_index: Some(2),
    };
    let new = NewOffRamp {
        organization: "default".into(),
        request_id: request_id.into(),
        fingerprint: request_id.into(),
        payment_instructions_id: "bank-1".into(),
        source_cents: 5_000,
        destination_currency: "USD".into(),
        destination_cents: Some(4_900),
        fee_cents: 100,
        quote_id: None,
        collect,
        balance: U256::from(u64::MAX),
    };
    let Made::New(conversion) = off_ramp::accept(store, &new).await.unwrap() else {
        panic!("a new off-ramp")
    };
    let settlement = custody_indexer::store::Settlement {
        status: TransferStatus::Confirmed,
        transaction_hash: Some(format!("0x{:064x}", 7)),
        failure: None,
        fees: vec![],
        native_symbol: "ETH".into(),
        native_decimals: 18,
        usd_micros_per_coin: 2_000_000_000,
    };
    let page = TransferPage {
        organization: "default".into(),
        account_id: None,
        identity_id: None,
        status: None,
        after: None,
        limit: 100,
    };
    let transfers = store.transfer_page(&page).await.unwrap();
    let collect = transfers.iter().find(|t| t.request_id == format!("collect-{request_id}")).unwrap();
    settle_transfer(store, &collect.id, &settlement).await.unwrap();
    conversion.id
}

async fn status(store: &Store, id: &str) -> String {
    store.conversion(None, id).await.unwrap().status.to_string()
}

/// The statuses the off-ramp `id` announced, oldest first.
async fn announced(store: &Store, id: &str) -> Vec<String> {
    let events = store.events_after("default", None, 1_000).await.unwrap();
    events
        .iter()
        .map(|e| &e.envelope)
        .filter(|e| e["type"] == "conversion_notification_update" && e["data"]["id"] == id)
        .map(|e| e["data"]["status"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_payout_is_handed_over_once_under_its_key_whatever_the_bank_and_the_instances_do() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let (store, other) = (&db.store, &unlocked(&Store::connect(&db.url).await.unwrap()).await);
        ada(store).await;
        let id = collected(store, "off-1").await;
        let flaky = Flaky::new(1, Duration::from_millis(300));
        let bank: Arc<dyn Bank> = flaky.clone();

        // The bank cannot answer: nothing handed over, asked again next step.
        assert_eq!(
            payout::follow(store, &bank, &id).await.unwrap(),
            1,
            "{backend:?}: INITIATED to PROCESSING"
        );
        assert_eq!((status(store, &id).await, flaky.calls()), ("PROCESSING".into(), vec![id.clone()]));

        // Asked again soon, not at once.
        assert_eq!(payout::follow(other, &bank, &id).await.unwrap(), 0, "{backend:?}");
        assert_eq!(flaky.calls().len(), 1, "{backend:?}: not asked again at once");
        tokio::time::sleep(Duration::from_millis(2_300)).await;

        // Two instances step at once: one asks the bank, once.
        let (a, b) = tokio::join!(payout::follow(store, &bank, &id), payout::follow(other, &bank, &id));
        assert_eq!(a.unwrap() + b.unwrap(), 3, "{backend:?}: to COMPLETED, each status once");
        assert_eq!(flaky.calls(), [id.clone(), id.clone()], "{backend:?}");
        assert_eq!(status(store, &id).await, "COMPLETED");
        let statuses = ["INITIATED", "PROCESSING", "PAYOUT_INITIATED", "PAYOUT_IN_PROGRESS", "COMPLETED"];
        assert_eq!(announced(store, &id).await, statuses, "{backend:?}");
        assert_eq!(payout::follow(other, &bank, &id).await.unwrap(), 0, "nothing more to do");
        assert_eq!(flaky.calls().len(), 2, "{backend:?}: a completed payout is not asked for again");

        // An instance claimed the next payout and died before recording it:
        // nobody asks the bank until its claim lapses, then another
        // instance pays under the same key.
        let id = collected(store, "off-2").await;
        let walked = off_ramp::follow(store, &id).await.unwrap();
        assert_eq!((walked.moved, walked.payout_due), (1, true), "{backend:?}: PROCESSING, its payout due");
        let calls = flaky.calls().len();
        // Claimed now: it holds for the whole claim, whatever the machine's
        // speed, until the test makes it lapse below.
        assert!(payout::claim_payout(other, &id, now_micros()).await.unwrap().is_some());
        // The bank may hold it now: an identity that loses its entitlement
        // meanwhile does not have it refused (and refunded) behind the bank.
        assert!(common::set_fiat(store, "default", "ada", false, "review").await.unwrap());
        assert_eq!(payout::follow(store, &bank, &id).await.unwrap(), 0, "{backend:?}: claimed elsewhere");
        assert_eq!(flaky.calls().len(), calls, "{backend:?}: the bank was not asked");
        // The claim lapses (as if its instance died a claim ago).
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE conversions SET payout_claimed_at = payout_claimed_at - $1 WHERE id = $2")
            .bind(CLAIM_MICROS + 1)
            .bind(&id)
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(payout::follow(store, &bank, &id).await.unwrap(), 3, "{backend:?}");
        assert_eq!(flaky.calls()[calls..], *std::slice::from_ref(&id), "{backend:?}");
        assert_eq!(status(store, &id).await, "COMPLETED");
    }
}

#[tokio::test]
async fn a_returned_payout_applies_only_when_a_second_operator_confirms_it() {
    let operator = |n: u8, name: &str| Actor::Operator { id: format!("op_{:032x}", n), name: name.into() };
    let (ann, bo) = (operator(1, "Ann"), operator(2, "Bo"));
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let store = &db.store;
        ada(store).await;
        let id = collected(store, "off-3").await;
        let bank: Arc<dyn Bank> = Flaky::holding();
        for _ in 0..3 {
            payout::follow(store, &bank, &id).await.unwrap();
        }
        assert_eq!(status(store, &id).await, "PAYOUT_INITIATED", "{backend:?}: the bank holds it");

        let answered =
            answers::answer(store, &id, (Answer::Returned, "came back"), &ann, false).await.unwrap();
        assert!(matches!(answered, Answered::AwaitingConfirmation(Answer::Returned)), "{backend:?}");
        assert_eq!(status(store, &id).await, "PAYOUT_INITIATED", "{backend:?}: nothing applies yet");
        for (who, what) in [
            (&ann, "the answering operator"),
            (&Actor::BreakGlass { id: "root".into(), name: None }, "break-glass"),
        ] {
            let refused = answers::confirm(store, &id, who, None).await.unwrap_err();
            assert!(matches!(refused, AnswerError::FourEyes { .. }), "{backend:?}: {what}: {refused}");
        }
        assert_eq!(answers::confirm(store, &id, &bo, Some("checked")).await.unwrap(), Answer::Returned);
        assert!(answers::confirm(store, &id, &bo, None).await.is_err(), "{backend:?}: confirmed once");
        let owed: Vec<_> = store
            .pending_payouts()
            .await
            .unwrap()
            .into_iter()
            .filter(|p| p.conversion_id == id)
            .map(|p| p.waiting_for)
            .collect();
        assert_eq!(owed, ["REFUND"], "{backend:?}: the stablecoin is owed back, once");
        let log = store.audit_entries(0, Some("default"), 100).await.unwrap();
        let payouts: Vec<_> = log
            .iter()
            .filter(|e| e.target_id == id)
            .map(|e| (e.action.as_str(), e.actor_name.as_deref()))
            .collect();
        assert_eq!(
            payouts,
            [("payout.answered_awaiting_confirmation", Some("Ann")), ("payout.confirmed", Some("Bo"))],
            "{backend:?}"
        );
    }
}
