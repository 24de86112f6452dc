//! The binary as operators use it: `run` serving the API over what it indexes
//! from a real anvil (deposits, balances read from the chain, `/readyz`,
//! `/metrics`), `health` exit codes, `serve` alone, and the key and
//! organization commands.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    transports::http::reqwest::Method,
};
use common::{
    Anvil, CHAIN, OPERATOR_TOKEN,
    anvil::Mined,
    api::{Answer, answers, send},
    chain_toml,
    cli::{Env, terminate},
    db::{BACKENDS, Backend, TestDb},
    dead_port, eventually,
};
use custody_indexer::amount::Amount;

const ETH: u64 = 1_000_000_000_000_000_000;

async fn get(port: u16, path: &str, key: Option<&str>) -> Answer {
    send(Method::GET, &format!("http://127.0.0.1:{port}{path}"), key).await
}

/// The store's health, through the `health` command: (exit code, stdout).
fn health(env: &Env, args: &[&str]) -> (i32, String) {
    let out = env.output(&[&["health"], args].concat());
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn run_serves_what_it_indexes_and_reports_its_health() {
    for backend in BACKENDS {
        let anvil = Anvil::start().await;
        let [outsider, alice] = [anvil.accounts[0], anvil.accounts[1]];
        let token_address = anvil.deploy_token("TUSD").await;
        let token = anvil.token(token_address);
        token.mint(outsider, U256::from(100_000_000u64)).from(outsider).mined().await;

        let mut env = Env::with_chain_file(&chain_toml(
            &[anvil.url()],
            Some(&token_address.to_string()),
            "stale_after_ms = 2000",
        ));
        let db = TestDb::new(backend).await;
        if backend == Backend::Postgres {
            env.database_url = db.url.clone();
        }
        let key = env.organization_with_key();
        env.add_account_of("acme", "alice", "SEGREGATED", &alice.to_string(), CHAIN);
        let port = dead_port();
        let mut run = env.listen("run", CHAIN, port, &[]);

        let healthz = format!("http://127.0.0.1:{port}/healthz");
        eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) })
            .await;
        anvil.send_eth(outsider, alice, U256::from(ETH + ETH / 2)).await;
        token.transfer(alice, U256::from(2_500_000u64)).from(outsider).mined().await;
        let deposits = eventually(Duration::from_secs(30), "both deposits over the API", || async {
            let answer = get(port, "/v2/crypto/deposits?account_id=alice", Some(&key)).await;
            let deposits = answer.body.get("deposits")?.as_array()?.clone();
            (deposits.len() == 2).then_some(deposits)
        })
        .await;
        let mut amounts: Vec<(&str, &str)> = deposits
            .iter()
            .map(|d| (d["amount"].as_str().unwrap(), d["currency_symbol"].as_str().unwrap()))
            .collect();
        amounts.sort();
        assert_eq!(amounts, [("1.5", "ETH"), ("2.5", "TUSD")], "{backend:?}");

        // Balances come from the chain: alice's dev-account ETH plus the deposit.
        let wei = anvil.provider.get_balance(alice).await.unwrap();
        let balances = get(port, "/v2/accounts/alice/balances", Some(&key)).await;
        assert_eq!(balances.status, 200, "{:?}", balances.body);
        let expected = serde_json::json!({ "balances": [
            { "symbol": "ETH", "total": Amount::from_raw(wei, 18).to_string(), "available": Amount::from_raw(wei, 18).to_string(),
              "decimals": 18, "type": "BASE", "chain": "ETHEREUM_TESTNET", "contract_address": "" },
            { "symbol": "TUSD", "total": "2.5", "available": "2.5", "decimals": 6, "type": "ERC20",
              "chain": "ETHEREUM_TESTNET", "contract_address": token_address.to_string() },
        ]});
        assert_eq!(balances.body, expected);
        assert_eq!(
            get(port, "/v2/accounts/alice/balances?chain=ETHEREUM_TESTNET", Some(&key)).await.body,
            expected
        );
        let elsewhere = get(port, "/v2/accounts/alice/balances?chain=BASE_SEPOLIA", Some(&key)).await;
        assert_eq!(elsewhere.body, serde_json::json!({ "balances": [] }));

        // Healthy while the node answers: anyone sees that much, operators the detail.
        let bare = get(port, "/readyz", None).await;
        assert_eq!(
            (bare.status, bare.body.clone()),
            (200, serde_json::json!({ "healthy": true, "environment": "production" }))
        );
        assert_eq!(get(port, "/metrics", None).await.status, 401);
        let ready = get(port, "/readyz", Some(OPERATOR_TOKEN)).await;
        assert_eq!(ready.status, 200, "{:?}", ready.body);
        assert_eq!(ready.body["chains"][0]["chain"], CHAIN.as_str());
        assert_eq!(ready.body["chains"][0]["healthy"], true);
        assert_eq!(get(port, "/healthz", None).await.status, 200);
        let (code, out) = health(&env, &[]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("ETHEREUM_TESTNET  healthy"), "{out}");
        let (code, json) = health(&env, &["--json", "--chain", CHAIN.as_str()]);
        assert_eq!(code, 0);
        let report: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(report["healthy"], true);
        assert_eq!(report["chains"][0]["lag"], 0);

        let metrics = get(port, "/metrics", Some(OPERATOR_TOKEN)).await.body;
        let metrics = metrics.as_str().unwrap();
        let head = anvil.head().await;
        assert!(
            metrics.contains(&format!("custody_indexer_head_block{{chain=\"ETHEREUM_TESTNET\"}} {head}")),
            "{metrics}"
        );
        assert!(
            metrics.contains(&format!("custody_indexer_indexed_block{{chain=\"ETHEREUM_TESTNET\"}} {head}"))
        );
        assert!(metrics.contains("custody_indexer_lag_blocks{chain=\"ETHEREUM_TESTNET\"} 0"));
        assert!(
            metrics.contains("custody_indexer_deposits{chain=\"ETHEREUM_TESTNET\",status=\"PENDING\"} 2")
        );
        assert!(
            metrics.contains("custody_indexer_last_success_timestamp_seconds{chain=\"ETHEREUM_TESTNET\"}")
        );

        // The node goes away: the chain turns stale, /readyz and `health` say so.
        drop(anvil);
        let unready = eventually(Duration::from_secs(30), "/readyz to turn unready", || async {
            let answer = get(port, "/readyz", Some(OPERATOR_TOKEN)).await;
            (answer.status == 503).then_some(answer.body)
        })
        .await;
        let problems = unready["problems"][0].as_str().unwrap();
        let bare = get(port, "/readyz", None).await;
        assert_eq!((bare.status, bare.body["healthy"].clone()), (503, false.into()));
        assert!(bare.body.get("problems").is_none(), "{:?}", bare.body);
        assert!(problems.starts_with("ETHEREUM_TESTNET: last successful scan"), "{unready}");
        let (code, out) = health(&env, &[]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("UNHEALTHY") && out.contains("last error: rpc"), "{out}");
        let metrics = get(port, "/metrics", Some(OPERATOR_TOKEN)).await.body;
        assert!(
            metrics.as_str().unwrap().contains(
                "custody_indexer_rpc_errors_total{chain=\"ETHEREUM_TESTNET\",kind=\"unreachable\"}"
            ),
            "{metrics}"
        );
        assert!(
            metrics.as_str().unwrap().contains("custody_indexer_chain_healthy{chain=\"ETHEREUM_TESTNET\"} 0")
        );
        assert!(terminate(&mut run).success());
    }
}

#[tokio::test]
async fn health_fails_when_the_store_cannot_be_read() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    let mut missing = env.command(&["health"]);
    let file = env.dir.path().join("absent.db");
    missing.env("DATABASE_URL", format!("sqlite://{}", file.display()));
    let out = missing.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("store: UNREACHABLE"));
    assert!(!file.exists(), "health does not create a store");

    let mut dead = env.command(&["health", "--json"]);
    dead.env("DATABASE_URL", format!("postgres://postgres@127.0.0.1:{}/x", dead_port()));
    let out = dead.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["store"]["reachable"], false);

    // A store nobody indexes into is not healthy either.
    env.ok(&["migrate"]);
    let (code, out) = health(&env, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("no chain has recorded a scan yet"), "{out}");
    let (code, out) = health(&env, &["--chain", CHAIN.as_str()]);
    assert_eq!(code, 1);
    assert!(out.contains("no successful scan recorded"), "{out}");
}

#[tokio::test]
async fn serve_answers_from_the_store_without_indexing() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    let key = env.organization_with_key();
    env.add_account_of("acme", "a1", "OMNIBUS", &Address::repeat_byte(7).to_string(), CHAIN);
    let port = dead_port();
    let mut serve = env.listen("serve", CHAIN, port, &[]);
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    eventually(Duration::from_secs(30), "serve to answer", || async {
        answers(&healthz).await.then_some(())
    })
    .await;
    let account = get(port, "/v2/accounts/a1", Some(&key)).await;
    assert_eq!(account.status, 200);
    assert_eq!(account.body["type"], "OMNIBUS");
    let ready = get(port, "/readyz", Some(OPERATOR_TOKEN)).await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.body["chains"][0]["problems"][0], "no successful scan recorded");
    assert!(terminate(&mut serve).success());
}

#[tokio::test]
async fn keys_are_shown_once_limited_to_fifty_and_revocable() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".into()], None, ""));
    let secret = env.organization_with_key();
    let listed = env.ok(&["api-keys", "list", "--json"]);
    let keys: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let id = keys[0]["id"].as_str().unwrap().to_string();
    assert_eq!(keys[0]["name"], "monitoring");
    assert_eq!(keys[0]["organization_id"], "acme");
    assert!(!listed.contains(&secret[secret.len() - 43..]), "a listing never shows a secret");
    for file in ["store.db", "store.db-wal"] {
        let bytes = std::fs::read(env.dir.path().join(file)).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&secret[secret.len() - 43..]),
            "only a hash is stored"
        );
    }

    let nameless = env.output(&["api-keys", "create", "--organization", "acme"]);
    assert!(!nameless.status.success());
    let unknown = env.output(&["api-keys", "create", "--organization", "nobody", "--name", "x"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("organization nobody not found"));
    let duplicate = env.output(&["organizations", "create", "--id", "acme"]);
    assert!(String::from_utf8_lossy(&duplicate.stderr).contains("organization acme already exists"));

    for i in 1..50 {
        env.ok(&["api-keys", "create", "--organization", "acme", "--name", &format!("key {i}")]);
    }
    let refused = env.output(&["api-keys", "create", "--organization", "acme", "--name", "key 51"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("organization acme holds 50 active API keys, its limit of 50"), "{stderr}");

    let revoked = env.ok(&["api-keys", "revoke", &id]);
    assert!(revoked.contains("revoked"), "{revoked}");
    env.ok(&["api-keys", "create", "--organization", "acme", "--name", "key 51"]);
    let organizations = env.ok(&["organizations", "list"]);
    assert!(organizations.contains("acme  Acme Treasury"), "{organizations}");
}
