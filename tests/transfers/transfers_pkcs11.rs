//! Transfers signed in a PKCS#11 token (SoftHSM2) by a running `run`: two
//! accounts' transfers, each after a gas top-up by the sponsor, every
//! transaction's sender the key's address in the token. The token pulled
//! out while transfers are queued stops signing and nothing else: `health`
//! says why and fails, the transfers wait past their submit window without
//! failing, and once the token is back each is sent once.

use crate::common;

use std::time::Duration;

use alloy::{primitives::U256, providers::Provider};
use common::{
    db::Backend,
    eventually,
    softhsm::{PIN, Token},
    transfers::Setup,
};

/// Everything the service's processes logged.
fn run_logs(s: &Setup) -> String {
    let mut logs = String::new();
    for entry in std::fs::read_dir(s.env.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            logs.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    logs
}

/// The transfers' submit window: short, so that waiting past it is quick.
const SUBMIT_WITHIN_SECS: u64 = 5;

#[tokio::test]
async fn a_token_that_stops_answering_stops_the_signing_and_nothing_else() {
    let token = Token::new("transfers");
    let transfers = format!("submit_within_secs = {SUBMIT_WITHIN_SECS}");
    let s = Setup::with_keys(Backend::Sqlite, &transfers, false, token.vars()).await;
    // Signed in the token: each account's transfer, after a top-up.
    let (alice, bob, mut run, store) = s.two_accounts_sent().await;
    let keys = token.private_keys();
    for label in ["custody-indexer:sponsor:platform:evm", "custody-indexer:account:2:evm"] {
        assert!(keys.contains(label), "{label} in the token: {keys}");
    }

    // Nothing in the production run's environment or logs can sign: its
    // PIN is in a file, and there is no phrase.
    let environ = std::fs::read(format!("/proc/{}/environ", run.id())).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("CUSTODY_INDEXER_PKCS11_PIN_FILE="), "the PIN's file is named");
    assert!(!environ.contains(PIN) && !environ.contains("MNEMONIC"), "{environ}");
    let logs = run_logs(&s);
    let production = logs.contains("production") && logs.contains("signing keys");
    assert!(
        production && logs.contains("pkcs11 software token"),
        "a production run signing in the token: {logs}"
    );
    assert!(!logs.contains(PIN) && !logs.contains(common::transfers::MNEMONIC), "{logs}");

    // Pulled out: transfers are still accepted (the addresses are known),
    // wait past their window, and health says why.
    token.pull_out();
    let queued =
        [s.transfer("alice", "2", "TUSD", s.outside).await, s.transfer("bob", "3", "TUSD", s.outside).await];
    eventually(Duration::from_secs(30), "health names the signer", || async {
        let out = s.env.output(&["health"]);
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (text.contains("signer: unreachable") && !out.status.success()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2 * SUBMIT_WITHIN_SECS)).await;
    for id in &queued {
        let transfer = s.get(&format!("/v2/crypto/transfers/{id}")).await.body;
        assert_eq!(transfer["status"], "ACCEPTED", "waits for the token past its window: {transfer}");
    }
    let metrics = s.env.output(&["health", "--json"]);
    assert!(!metrics.status.success(), "health fails while the signer does not answer");

    // Back: each sent once, from its account's address.
    token.reinsert();
    for id in &queued {
        s.until(id, "CONFIRMED", true).await;
    }
    for (id, account) in queued.iter().zip([alice, bob]) {
        let included = s.included(&store, id).await;
        let own: Vec<_> = included.iter().filter(|x| x.sender == account.to_string()).collect();
        assert_eq!(own.len(), 1, "{id}: sent once: {included:?}");
    }
    for (account, sent) in [(alice, 3u64), (bob, 4)] {
        assert_eq!(s.tokens(s.tusd, account).await, U256::from(10_000_000 - sent * 1_000_000));
        assert_eq!(
            s.anvil.provider.get_transaction_count(account).await.unwrap(),
            2,
            "two transfers, no more"
        );
    }
    let out = s.env.output(&["health"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("signer: unreachable"), "{text}");
    run.kill().unwrap();
}
