//! Transfers of one topped-up address sent back to back, on a real anvil:
//! each starts once the one before it is included, not once it is final, and
//! none fails unsent while it waits its turn, however long the queue.

use crate::common;

use std::time::Duration;

use alloy::{primitives::U256, providers::Provider};
use common::{anvil::Mined, db::Backend, eventually, transfers::Setup};

#[tokio::test]
async fn back_to_back_top_up_transfers_of_one_account_go_at_the_chains_pace() {
    for (backend, count) in [(Backend::Sqlite, 2usize), (Backend::Postgres, 10)] {
        // A transfer is final two blocks after its own; one that no sender
        // takes fails after 2 s, much less than the queue's whole wait.
        let s = Setup::new(backend, "submit_within_secs = 2").await;
        let alice = s.create_account("alice", "SEGREGATED");
        let minter = s.anvil.accounts[5];
        s.anvil.token(s.tusd).mint(alice, U256::from(1_000_000_000)).from(minter).mined().await;
        let mut run = s.start("run").await;
        let mut ids = Vec::new();
        for _ in 0..count {
            ids.push(s.transfer("alice", "1", "TUSD", s.outside).await);
        }

        // Only the transfers' own transactions mine blocks (anvil mines one
        // per transaction): each must start while the one before is not final.
        let what = format!("{count} transfers landed ({backend:?})");
        eventually(Duration::from_secs(90), &what, || async {
            for id in &ids {
                let status = s.get(&format!("/v2/crypto/transfers/{id}")).await.body["status"].clone();
                assert_ne!(status, "FAILED", "{id} of {count} failed while queued ({backend:?})");
            }
            (s.tokens(s.tusd, s.outside).await == U256::from(count * 1_000_000)).then_some(())
        })
        .await;
        for id in &ids {
            s.until(id, "CONFIRMED", true).await;
        }

        // Each landed once, from alice's address, paid by top-ups alone.
        let store = s.env.store().await;
        for id in &ids {
            let included = s.included(&store, id).await;
            let transfers: Vec<_> = included.iter().filter(|x| x.sender == alice.to_string()).collect();
            assert_eq!(transfers.len(), 1, "{id}: one transaction of alice's included: {included:?}");
        }
        assert_eq!(s.tokens(s.tusd, s.outside).await, U256::from(count * 1_000_000), "{backend:?}");
        assert_eq!(s.tokens(s.tusd, alice).await, U256::from(1_000_000_000 - count * 1_000_000));
        let nonce = s.anvil.provider.get_transaction_count(alice).await.unwrap();
        assert_eq!(nonce, count as u64, "alice's address sent exactly its transfers ({backend:?})");
        run.kill().unwrap();
    }
}
