//! Transfers signed in AWS KMS (`CUSTODY_INDEXER_SIGNER=aws-kms`, cargo
//! feature `aws-kms`) through the KMS stand-in (tests/common/kms.rs): two
//! accounts' transfers after the sponsor's top-ups, every sender the key's
//! address, each key made once under its alias. KMS stopping stops the
//! signing and nothing else; back, each waiting transfer is sent once. A
//! build without the feature refuses the backend and names the feature.

use crate::common;

#[cfg(feature = "aws-kms")]
#[tokio::test(flavor = "multi_thread")]
async fn kms_signs_every_transfer_and_an_outage_only_waits() {
    use std::time::Duration;

    use alloy::providers::Provider;
    use common::{db::Backend, eventually, kms::Kms, transfers::Setup};

    let kms = Kms::start().await;
    let s = Setup::with_keys(Backend::Sqlite, "", false, kms.vars()).await;
    let (alice, _, mut run, store) = s.two_accounts_sent().await;
    let aliases = kms.aliases();
    for alias in ["sponsor/platform/evm", "omnibus/platform/evm", "account/2/evm", "account/3/evm"] {
        assert!(aliases.contains(&format!("alias/custody-indexer/{alias}")), "{alias}: {aliases:?}");
    }
    assert_eq!(kms.calls("CreateKey"), aliases.len(), "each key made once: {aliases:?}");

    // KMS stops answering: the transfer waits, health says why.
    kms.stop();
    let queued = s.transfer("alice", "2", "TUSD", s.outside).await;
    eventually(Duration::from_secs(60), "health names the signer", || async {
        let out = s.env.output(&["health"]);
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (text.contains("signer: unreachable") && !out.status.success()).then_some(())
    })
    .await;
    let waiting = s.get(&format!("/v2/crypto/transfers/{queued}")).await.body;
    assert_eq!(waiting["status"], "ACCEPTED", "{waiting}");

    kms.resume().await;
    s.until(&queued, "CONFIRMED", true).await;
    let own: Vec<_> =
        s.included(&store, &queued).await.into_iter().filter(|x| x.sender == alice.to_string()).collect();
    assert_eq!(own.len(), 1, "sent once: {own:?}");
    assert_eq!(s.anvil.provider.get_transaction_count(alice).await.unwrap(), 2, "two transfers, no more");
    run.kill().unwrap();
}

#[cfg(not(feature = "aws-kms"))]
#[test]
fn a_build_without_the_feature_refuses_kms_and_names_it() {
    let env =
        common::cli::Env::with_chain_file(&common::chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let out = env
        .command(&["wallets", "list"])
        .env("CUSTODY_INDEXER_SIGNER", "aws-kms")
        .env_remove("CUSTODY_INDEXER_MNEMONIC")
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("--features aws-kms"), "{error}");
}
