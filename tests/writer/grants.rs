//! Four eyes on grants, held by the log: once genesis has ended, an
//! operator made, enabled or given a role by an entry that applies no
//! change another admin approved (here: a process started as `sandbox` on
//! a production store, which grants alone, with the pepper and its MACs)
//! authenticates nothing, and `audit verify` names it. An entry a writer
//! appends is acknowledged by an admin through the service.

use crate::{common, keyed};

use alloy::transports::http::reqwest::Method;
use common::{
    api::{send_json, spawn_configured},
    cli::Env,
    db::BACKENDS,
    governance::{self, Admins},
    smtp::unsent,
    writer::{Forged, append_forged},
};
use custody_indexer::{
    api::ApiState,
    api_key::pepper,
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Operator, Outcome, Role, changes, grants, manage, taking},
    store::Store,
};
use serde_json::json;

async fn operators_status(base: &str, key: &str) -> u16 {
    send_json(Method::GET, &format!("{base}/operator/v1/operators"), Some(key), None).await.status
}

async fn operator(store: &Store, id: &str) -> Operator {
    store.operators().await.unwrap().into_iter().find(|o| o.id == id).unwrap()
}

/// A production service with the pepper, its log authenticated, past
/// genesis (two admins enrolled).
pub(crate) async fn past_genesis(backend: common::db::Backend) -> (common::api::App, Admins) {
    let mail = |state: ApiState| state.with_mail(Some(unsent("https://custody.example")));
    let app = spawn_configured(backend, Chains::default(), mail).await;
    let store = app.store();
    pepper::for_keys(store).await.unwrap();
    let new = NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
    let ada = manage::bootstrap(store, Environment::Production, &Actor::local(None), new).await.unwrap();
    let first = (ada.operator.id.clone(), ada.key.unwrap().token.to_string());
    let admins = governance::past_genesis(&app.base, store, first).await;
    (app, admins)
}

// Multi-threaded: the command line reaches this process's service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_granted_alone_after_genesis_acts_for_nothing_and_verify_names_it() {
    keyed();
    for backend in BACKENDS {
        let (app, admins) = past_genesis(backend).await;
        let (base, store) = (app.base.as_str(), app.store());
        // Made through an approved change: its key authenticates (a
        // treasury key is refused the operators' list, not unknown).
        let (tom, tom_key) = governance::operator(base, store, &admins, "Tom", "treasury").await;
        assert_eq!(operators_status(base, &tom_key).await, 403, "{backend:?}");
        assert_eq!(operators_status(base, &admins.first.1).await, 200, "{backend:?}");

        // Granted alone, with MAC'd entries that name no approved change.
        let ada = operator(store, &admins.first.0).await;
        let mel =
            NewOperator { name: "Mel".into(), email: "mel@example.com".into(), roles: vec![Role::Treasury] };
        let alone = grants::create(store, (Environment::Sandbox, None), &ada, mel).await.unwrap();
        let Outcome::Applied(mel) = alone else { panic!("{backend:?}: applied alone") };
        let mel_key = mel.key.expect("a sandbox grant's key").token.to_string();
        assert_eq!(operators_status(base, &mel_key).await, 401, "{backend:?}: made alone");
        let roles = [Role::Treasury, Role::Compliance];
        let raised =
            taking::set_roles(store, Environment::Sandbox, &ada, &tom, &roles, "alone").await.unwrap();
        assert!(matches!(raised, Outcome::Applied(_)), "{backend:?}");
        assert_eq!(operators_status(base, &tom_key).await, 401, "{backend:?}: a role added alone");

        // `audit verify`, with the pepper, names both grants.
        let mut env = Env::with_chain_file("");
        env.database_url = app.db.url.clone();
        let out = env.command(&["audit", "verify"]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        let errors = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {said}{errors}");
        for (id, action) in [(&mel.operator.id, "operator.created"), (&tom, "operator.roles_set")] {
            let named = said.lines().any(|line| {
                line.starts_with(&format!("audit log does not explain operator {id}: audit entry "))
                    && line.ends_with(&format!("({action}) applies no change another admin approved"))
            });
            assert!(named, "{backend:?}: {id} {action} in {said}{errors}");
        }

        // A writer's entry is acknowledged by an admin, in production
        // through the service only, and listed as acknowledged.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        let forged = Forged {
            actor: "system",
            action: "operator.enabled",
            target_kind: "operator",
            target_id: &tom,
            organization_id: None,
            detail: None,
        };
        let seq = append_forged(&pool, store, forged).await.seq.to_string();
        let acknowledge = ["audit", "acknowledge", &seq, "--reason", "a writer's entry, reported"];
        let local = env.command(&acknowledge).output().unwrap();
        let refused = String::from_utf8_lossy(&local.stderr);
        assert!(refused.contains("in production an admin acknowledges through the service"), "{refused}");
        let through = |key: &str| {
            let mut command = env.command(&acknowledge);
            command.args(["--server", base]).env("CUSTODY_INDEXER_OPERATOR_KEY", key);
            command.output().unwrap()
        };
        let bea = through(&admins.second.1);
        let said = String::from_utf8_lossy(&bea.stdout).to_string();
        assert!(bea.status.success(), "{backend:?}: {said}{}", String::from_utf8_lossy(&bea.stderr));
        let again = through(&admins.first.1);
        assert!(String::from_utf8_lossy(&again.stderr).contains("409"), "{backend:?}: acknowledged once");
        let out = env.command(&["audit", "verify"]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            said.contains(&format!("audit entry {seq}: not authenticated, acknowledged by entry ")),
            "{said}"
        );
        let log = store.audit_entries(0, None, 1000).await.unwrap();
        let recorded =
            log.iter().find(|e| e.action == "audit_log.acknowledged" && e.target_id == seq).unwrap();
        assert_eq!(recorded.actor, format!("operator:{}", admins.second.0), "{backend:?}");
    }
}

// Multi-threaded: enrolments reach this process's service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_proposed_before_the_logs_authentication_is_ended_at_start_and_none_after() {
    keyed();
    for backend in BACKENDS {
        // A store keyed under the pepper whose log is not yet authenticated.
        let mail = |state: ApiState| state.with_mail(Some(unsent("https://custody.example")));
        let app = spawn_configured(backend, Chains::default(), mail).await;
        let (base, store) = (app.base.as_str(), app.store());
        custody_indexer::audit::adopt::adopt(store).await.unwrap();
        pepper::adopt(store, custody_indexer::store::keyring::process().unwrap()).await.unwrap();
        let new =
            NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
        let ada = manage::bootstrap(store, Environment::Production, &Actor::local(None), new).await.unwrap();
        let first = (ada.operator.id.clone(), ada.key.unwrap().token.to_string());
        let admins = governance::past_genesis(base, store, first).await;
        let tom = json!({ "name": "Tom", "email": "tom@example.com", "roles": ["treasury"] });
        let before = send_json(
            Method::POST,
            &format!("{base}/operator/v1/operators"),
            Some(&admins.first.1),
            Some(&tom),
        )
        .await;
        assert_eq!(before.status, 202, "{backend:?}: {}", before.body);
        let before = before.body["change"]["id"].as_str().unwrap().to_string();

        // The authentication, then what every start does after it.
        custody_indexer::audit::authenticate::adopt(store, None).await.unwrap().expect("authenticated now");
        let cy = json!({ "name": "Cy", "email": "cy@example.com", "roles": ["compliance"] });
        let after = send_json(
            Method::POST,
            &format!("{base}/operator/v1/operators"),
            Some(&admins.first.1),
            Some(&cy),
        )
        .await;
        assert_eq!(after.status, 202, "{backend:?}: {}", after.body);
        let after = after.body["change"]["id"].as_str().unwrap().to_string();
        assert_eq!(changes::expire_unauthenticated(store).await.unwrap(), 1, "{backend:?}");
        assert_eq!(changes::expire_unauthenticated(store).await.unwrap(), 0, "{backend:?}: once");
        let listed = store.operator_changes(false, 10).await.unwrap();
        let status = |id: &str| listed.iter().find(|c| c.id == id).unwrap().status.as_str();
        assert_eq!((status(&before), status(&after)), ("EXPIRED", "PENDING"), "{backend:?}");
        let approve = |id: &str| format!("{base}/operator/v1/changes/{id}/approve");
        let decided =
            send_json(Method::POST, &approve(&after), Some(&admins.second.1), Some(&json!({}))).await;
        assert_eq!(decided.status, 200, "{backend:?}: a change made after it is decided: {}", decided.body);
    }
}
