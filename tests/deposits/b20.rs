//! Base's native B20 tokens: `Transfer` logs from a precompile address that
//! holds no bytecode. Reproduced on anvil with a token whose code is removed
//! after it emitted its logs: no code, still logs.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
};
use common::{
    db::Backend,
    dead_port, eventually,
    platform::{Platform, api_up},
};

#[tokio::test]
async fn a_token_without_code_is_refused_unless_marked_a_precompile_and_its_transfers_are_deposits() {
    let platform = Platform::new(Backend::Sqlite).await;
    let anvil = &platform.anvil;
    let b20 = anvil.deploy_token("B20").await;
    let token = anvil.token(b20);
    let minted = token.mint(platform.account, U256::from(2_500_000)).from(anvil.accounts[0]);
    assert!(minted.send().await.unwrap().get_receipt().await.unwrap().status());
    anvil.provider.raw_request::<_, ()>("anvil_setCode".into(), (b20, "0x")).await.unwrap();
    assert!(anvil.provider.get_code_at(b20).await.unwrap().is_empty(), "no code at {b20}");

    let file = platform.env.chains.join("test.toml");
    let listed = std::fs::read_to_string(&file).unwrap()
        + &format!("\n[[assets]]\nsymbol = \"B20\"\ncontract_address = \"{b20}\"\ndecimals = 6\n");
    std::fs::write(&file, &listed).unwrap();
    for command in ["run", "serve"] {
        let out = platform
            .env
            .command(&[command, "--chain", common::CHAIN.as_str()])
            .env("CUSTODY_INDEXER_MNEMONIC", common::transfers::MNEMONIC)
            .env("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command} started with an asset that has no code");
        let named = stderr.contains("asset B20") && stderr.contains(&file.display().to_string());
        assert!(
            named && stderr.contains("holds no code") && stderr.contains("precompile = true"),
            "{stderr}"
        );
    }

    std::fs::write(&file, listed + "precompile = true\n").unwrap();
    let port = dead_port();
    let _run = platform.run(port);
    api_up(port).await;
    let found = eventually(Duration::from_secs(30), "the B20 deposit", || async {
        let page = platform.get(port, "/v2/crypto/deposits?account_id=ada-1").await;
        let deposits = page["deposits"].as_array().unwrap().clone();
        deposits.into_iter().find(|d| d["currency_symbol"] == "B20")
    })
    .await;
    assert_eq!(found["amount"], "2.5", "{found}");
    assert_eq!(found["account_address"].as_str().unwrap().parse::<Address>().unwrap(), platform.account);
    assert!(["PENDING", "CONFIRMED"].contains(&found["status"].as_str().unwrap()), "{found}");
}
