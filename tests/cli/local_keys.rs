//! Production signs with keys no host can read: `run`, `accounts create`
//! and `wallets list` with a mnemonic, or with a SoftHSM token (even one
//! attested with `CUSTODY_INDEXER_PKCS11_HARDWARE=true`), refuse unless
//! `CUSTODY_INDEXER_ALLOW_LOCAL_KEYS=true`, naming the variables; with it,
//! `health` warns `keys: local mnemonic` (`keys: software token`) and
//! `/metrics` has `custody_indexer_local_keys 1`. Keys attested as hardware
//! are shown by `health` as `keys: pkcs11 (attested hardware)`, no warning.
//! A sandbox keeps its mnemonic without a word.

use crate::common;

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use alloy::transports::http::reqwest::Method;
use common::{
    Anvil, CHAIN, OPERATOR_TOKEN,
    api::{answers, send},
    chain_toml,
    cli::Env,
    dead_port, eventually,
    softhsm::Token,
    transfers::MNEMONIC,
};

const ALLOW: &str = "CUSTODY_INDEXER_ALLOW_LOCAL_KEYS";

/// `command` refused: its standard error.
fn refused(command: &mut Command) -> String {
    let out = command.stdout(Stdio::null()).output().unwrap();
    assert!(!out.status.success(), "{command:?} went ahead");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn health(env: &Env) -> String {
    let out = env.output(&["health"]);
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `run` started with `vars` (and the override), until its API answers:
/// its `/metrics`.
async fn started(env: &Env, vars: &[(&str, &str)]) -> (common::cli::Process, String) {
    let port = dead_port();
    let process = env.listen("run", CHAIN, port, vars);
    let base = format!("http://127.0.0.1:{port}");
    let healthz = format!("{base}/healthz");
    eventually(Duration::from_secs(30), "run", || async { answers(&healthz).await.then_some(()) }).await;
    let metrics = send(Method::GET, &format!("{base}/metrics"), Some(OPERATOR_TOKEN)).await.body;
    (process, metrics.as_str().unwrap().to_string())
}

#[tokio::test]
async fn production_refuses_keys_the_host_can_read_unless_told_otherwise() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let mnemonic = [("CUSTODY_INDEXER_MNEMONIC", MNEMONIC)];

    // Production (the default): refused, naming what to change.
    let mut run = env.command(&["run", "--chain", CHAIN.as_str()]);
    let error = refused(run.envs(mnemonic).env_remove(ALLOW));
    for name in ["CUSTODY_INDEXER_MNEMONIC", "CUSTODY_INDEXER_MNEMONIC_FILE", ALLOW] {
        assert!(error.contains(name), "{name}: {error}");
    }
    assert!(!error.contains("abandon"), "never the phrase: {error}");
    // The store now says production: accounts create is refused too, and
    // wallets list where the environment says production.
    let mut create = env.command(&["accounts", "create", "--type", "OMNIBUS", "--identity-id", "anyone"]);
    let error = refused(create.envs(mnemonic).env_remove(ALLOW));
    assert!(error.contains(ALLOW), "{error}");
    let mut list = env.command(&["wallets", "list"]);
    let list = list.envs(mnemonic).env_remove(ALLOW).env("CUSTODY_INDEXER_ENVIRONMENT", "production");
    assert!(refused(list).contains("local mnemonic"));

    // Allowed: it runs, and says so wherever an operator looks.
    let (mut process, metrics) = started(&env, &mnemonic).await;
    assert!(metrics.contains("custody_indexer_local_keys 1"), "{metrics}");
    assert!(health(&env).contains("keys: local mnemonic"), "{}", health(&env));
    process.kill().unwrap();

    // A SoftHSM token is a file on the host too. (A store of its own: the
    // store above holds the mnemonic's platform keys, and a service with
    // other keys would not start on it.)
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let token = Token::new("production");
    let owned = token.vars();
    let vars: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut run = env.command(&["run", "--chain", CHAIN.as_str()]);
    let error = refused(run.envs(vars.iter().copied()).env_remove(ALLOW));
    assert!(error.contains("software token") && error.contains(ALLOW), "{error}");
    assert!(error.contains("CUSTODY_INDEXER_PKCS11_HARDWARE"), "{error}");
    // The operator's attestation does not make SoftHSM hardware.
    let mut run = env.command(&["run", "--chain", CHAIN.as_str()]);
    let attested = run.envs(vars.iter().copied()).env("CUSTODY_INDEXER_PKCS11_HARDWARE", "true");
    let error = refused(attested.env_remove(ALLOW));
    assert!(error.contains("software token") && error.contains(ALLOW), "{error}");
    let (mut process, metrics) = started(&env, &vars).await;
    assert!(metrics.contains("custody_indexer_local_keys 1"), "{metrics}");
    let said = health(&env);
    assert!(said.contains("keys: software token") && !said.contains("keys: local mnemonic"), "{said}");
    process.kill().unwrap();
}

#[tokio::test]
async fn a_sandbox_keeps_its_mnemonic_without_a_word() {
    let anvil = Anvil::start().await;
    let env = Env::with_chain_file(&chain_toml(&[anvil.url()], None, ""));
    let vars = [("CUSTODY_INDEXER_MNEMONIC", MNEMONIC), ("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")];
    let port = dead_port();
    let mut command =
        env.command(&["run", "--chain", CHAIN.as_str(), "--listen", &format!("127.0.0.1:{port}")]);
    let spawned = command.envs(vars).env_remove(ALLOW).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let mut process = common::cli::Process(spawned.unwrap());
    let base = format!("http://127.0.0.1:{port}");
    eventually(Duration::from_secs(30), "run", || async {
        answers(&format!("{base}/healthz")).await.then_some(())
    })
    .await;
    let metrics = send(Method::GET, &format!("{base}/metrics"), Some(OPERATOR_TOKEN)).await.body;
    assert!(metrics.as_str().unwrap().contains("custody_indexer_local_keys 0"), "{metrics}");
    assert!(!health(&env).contains("keys:"), "{}", health(&env));
    process.kill().unwrap();
}

#[tokio::test]
async fn keys_attested_as_hardware_are_shown_by_health_and_no_warning() {
    use custody_indexer::keys::rules::{ATTESTED_LINE, KEYS_ATTESTED};
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".to_string()], None, ""));
    let store = env.store().await;
    // As a service whose token is attested records it at its start.
    custody_indexer::conditions::raise(&store, None, KEYS_ATTESTED, "pkcs11 token", ATTESTED_LINE)
        .await
        .unwrap();
    let said = health(&env);
    assert!(said.lines().any(|l| l == "keys: pkcs11 (attested hardware)"), "{said}");
    assert!(!said.contains("warning: keys:"), "{said}");
}
