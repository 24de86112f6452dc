//! The operator token through real HTTP: `/metrics` answers only to it,
//! `/readyz` shows its detail only to it (its bare answer to anyone, with
//! the same status), nothing shows either without one configured; `serve`
//! takes it from its flag or environment, refuses a weak one and never
//! logs it; `health` reads the store whatever the token.

use crate::common;

use std::{path::PathBuf, process::Stdio, time::Duration};

use alloy::transports::http::reqwest::Method;
use common::{
    CHAIN, OPERATOR_TOKEN,
    api::{Answer, App, answers, send, spawn_app, spawn_configured},
    chain_toml,
    cli::{Env, Process, terminate},
    db::Backend,
    dead_port, eventually,
};
use custody_indexer::{
    api::{OperatorToken, RateLimit},
    config::Chains,
};
use serde_json::json;

async fn get(base: &str, path: &str, token: Option<&str>) -> Answer {
    send(Method::GET, &format!("{base}{path}"), token).await
}

async fn with_token() -> App {
    let token = OperatorToken::parse(OPERATOR_TOKEN).unwrap();
    spawn_configured(Backend::Sqlite, Chains::default(), |state| state.with_operator_token(Some(token))).await
}

#[tokio::test]
async fn metrics_and_the_detail_of_readyz_need_the_operator_token() {
    let app = with_token().await;
    let api_key = app.key("acme").await;
    let mut wrong = OPERATOR_TOKEN.to_string();
    wrong.replace_range(wrong.len() - 1.., "0");
    for refused in [None, Some(wrong.as_str()), Some(api_key.as_str()), Some(&OPERATOR_TOKEN[1..])] {
        let metrics = get(&app.base, "/metrics", refused).await;
        assert_eq!(metrics.status, 401, "{refused:?}: {:?}", metrics.body);
        assert_eq!(metrics.body["code"], "UNAUTHORIZED");
        // No chain has been scanned: not ready, and only that is said.
        let ready = get(&app.base, "/readyz", refused).await;
        assert_eq!((ready.status, ready.body), (503, json!({ "healthy": false, "environment": null })));
    }
    let basic = reqwest_get(&format!("{}/metrics", app.base), &format!("Basic {OPERATOR_TOKEN}")).await;
    assert_eq!(basic, 401, "only a bearer token counts");

    let metrics = get(&app.base, "/metrics", Some(OPERATOR_TOKEN)).await;
    assert_eq!(metrics.status, 200, "{:?}", metrics.body);
    assert!(metrics.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    let detail = get(&app.base, "/readyz", Some(OPERATOR_TOKEN)).await;
    assert_eq!(detail.status, 503, "the status does not depend on the token");
    assert_eq!(detail.body["store"]["reachable"], true, "{:?}", detail.body);
    assert!(detail.body["problems"][0].as_str().unwrap().starts_with("no chain has recorded a scan yet"));
    assert!(detail.body["chains"].is_array());

    let doc = get(&app.base, "/openapi.json", None).await.body;
    assert_eq!(doc["paths"]["/metrics"]["get"]["security"], json!([{ "operator_token": [] }]));
    assert_eq!(doc["paths"]["/readyz"]["get"]["security"], json!([{}, { "operator_token": [] }]));
    assert_eq!(doc["components"]["securitySchemes"]["operator_token"]["scheme"], "bearer");
}

async fn reqwest_get(url: &str, authorization: &str) -> u16 {
    let client = alloy::transports::http::reqwest::Client::new();
    client.get(url).header("authorization", authorization).send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn without_an_operator_token_configured_nothing_shows_metrics_or_detail() {
    let app = spawn_app(Backend::Sqlite, Chains::default(), RateLimit::default()).await;
    for token in [None, Some(OPERATOR_TOKEN)] {
        assert_eq!(get(&app.base, "/metrics", token).await.status, 401);
        let ready = get(&app.base, "/readyz", token).await;
        assert_eq!((ready.status, ready.body), (503, json!({ "healthy": false, "environment": null })));
    }
    assert_eq!(get(&app.base, "/healthz", None).await.status, 200);
}

/// `serve` on a free port, its operator token from `--operator-token`
/// (`flag`) or the environment (`variable`); its log file.
async fn serve(env: &Env, flag: Option<&str>, variable: Option<&str>) -> (Process, String, PathBuf) {
    let port = dead_port();
    let log = env.dir.path().join(format!("serve-{port}.log"));
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--chain", CHAIN.as_str(), "--listen", &listen];
    args.extend(flag.iter().flat_map(|token| ["--operator-token", *token]));
    let mut command = env.command(&args);
    command.env_remove("CUSTODY_INDEXER_OPERATOR_TOKEN").env("RUST_LOG", "debug");
    if let Some(token) = variable {
        command.env("CUSTODY_INDEXER_OPERATOR_TOKEN", token);
    }
    let process = command.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap();
    let base = format!("http://{listen}");
    let healthz = format!("{base}/healthz");
    eventually(Duration::from_secs(30), "serve", || async { answers(&healthz).await.then_some(()) }).await;
    (Process(process), base, log)
}

#[tokio::test]
async fn serve_takes_the_token_from_its_flag_or_environment_and_never_logs_it() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let flagged = "flagged-operator-token-fedcba9876543210";
    for (flag, variable, token) in
        [(None, Some(OPERATOR_TOKEN), OPERATOR_TOKEN), (Some(flagged), Some(OPERATOR_TOKEN), flagged)]
    {
        let (mut process, base, log) = serve(&env, flag, variable).await;
        assert_eq!(get(&base, "/metrics", Some(token)).await.status, 200, "{flag:?}");
        assert_eq!(get(&base, "/readyz", Some(token)).await.body["store"]["reachable"], true);
        assert_eq!(get(&base, "/metrics", None).await.status, 401);
        assert!(terminate(&mut process).success());
        let log = std::fs::read_to_string(log).unwrap();
        assert!(log.contains("need the operator token"), "{log}");
        assert!(!log.contains(token) && !log.contains(OPERATOR_TOKEN), "{log}");
    }

    // None configured: refused to everyone, and the log says how to enable it.
    let (mut process, base, log) = serve(&env, None, None).await;
    assert_eq!(get(&base, "/metrics", Some(OPERATOR_TOKEN)).await.status, 401);
    assert_eq!(get(&base, "/readyz", Some(OPERATOR_TOKEN)).await.body.get("store"), None);
    assert!(terminate(&mut process).success());
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("no operator token") && log.contains("CUSTODY_INDEXER_OPERATOR_TOKEN"), "{log}");

    // A weak token is refused at start, without being echoed.
    let weak = "hunter2-is-weak";
    let out = env.output(&["serve", "--chain", CHAIN.as_str(), "--operator-token", weak]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("at least 32"), "{stderr}");
    assert!(!stderr.contains(weak), "{stderr}");

    // `health` reads the store: no token involved, the whole report shown.
    let health = env.output(&["health", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&health.stdout).unwrap();
    assert_eq!(report["store"]["reachable"], true, "{report}");
    assert!(report["chains"].is_array() && report["problems"].is_array(), "{report}");
}
