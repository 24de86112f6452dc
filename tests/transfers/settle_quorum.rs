//! A transfer's settlement on a quorum of providers (`confirm_quorum = 2`)
//! on anvil: while the second URL does not answer, a transfer mined deep
//! enough stays `SUBMITTED` past its window, never cancelled nor signed
//! again; once it answers, the transfer is `CONFIRMED` with its one
//! transaction, and the money moved once.

use crate::common;

use std::{sync::atomic::Ordering::SeqCst, time::Duration};

use alloy::primitives::U256;
use common::{
    db::Backend,
    transfers::{ETH, Setup},
};
use custody_indexer::store::TxRole;

#[tokio::test]
async fn a_transfer_waits_for_a_quorum_of_providers_and_the_wait_cancels_nothing() {
    let s = Setup::with_rpc(Backend::Sqlite, "window_secs = 2", true).await;
    let witness = s.proxy.as_ref().unwrap();
    let file = s.env.chains.join("test.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let one = format!("rpc_urls = [{:?}]", witness.url);
    assert!(text.contains(&one), "{text}");
    let two = format!("rpc_urls = [{:?}, {:?}]\nconfirm_quorum = 2", s.anvil.url(), witness.url);
    std::fs::write(&file, text.replace(&one, &two)).unwrap();
    s.create_account("treasury", "OMNIBUS");
    let before = s.eth(s.outside).await;

    witness.faults.status.store(503, SeqCst);
    witness.faults.fail_next.store(u32::MAX, SeqCst);
    let _run = s.start("run").await;
    let id = s.transfer("treasury", "0.5", "ETH", s.outside).await;
    s.until(&id, "SUBMITTED", false).await;
    // Mined at once, then deep enough and far past its 2 s window.
    for _ in 0..10 {
        s.anvil.mine(1).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let waiting = s.get(&format!("/v2/crypto/transfers/{id}")).await.body;
    assert_eq!(waiting["status"], "SUBMITTED", "one provider's receipt settles nothing: {waiting}");
    let store = s.env.store().await;
    let sent = store.transfer_transactions(&id).await.unwrap();
    assert_eq!(sent.len(), 1, "never cancelled nor signed again: {sent:?}");
    assert_eq!(sent[0].role, TxRole::Transfer);
    assert!(sent[0].block_number.is_some(), "its inclusion is recorded: {sent:?}");

    witness.faults.fail_next.store(0, SeqCst);
    let done = s.until(&id, "CONFIRMED", true).await;
    assert_eq!(done["transaction_hash"].as_str(), Some(sent[0].hash.as_str()), "{done}");
    assert_eq!(store.transfer_transactions(&id).await.unwrap().len(), 1);
    assert_eq!(s.eth(s.outside).await - before, U256::from(ETH / 2), "moved once");
}
