//! Sandbox and production, through real `serve` processes: in production
//! (the default) no sandbox provider approves anything and only operators
//! decide; a store keeps the environment it was first started in.

use crate::common;

use std::{process::Stdio, time::Duration};

use alloy::transports::http::reqwest::Method;
use common::{
    CHAIN,
    api::{Answer, answers, kyc, send_json},
    chain_toml,
    cli::{Env, Process},
    dead_port, eventually,
};
use serde_json::{Value, json};
use sqlx::{Connection, Executor, SqliteConnection};

/// `serve` on a free port with `env`; waits until it answers.
async fn serve(env: &Env, vars: &[(&str, &str)]) -> (Process, String) {
    let port = dead_port();
    let process =
        env.listen("serve", CHAIN, port, &[&[("CUSTODY_INDEXER_COMPLIANCE_POLL_MS", "50")], vars].concat());
    let base = format!("http://127.0.0.1:{port}");
    let healthz = format!("{base}/healthz");
    eventually(Duration::from_secs(30), "serve", || async { answers(&healthz).await.then_some(()) }).await;
    (process, base)
}

/// An identity of organization `acme` with ordinary KYC data submitted; its id.
async fn submitted(base: &str, key: &str, label: &str) -> String {
    let body = json!({ "request_id": label, "type": "INDIVIDUAL", "label": label });
    let created = send_json(Method::POST, &format!("{base}/v2/identities"), Some(key), Some(&body)).await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["id"].as_str().unwrap().to_string();
    let url = format!("{base}/v2/identities/{id}/compliance");
    let answer = send_json(Method::POST, &url, Some(key), Some(&kyc("Lovelace"))).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    id
}

async fn status(base: &str, key: &str, id: &str) -> String {
    let answer: Answer = send_json(Method::GET, &format!("{base}/v2/identities/{id}"), Some(key), None).await;
    answer.body["status"].as_str().unwrap().to_string()
}

/// `serve` refused to start: its standard error.
fn refused(env: &Env, vars: &[(&str, &str)]) -> String {
    let out = env
        .command(&["serve", "--chain", CHAIN.as_str()])
        .envs(vars.iter().copied())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "serve started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn health(env: &Env) -> Value {
    let out = env.command(&["health", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn production_approves_nothing_by_itself_and_a_store_keeps_its_environment() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let key = env.organization_with_key();
    assert_eq!(health(&env)["environment"], Value::Null, "no environment before a start");

    // The default is production: an ordinary name stays in review.
    let (mut process, base) = serve(&env, &[]).await;
    let ada = submitted(&base, &key, "ada").await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(status(&base, &key, &ada).await, "PENDING_ONBOARDING", "nothing approves it in production");
    let readyz = send_json(Method::GET, &format!("{base}/readyz"), None, None).await;
    assert_eq!(readyz.body["environment"], "production");
    assert_eq!(health(&env)["environment"], "production");
    // Only an operator decides, through the service.
    let approve = ["identities", "approve", &ada, "--organization", "acme", "--reason", "reviewed"];
    let direct = env.output(&approve);
    assert!(!direct.status.success(), "a production store refuses a decision on it directly");
    let store = env.store().await;
    let admins = env.admins(&base, &store).await;
    let grace = common::governance::operator(&base, &store, &admins, "Grace", "compliance").await.1;
    let through = env
        .command(&approve)
        .env("CUSTODY_INDEXER_SERVER", &base)
        .env("CUSTODY_INDEXER_OPERATOR_KEY", &grace)
        .output()
        .unwrap();
    assert!(through.status.success(), "{}", String::from_utf8_lossy(&through.stderr));
    assert_eq!(status(&base, &key, &ada).await, "ACTIVE");
    process.kill().unwrap();

    // The production store refuses a sandbox process, naming both.
    let message = refused(&env, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")]);
    assert!(
        message.contains("first started in production") && message.contains("runs in sandbox"),
        "{message}"
    );
}

#[tokio::test]
async fn the_sandbox_is_chosen_explicitly_and_its_store_never_starts_in_production() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let key = env.organization_with_key();
    let (mut process, base) = serve(&env, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")]).await;
    let ada = submitted(&base, &key, "ada").await;
    eventually(Duration::from_secs(30), "the sandbox approves", || async {
        (status(&base, &key, &ada).await == "ACTIVE").then_some(())
    })
    .await;
    assert_eq!(health(&env)["environment"], "sandbox");
    process.kill().unwrap();

    // Left to its default (production), the sandbox store is refused.
    let message = refused(&env, &[]);
    assert!(
        message.contains("first started in sandbox") && message.contains("--environment sandbox"),
        "{message}"
    );

    // A store from before environments, whose audit trail holds sandbox
    // decisions, needs an explicit environment the first time.
    let mut db = SqliteConnection::connect(&env.database_url).await.unwrap();
    db.execute("DELETE FROM store_environment").await.unwrap();
    db.close().await.unwrap();
    let message = refused(&env, &[]);
    assert!(message.contains("decisions of the sandbox compliance provider"), "{message}");
    let (mut process, _) = serve(&env, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")]).await;
    assert_eq!(health(&env)["environment"], "sandbox");
    process.kill().unwrap();
}

/// The variable `run` and `serve` take the personal-data key from; the
/// tests' processes get the tests' key unless a test clears it.
const PII_KEY: &str = "CUSTODY_INDEXER_PII_KEY";

#[tokio::test]
async fn production_refuses_to_start_without_the_pii_key_naming_it() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    for command in ["serve", "run"] {
        let out = env
            .command(&[command, "--chain", CHAIN.as_str()])
            .env_remove(PII_KEY)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command} started without the key");
        assert!(stderr.contains(PII_KEY) && stderr.contains("production"), "{command}: {stderr}");
    }
    assert_eq!(health(&env)["environment"], Value::Null, "a refused start stamps nothing");
    let malformed = refused(&env, &[(PII_KEY, "not a key")]);
    assert!(malformed.contains(PII_KEY) && !malformed.contains("not a key"), "{malformed}");
}

#[tokio::test]
async fn a_store_refuses_a_pii_key_other_than_its_own() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let key = env.organization_with_key();
    let (mut process, base) = serve(&env, &[]).await;
    let ada = submitted(&base, &key, "Ada Lovelace").await;
    process.kill().unwrap();

    let other = "b3RoZXIga2V5IG9mIHRoaXJ0eS10d28gYnl0ZXMgISE=";
    let message = refused(&env, &[(PII_KEY, other)]);
    assert!(message.contains("encrypted with key k") && message.contains(PII_KEY), "{message}");
    let out = env
        .command(&["identities", "show", &ada, "--organization", "acme"])
        .env(PII_KEY, other)
        .output()
        .unwrap();
    assert!(!out.status.success(), "an operator command with another key");
    // With its own key the store serves the data as it was given.
    let shown = env.ok(&["identities", "show", &ada, "--organization", "acme"]);
    assert!(shown.contains("\"Ada Lovelace\""), "{shown}");
}

#[tokio::test]
async fn the_sandbox_without_a_pii_key_keeps_its_own_across_restarts() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let key = env.organization_with_key();
    let sandbox = [("CUSTODY_INDEXER_ENVIRONMENT", "sandbox"), (PII_KEY, "")];
    let (mut process, base) = serve(&env, &sandbox).await;
    let ada = submitted(&base, &key, "Ada Lovelace").await;
    eventually(Duration::from_secs(30), "the sandbox approves", || async {
        (status(&base, &key, &ada).await == "ACTIVE").then_some(())
    })
    .await;
    process.kill().unwrap();

    let mut db = SqliteConnection::connect(&env.database_url).await.unwrap();
    let labels: Vec<(String,)> =
        sqlx::query_as("SELECT label FROM identities").fetch_all(&mut db).await.unwrap();
    assert!(labels.iter().all(|(l,)| l.starts_with("pii1.") && !l.contains("Lovelace")), "{labels:?}");
    db.close().await.unwrap();

    let (mut process, base) = serve(&env, &sandbox).await;
    let answer = send_json(Method::GET, &format!("{base}/v2/identities/{ada}"), Some(&key), None).await;
    assert_eq!(answer.body["label"], "Ada Lovelace", "{answer:?}");
    process.kill().unwrap();
    let out = env
        .command(&["identities", "show", &ada, "--organization", "acme"])
        .env(PII_KEY, "")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && shown.contains("Ada Lovelace"),
        "an operator reads the sandbox store with its kept key: {shown}"
    );
}

/// Before the fix (checked against f395c56) a sandbox started with both,
/// and minted real stablecoin on the mainnet for every simulated wire.
#[tokio::test]
async fn a_sandbox_refuses_a_mainnet_named_or_one_whose_file_lists_an_issued_stablecoin() {
    let env = Env::with_chain_file(&chain_toml(&[format!("http://127.0.0.1:{}", dead_port())], None, ""));
    let mainnet = std::fs::read_to_string("chains/ethereum-mainnet.toml").unwrap().replace(
        "rpc_urls = [\"https://ethereum-rpc.publicnode.com\", \"https://eth.llamarpc.com\"]",
        &format!("rpc_urls = [\"http://127.0.0.1:{}\"]", dead_port()),
    );
    let file = env.chains.join("mainnet.toml");
    std::fs::write(&file, &mainnet).unwrap();
    let sandbox = [("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")];
    let fails = |args: &[&str]| {
        let out = env.command(args).envs(sandbox).stdout(Stdio::null()).output().unwrap();
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = fails(&["run", "--chain", "ETHEREUM_MAINNET"]);
    assert!(stderr.contains("ETHEREUM_MAINNET is a mainnet") && stderr.contains("--chain"), "{stderr}");
    // A test chain's file pointed at a mainnet by its chain id is one too.
    let out = env
        .command(&["run", "--chain", CHAIN.as_str()])
        .envs(sandbox)
        .env(format!("{CHAIN}_CHAIN_ID"), "1")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains(&format!("{CHAIN} is a mainnet")), "{stderr}");

    // The platform's stablecoin listed as issued on the mainnet.
    let issued = mainnet.replacen("eip3009 = true", "eip3009 = true\nissued = true", 1);
    std::fs::write(&file, issued).unwrap();
    for args in [&["run"][..], &["run", "--chain", CHAIN.as_str()], &["serve"]] {
        let stderr = fails(args);
        let named = stderr.contains(&file.display().to_string()) && stderr.contains("ETHEREUM_MAINNET");
        assert!(named && stderr.contains("USDC") && stderr.contains("issued"), "{args:?}: {stderr}");
    }
    // Production is free to use every chain.
    let (mut serve, _) = serve(&env, &[("CUSTODY_INDEXER_ENVIRONMENT", "production")]).await;
    serve.0.kill().unwrap();
}
