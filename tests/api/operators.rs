//! Operators as principals, through real HTTP on both stores: the
//! bootstrap from the store alone, an admin managing operators through
//! `/operator/v1/`, roles checked, a tenant's key and an operator's key each
//! refused on the other's API, a disabled operator's key refused at once on
//! another instance, and every change in the audit log, whose chain
//! `audit verify` checks and finds broken once a row is edited.

use crate::common;

use std::process::{Command, Output};

use alloy::transports::http::reqwest::Method;
use common::{
    api::{Answer, App, send_json, spawn_configured},
    db::{BACKENDS, Backend, TEST_PII_KEY},
};
use custody_indexer::{
    api::ApiState,
    audit::{Actor, chain},
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Role, manage},
};
use serde_json::{Value, json};

async fn call(app: &App, method: Method, path: &str, token: &str, body: Option<&Value>) -> Answer {
    send_json(method, &format!("{}{path}", app.base), Some(token), body).await
}

/// The command line on `app`'s store, with `operator_key` if given.
pub fn cli(app: &App, args: &[&str], operator_key: Option<&str>) -> Output {
    cli_with(app, args, operator_key, &[])
}

/// [`cli`] with `envs` besides.
pub fn cli_with(app: &App, args: &[&str], operator_key: Option<&str>, envs: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_custody-indexer"));
    command.envs(envs.iter().copied());
    command
        .args(args)
        .env("DATABASE_URL", &app.db.url)
        .env("CUSTODY_INDEXER_PII_KEY", TEST_PII_KEY)
        .env_remove("CUSTODY_INDEXER_SERVER")
        .env_remove("CUSTODY_INDEXER_OPERATOR_KEY");
    if !envs.iter().any(|(name, _)| *name == "CUSTODY_INDEXER_KEY_PEPPER_FILE") {
        command.env_remove("CUSTODY_INDEXER_KEY_PEPPER_FILE");
    }
    if let Some(key) = operator_key {
        command.env("CUSTODY_INDEXER_OPERATOR_KEY", key);
    }
    command.output().unwrap()
}

/// What a command printed, both streams.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The admin of a fresh store, made by the bootstrap; its key.
async fn bootstrap(app: &App) -> String {
    let new =
        NewOperator { name: "Ada Admin".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
    manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), new)
        .await
        .unwrap()
        .key
        .unwrap()
        .token
}

#[tokio::test]
async fn in_sandbox_an_admin_manages_operators_alone_and_every_change_is_audited() {
    for backend in BACKENDS {
        let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
        let app = spawn_configured(backend, Chains::default(), sandbox).await;
        let admin = bootstrap(&app).await;
        let again =
            NewOperator { name: "Eve".into(), email: "eve@example.com".into(), roles: vec![Role::Admin] };
        let refused = manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), again)
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("has an admin already"), "{backend:?}: {refused}");

        // Each API refuses the other's keys.
        let tenant = app.key("acme").await;
        let answer = call(&app, Method::GET, "/operator/v1/operators", &tenant, None).await;
        assert_eq!(answer.status, 401, "{backend:?}: a tenant's key on the operator API");
        assert_eq!(app.get("/v2/webhooks", &admin).await.status, 401, "{backend:?}: an operator key on /v2");

        let body = json!({ "name": "Tom Treasury", "email": "tom@example.com", "roles": ["treasury"] });
        let created = call(&app, Method::POST, "/operator/v1/operators", &admin, Some(&body)).await;
        assert_eq!(created.status, 201, "{backend:?}: {:?}", created.body);
        let tom_id = created.body["operator"]["id"].as_str().unwrap().to_string();
        let tom = created.body["key"]["token"].as_str().unwrap().to_string();
        assert!(tom.starts_with("cio_"));
        let taken = call(&app, Method::POST, "/operator/v1/operators", &admin, Some(&body)).await;
        assert_eq!(taken.status, 409, "{backend:?}: the same email twice");

        // Roles are the service's to check.
        let listed = call(&app, Method::GET, "/operator/v1/operators", &tom, None).await;
        assert_eq!(listed.status, 403, "{backend:?}");
        assert!(listed.body["message"].as_str().unwrap().contains("`admin` role"), "{:?}", listed.body);
        let listed = call(&app, Method::GET, "/operator/v1/operators", &admin, None).await;
        assert_eq!(listed.status, 200);
        assert_eq!(listed.body["operators"].as_array().unwrap().len(), 2);
        assert!(!listed.body.to_string().contains("secret") && !listed.body.to_string().contains(&tom));

        let own = json!({ "roles": ["admin", "treasury"], "reason": "more power" });
        let ada_id = listed.body["operators"][0]["id"].as_str().unwrap();
        let answer =
            call(&app, Method::PUT, &format!("/operator/v1/operators/{ada_id}/roles"), &admin, Some(&own))
                .await;
        assert_eq!(answer.status, 403, "{backend:?}: an admin's own roles");
        let roles = json!({ "roles": ["treasury", "compliance"], "reason": "covers compliance this week" });
        let path = format!("/operator/v1/operators/{tom_id}/roles");
        let answer = call(&app, Method::PUT, &path, &admin, Some(&roles)).await;
        assert_eq!((answer.status, answer.body["roles"].clone()), (200, json!(["compliance", "treasury"])));

        // An operator key also opens the operator token's detail.
        assert_eq!(call(&app, Method::GET, "/metrics", &tom, None).await.status, 200, "{backend:?}");

        // Disabled: refused at once, here and on another instance.
        let other = app.another_server(Chains::default()).await;
        let audit_on = |base: &str| format!("{base}/operator/v1/audit");
        assert_eq!(send_json(Method::GET, &audit_on(&other.base), Some(&tom), None).await.status, 200);
        let reason = json!({ "reason": "left the company" });
        let path = format!("/operator/v1/operators/{tom_id}/disable");
        assert_eq!(call(&app, Method::POST, &path, &admin, Some(&reason)).await.status, 200);
        for base in [&app.base, &other.base] {
            let answer = send_json(Method::GET, &audit_on(base), Some(&tom), None).await;
            assert_eq!(answer.status, 401, "{backend:?}: a disabled operator's key at {base}");
        }

        // The log holds every change, attributed, and its chain holds.
        let log = call(&app, Method::GET, "/operator/v1/audit?limit=100", &admin, None).await;
        let entries = log.body["entries"].as_array().unwrap();
        let actions: Vec<_> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
        assert_eq!(
            actions,
            [
                "operator.bootstrapped",
                "api_key.created",
                "operator.created",
                "operator.roles_set",
                "operator.disabled"
            ]
        );
        assert!(entries[0]["actor"].as_str().unwrap().starts_with("local:"));
        assert_eq!(entries[1]["organization_id"], "acme", "the tenant's key, in its organization's log");
        assert_eq!(entries[4]["actor"], format!("operator:{ada_id}"));
        assert_eq!(entries[4]["actor_name"], "Ada Admin");
        assert_eq!(entries[4]["reason"], "left the company");
        let stored = app.store().audit_entries(0, None, 100).await.unwrap();
        assert!(stored[4].reason.as_deref().unwrap().starts_with("pii1."), "a reason is sealed at rest");
        let head = app.store().audit_head().await.unwrap();
        assert_eq!(chain::verify(&stored, Some((head.0, &head.1))), Ok(5));
    }
}

// The command line runs as a child process while this runtime serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_bootstraps_then_acts_through_the_service_and_audit_verify_finds_an_edit() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let mail = |state: ApiState| state.with_mail(Some(common::smtp::unsent("https://custody.example")));
        let app = spawn_configured(backend, Chains::default(), mail).await;
        let create =
            ["operators", "create", "--name", "Ada", "--email", "ada@example.com", "--role", "admin"];
        let out = cli(&app, &create, None);
        assert!(out.status.success(), "{backend:?}: {}", text(&out));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let admin = stdout.lines().last().unwrap().to_string();
        assert!(admin.starts_with("cio_"), "the key is on the last line: {stdout}");

        let ada = stdout.lines().next().unwrap().split_whitespace().nth(1).unwrap().to_string();

        // Production: the bootstrap makes one admin, once; genesis adds
        // admins alone, and nothing else.
        let second =
            ["operators", "create", "--name", "Bob", "--email", "bob@example.com", "--role", "treasury"];
        let out = cli(&app, &second, None);
        assert!(!out.status.success() && text(&out).contains("`admin` role only"), "{}", text(&out));
        let again = ["operators", "create", "--name", "Eve", "--email", "eve@example.com", "--role", "admin"];
        let out = cli(&app, &again, None);
        assert!(!out.status.success() && text(&out).contains("an admin has existed"), "{}", text(&out));
        let through = [&second[..], &["--server", &app.base]].concat();
        let out = cli(&app, &through, Some(&admin));
        assert!(!out.status.success() && text(&out).contains("genesis"), "{backend:?}: {}", text(&out));
        let cleo =
            ["operators", "create", "--name", "Cleo", "--email", "cleo@example.com", "--role", "admin"];
        let out = cli(&app, &[&cleo[..], &["--server", &app.base]].concat(), Some(&admin));
        assert!(out.status.success(), "{backend:?}: {}", text(&out));
        assert!(text(&out).contains("not shown here") && !text(&out).contains("cio_"), "{}", text(&out));
        let cleo_id = text(&out).lines().next().unwrap().split_whitespace().nth(1).unwrap().to_string();
        assert_eq!(common::governance::enrol(&app.base, app.store(), &ada).await, None, "{backend:?}");
        let cleo = common::governance::enrol(&app.base, app.store(), &cleo_id).await.unwrap();

        // Past genesis a grant is a change another admin approves.
        let out = cli(&app, &through, Some(&admin));
        assert!(out.status.success(), "{backend:?}: {}", text(&out));
        let proposed = text(&out);
        assert!(proposed.contains("(operator.create of op_") && proposed.contains("PENDING"), "{proposed}");
        let change = proposed.split_whitespace().nth(1).unwrap().to_string();
        let out =
            cli(&app, &["operators", "changes", "list", "--pending", "--server", &app.base], Some(&cleo));
        assert!(
            text(&out).contains(&change) && text(&out).contains("Bob <bob@example.com> roles treasury"),
            "{}",
            text(&out)
        );
        let approve = ["operators", "changes", "approve", &change, "--server", &app.base];
        let out = cli(&app, &approve, Some(&admin));
        assert!(!out.status.success() && text(&out).contains("403"), "its proposer: {}", text(&out));
        let out = cli(&app, &approve, Some(&cleo));
        assert!(out.status.success() && text(&out).contains("APPLIED"), "{backend:?}: {}", text(&out));
        let bob_id = proposed.split("operator.create of ").nth(1).unwrap().split(')').next().unwrap();
        let bob = common::governance::enrol(&app.base, app.store(), bob_id).await.unwrap();
        let out = cli(&app, &through, Some(&bob));
        assert!(!out.status.success() && text(&out).contains("403"), "{}", text(&out));
        let keys = ["operators", "keys", "create", bob_id, "--server", &app.base];
        let out = cli(&app, &keys, Some(&admin));
        assert!(!out.status.success() && text(&out).contains("POST /operator/v1/me/keys"), "{}", text(&out));

        let out = cli(&app, &["operators", "list", "--json", "--server", &app.base], Some(&admin));
        assert!(out.status.success(), "{}", text(&out));
        let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 3);
        assert!(!text(&out).contains(&bob[4..]), "never a secret");

        let out = cli(&app, &["audit", "verify"], None);
        assert!(out.status.success(), "{backend:?}: {}", text(&out));
        assert!(text(&out).contains("14 entries"), "{}", text(&out));
        let out = cli(&app, &["audit", "list"], None);
        for action in [
            "operator.bootstrapped",
            "operator.genesis_created",
            "operator.genesis_ended",
            "operator_change.proposed",
            "operator_change.approved",
            "operator.created",
            "operator_key.created",
        ] {
            assert!(text(&out).contains(action), "{action}: {}", text(&out));
        }

        // An entry edited in the database (its guards dropped, as the
        // tables' owner can) is found, by its seq.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        crate::audit_log::drop_guards(&pool, backend).await;
        sqlx::query("UPDATE audit_log SET target_id = 'op_someone_else' WHERE seq = 2")
            .execute(&pool)
            .await
            .unwrap();
        let out = cli(&app, &["audit", "verify"], None);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", text(&out));
        assert!(text(&out).contains("seq 2"), "{}", text(&out));
    }
}
