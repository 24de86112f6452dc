//! Provider quorum on anvil: a provider that forges a token `Transfer` log
//! to a watched address (in the logs, the receipts and the block's bloom
//! alike) gets it confirmed when it is the chain's only URL, and never
//! beside an honest one with `confirm_quorum = 2`: with two URLs (k = n) the
//! forged deposit waits `PENDING` with its dispute open (no single URL's
//! word fails a deposit), with a third URL to spare it is `FAILED`; every
//! real deposit is `CONFIRMED`, and while the honest URL does not answer
//! nothing new is confirmed.

use crate::common;

use std::sync::atomic::Ordering::SeqCst;

use alloy::primitives::{Address, U256};
use common::{Anvil, Backend, TestDb, add_account, anvil::Mined, catch_up, chain_config, forging, proxy};
use custody_indexer::{
    deposits::{
        quorum::Outcome,
        resource::{Deposit, DepositStatus},
    },
    evm::EvmWatcher,
    store::Store,
};

/// Each deposit's amount and status, sorted.
async fn states(store: &Store) -> Vec<(String, DepositStatus)> {
    let deposits: Vec<Deposit> = store.deposits_on_chain(common::CHAIN).await.unwrap();
    let mut states: Vec<_> = deposits.iter().map(|d| (d.amount.clone(), d.status)).collect();
    states.sort_by(|a, b| a.0.cmp(&b.0));
    states
}

async fn watcher(urls: &[String], store: &Store, token: Address, quorum: usize) -> EvmWatcher {
    let token = token.to_checksum(None);
    let config = chain_config(urls, Some(&token), &format!("confirm_quorum = {quorum}"));
    EvmWatcher::connect(config, store.clone()).await.expect("watcher connects")
}

#[tokio::test]
async fn a_forged_deposit_is_never_confirmed_when_two_providers_must_agree() {
    use DepositStatus::{Confirmed, Failed, Pending};
    let anvil = Anvil::start().await;
    let [outsider, alice, stranger, forger_sender] =
        [anvil.accounts[0], anvil.accounts[1], anvil.accounts[5], anvil.accounts[6]];
    let token_address = anvil.deploy_token("TUSD").await;
    let token = anvil.token(token_address);
    token.mint(outsider, U256::from(100_000_000u64)).from(outsider).mined().await;
    token.transfer(alice, U256::from(5_000_000u64)).from(outsider).mined().await;
    // A real transaction that moves no token: the liar hangs its forged log on it.
    let carrier = anvil.send_eth(outsider, stranger, U256::from(1u64)).await;
    let liar = forging::start(anvil.url()).await;
    liar.forge(carrier, token_address, forger_sender, alice, U256::from(7_000_000u64)).await;
    anvil.mine(5).await;

    // The attack: with the liar as the only URL, the forged deposit is confirmed.
    let alone = TestDb::new(Backend::Sqlite).await;
    add_account(&alone.store, "alice", &alice.to_string()).await;
    let mut one = watcher(std::slice::from_ref(&liar.url), &alone.store, token_address, 1).await;
    catch_up(&mut one).await;
    let fooled = vec![("5".to_string(), Confirmed), ("7".to_string(), Confirmed)];
    assert_eq!(states(&alone.store).await, fooled, "one provider's word confirms the forgery");

    // Two URLs, two must agree. The honest one is slower, so the liar
    // serves the scans: the forged deposit is found, then judged. With no
    // URL to spare, the honest URL's word does not fail it: it waits.
    // Each backend's round sends one more real deposit, which the next finds settled.
    let mut earlier: Vec<(String, DepositStatus)> = Vec::new();
    for (backend, late) in [(Backend::Sqlite, 3u64), (Backend::Postgres, 2)] {
        let with_earlier = |mut these: Vec<(String, DepositStatus)>| {
            these.extend(earlier.iter().cloned());
            these.sort_by(|a, b| a.0.cmp(&b.0));
            these
        };
        let db = TestDb::new(backend).await;
        let store = &db.store;
        add_account(store, "alice", &alice.to_string()).await;
        let honest = proxy::start(anvil.url()).await;
        honest.faults.slow_min_ms.store(100, SeqCst);
        honest.faults.slow_max_ms.store(150, SeqCst);
        let urls = [liar.url.clone(), honest.url.clone()];
        let mut both = watcher(&urls, store, token_address, 2).await;
        catch_up(&mut both).await;
        both.tick().await.unwrap();
        let judged = with_earlier(vec![("5".to_string(), Confirmed), ("7".to_string(), Pending)]);
        assert_eq!(states(store).await, judged, "{backend:?}: the forgery waits, the real deposit confirms");

        let disputes = store.disputes(None, false, 10).await.unwrap();
        assert_eq!(disputes.len(), 1, "{disputes:?}");
        let dispute = &disputes[0];
        assert_eq!(dispute.outcome, Outcome::Open);
        assert_eq!(dispute.transaction_hash, format!("{carrier:#x}"));
        assert_eq!(dispute.address.to_lowercase(), alice.to_string().to_lowercase());
        let answered: Vec<(&str, &str)> =
            dispute.answers.iter().map(|a| (a.url.as_str(), a.answered.as_str())).collect();
        assert_eq!(
            answered,
            vec![
                (liar.url.as_str(), "the block with the deposit"),
                (honest.url.as_str(), "the block without the deposit")
            ],
            "which URL answered what"
        );

        // The honest URL stops answering: a new deposit waits, unconfirmed.
        honest.faults.status.store(503, SeqCst);
        honest.faults.fail_next.store(u32::MAX, SeqCst);
        token.transfer(alice, U256::from(late * 1_000_000)).from(outsider).mined().await;
        anvil.mine(5).await;
        catch_up(&mut both).await;
        both.tick().await.unwrap();
        let waiting = with_earlier(vec![
            (late.to_string(), Pending),
            ("5".to_string(), Confirmed),
            ("7".to_string(), Pending),
        ]);
        assert_eq!(states(store).await, waiting, "{backend:?}: never confirmed on one provider's word");
        assert_eq!(store.disputes(None, true, 10).await.unwrap().len(), 1, "silence is no new dispute");
        let waits = |conditions: Vec<custody_indexer::store::Condition>| {
            conditions
                .into_iter()
                .filter(|c| c.kind == "quorum_waiting")
                .map(|c| c.message)
                .collect::<Vec<_>>()
        };
        let said = waits(store.conditions().await.unwrap());
        assert_eq!(said.len(), 1, "health says which URL is missing: {said:?}");
        assert!(said[0].contains(&honest.url) && !said[0].contains(&liar.url), "{said:?}");

        // It is back: everything it holds is confirmed.
        honest.faults.fail_next.store(0, SeqCst);
        both.tick().await.unwrap();
        let settled = with_earlier(vec![
            (late.to_string(), Confirmed),
            ("5".to_string(), Confirmed),
            ("7".to_string(), Pending),
        ]);
        assert_eq!(states(store).await, settled, "{backend:?}");
        assert!(waits(store.conditions().await.unwrap()).is_empty(), "{backend:?}: nothing waits any more");
        earlier.push((late.to_string(), Confirmed));
        assert_eq!(store.disputes(None, false, 10).await.unwrap().len(), 1, "still the one dispute");
    }

    // A third URL to spare: two honest URLs serve the block without the
    // forged deposit, more than the quorum can spare, and it fails.
    let db = TestDb::new(Backend::Sqlite).await;
    add_account(&db.store, "alice", &alice.to_string()).await;
    let (honest, other) = (proxy::start(anvil.url()).await, proxy::start(anvil.url()).await);
    for slow in [&honest, &other] {
        slow.faults.slow_min_ms.store(100, SeqCst);
        slow.faults.slow_max_ms.store(150, SeqCst);
    }
    let urls = [liar.url.clone(), honest.url.clone(), other.url.clone()];
    let mut three = watcher(&urls, &db.store, token_address, 2).await;
    catch_up(&mut three).await;
    three.tick().await.unwrap();
    let mut judged = earlier.clone();
    judged.extend([("5".to_string(), Confirmed), ("7".to_string(), Failed)]);
    judged.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(states(&db.store).await, judged, "the forgery fails on two honest words");
    let disputes = db.store.disputes(None, false, 10).await.unwrap();
    assert_eq!(disputes.iter().map(|d| d.outcome).collect::<Vec<_>>(), vec![Outcome::NotOnQuorum]);
}
