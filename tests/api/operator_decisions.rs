//! Compliance decisions through `/operator/v1/` on both stores: an identity
//! imported, suspended and given the fiat entitlement by a `compliance`
//! operator, a `treasury` one refused, each decision in the identity's
//! trail and the audit log; the audit log closed to `treasury`; the last
//! admin's last key kept; the command line through the service and, on a
//! production store, refused without it and logged with `--break-glass`.

use crate::common;

use alloy::transports::http::reqwest::Method;
use common::{
    api::{Answer, App, send_json, spawn_app},
    db::BACKENDS,
};
use custody_indexer::{
    api::RateLimit,
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Operator, Role, manage},
};
use serde_json::{Value, json};

use super::operators::{cli, cli_with, text};

async fn call(app: &App, method: Method, path: &str, token: &str, body: Option<&Value>) -> Answer {
    send_json(method, &format!("{}{path}", app.base), Some(token), body).await
}

/// The admin (bootstrapped), a compliance and a treasury operator: each
/// operator and its key.
pub(super) async fn staff(app: &App) -> [(Operator, String); 3] {
    let new = |name: &str, role: Role| NewOperator {
        name: name.into(),
        email: format!("{}@example.com", name.to_lowercase()),
        roles: vec![role],
    };
    let admin =
        manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), new("Ada", Role::Admin))
            .await
            .unwrap();
    let mut made = Vec::new();
    for (name, role) in [("Cleo", Role::Compliance), ("Tom", Role::Treasury)] {
        let created = common::api::seed_operator(app.store(), &admin.operator, new(name, role)).await;
        made.push((created.operator, created.key.unwrap().token));
    }
    let [cleo, tom] = <[_; 2]>::try_from(made).unwrap();
    [(admin.operator, admin.key.unwrap().token), cleo, tom]
}

fn decision(decision: &str, reason: &str) -> Value {
    json!({ "decision": decision, "reason": reason })
}

#[tokio::test]
async fn compliance_decides_identities_through_the_service_and_each_decision_is_attributed() {
    for backend in BACKENDS {
        let app = spawn_app(backend, Chains::default(), RateLimit::default()).await;
        app.key("acme").await;
        let [(admin, admin_key), (cleo, cleo_key), (_, tom_key)] = staff(&app).await;

        let import = json!({ "id": "ana", "type": "INDIVIDUAL", "status": "ACTIVE", "reason": "migrated" });
        let path = "/operator/v1/organizations/acme/identities";
        let refused = call(&app, Method::POST, path, &tom_key, Some(&import)).await;
        assert_eq!(refused.status, 403, "{backend:?}: treasury imports no identity");
        let imported = call(&app, Method::POST, path, &cleo_key, Some(&import)).await;
        assert_eq!((imported.status, &imported.body["status"]), (201, &json!("ACTIVE")), "{backend:?}");
        let rejected = json!({ "id": "rex", "type": "INDIVIDUAL", "status": "REJECTED", "reason": "x" });
        let bad = call(&app, Method::POST, path, &cleo_key, Some(&rejected)).await;
        assert_eq!(bad.status, 400, "{backend:?}: {:?}", bad.body);
        assert!(bad.body["message"].as_str().unwrap().starts_with("status:"), "{:?}", bad.body);

        let decide = "/operator/v1/organizations/acme/identities/ana/decisions";
        let answer = call(&app, Method::POST, decide, &tom_key, Some(&decision("suspend", "fraud"))).await;
        assert_eq!(answer.status, 403, "{backend:?}");
        assert!(answer.body["message"].as_str().unwrap().contains("`compliance`"), "{:?}", answer.body);
        let answer = call(&app, Method::POST, decide, &cleo_key, Some(&decision("suspend", "fraud"))).await;
        assert_eq!(answer.status, 200, "{backend:?}: {:?}", answer.body);
        assert_eq!(
            (&answer.body["previous_status"], &answer.body["status"]),
            (&json!("ACTIVE"), &json!("SUSPENDED"))
        );
        let again = call(&app, Method::POST, decide, &cleo_key, Some(&decision("suspend", "fraud"))).await;
        assert_eq!(again.status, 409, "{backend:?}: a suspended identity is not suspended twice");
        let unknown = call(&app, Method::POST, decide, &cleo_key, Some(&decision("bless", "x"))).await;
        assert_eq!(unknown.status, 400, "{backend:?}");
        let silent = call(&app, Method::POST, decide, &cleo_key, Some(&decision("reinstate", " "))).await;
        assert_eq!(silent.status, 400, "{backend:?}: a decision needs a reason");
        let fiat = call(&app, Method::POST, decide, &cleo_key, Some(&decision("fiat_enable", "wires"))).await;
        assert_eq!((fiat.status, &fiat.body["changed"]), (200, &json!(true)), "{backend:?}: {:?}", fiat.body);
        let fiat = call(&app, Method::POST, decide, &cleo_key, Some(&decision("fiat_enable", "wires"))).await;
        assert_eq!(fiat.body["changed"], false, "{backend:?}: already enabled");
        let other = "/operator/v1/organizations/acme/identities/nobody/decisions";
        let missing = call(&app, Method::POST, other, &cleo_key, Some(&decision("suspend", "x"))).await;
        assert_eq!(missing.status, 404, "{backend:?}");

        // One history: the identity's trail and the audit log name Cleo.
        let trail = app.store().identity_actions("acme", "ana").await.unwrap();
        let named = format!("operator:{} (Cleo)", cleo.id);
        let actors: Vec<_> = trail.iter().map(|a| (a.event.as_str(), a.actor.as_str())).collect();
        assert_eq!(
            actors,
            [("Registered", named.as_str()), ("Suspended", named.as_str()), ("FIAT_ENABLED", named.as_str())],
            "{backend:?}"
        );
        let log = app.store().audit_entries(0, Some("acme"), 100).await.unwrap();
        let decided: Vec<_> = log
            .iter()
            .filter(|e| e.target_kind == "identity")
            .map(|e| (e.action.as_str(), e.actor.as_str()))
            .collect();
        let cleo_actor = format!("operator:{}", cleo.id);
        assert_eq!(
            decided,
            [
                ("identity.imported", cleo_actor.as_str()),
                ("identity.suspended", cleo_actor.as_str()),
                ("identity.fiat_enabled", cleo_actor.as_str())
            ],
            "{backend:?}"
        );

        // The log is compliance's and the admins' to read, not treasury's.
        let audit = "/operator/v1/audit";
        assert_eq!(call(&app, Method::GET, audit, &tom_key, None).await.status, 403, "{backend:?}");
        assert_eq!(call(&app, Method::GET, audit, &cleo_key, None).await.status, 200, "{backend:?}");

        // The last admin's last key stays: nobody could manage operators again.
        let keys = app.store().operator_keys(&admin.id).await.unwrap();
        let own = format!("/operator/v1/operator-keys/{}/revoke", keys[0].id);
        let answer = call(&app, Method::POST, &own, &admin_key, None).await;
        assert_eq!(answer.status, 409, "{backend:?}: {:?}", answer.body);
        assert!(answer.body["message"].as_str().unwrap().contains("no enabled admin"), "{:?}", answer.body);
        let still = call(&app, Method::GET, audit, &admin_key, None).await;
        assert_eq!(still.status, 200, "{backend:?}: the key still works");
    }
}

// The command line runs as a child process while this runtime serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_production_store_identity_decisions_go_through_the_service_or_break_glass() {
    for backend in BACKENDS {
        let app = spawn_app(backend, Chains::default(), RateLimit::default()).await;
        app.key("acme").await;
        let [_, (cleo, cleo_key), (_, tom_key)] = staff(&app).await;
        let import =
            ["identities", "import", "--organization", "acme", "--id", "ana", "--type", "INDIVIDUAL"];
        let out = cli(&app, &[&import[..], &["--reason", "migrated"]].concat(), None);
        assert!(out.status.success(), "{backend:?}: an unstamped store takes it: {}", text(&out));
        custody_indexer::start::stamp_environment(app.store(), Environment::Production).await.unwrap();

        let suspend = ["identities", "suspend", "ana", "--organization", "acme", "--reason", "fraud report"];
        let direct = cli(&app, &suspend, None);
        assert!(!direct.status.success(), "{backend:?}");
        assert!(text(&direct).contains("CUSTODY_INDEXER_SERVER") && text(&direct).contains("--break-glass"));

        let by =
            cli(&app, &[&suspend[..], &["--server", &app.base, "--by", "cleo"]].concat(), Some(&cleo_key));
        assert!(!by.status.success() && text(&by).contains("--by is refused"), "{}", text(&by));
        let remote =
            cli(&app, &[&suspend[..], &["--server", "http://ops.example.com"]].concat(), Some(&cleo_key));
        assert!(!remote.status.success() && text(&remote).contains("only over https"), "{}", text(&remote));

        let through = cli(&app, &[&suspend[..], &["--server", &app.base]].concat(), Some(&cleo_key));
        assert!(through.status.success(), "{backend:?}: {}", text(&through));
        assert_eq!(String::from_utf8_lossy(&through.stdout).trim(), "identity ana: ACTIVE/ -> SUSPENDED/");

        let reinstate = ["identities", "reinstate", "ana", "--organization", "acme", "--reason", "withdrawn"];
        // Break-glass is a person with a key holding the decision's role,
        // checked under the pepper a production store's keys are kept under.
        let glass = [&reinstate[..], &["--break-glass"]].concat();
        let refused = cli(&app, &glass, Some(&cleo_key));
        assert!(
            text(&refused).contains("CUSTODY_INDEXER_KEY_PEPPER_FILE"),
            "{backend:?}: {}",
            text(&refused)
        );
        let dir = tempfile::tempdir().unwrap();
        let pepper_file = dir.path().join("pepper");
        std::fs::write(&pepper_file, "a pepper of thirty-two bytes or more").unwrap();
        let pepper = custody_indexer::api_key::pepper::Pepper::from_file(&pepper_file).unwrap();
        custody_indexer::api_key::pepper::adopt(app.store(), Some(&pepper)).await.unwrap();
        let peppered = [("CUSTODY_INDEXER_KEY_PEPPER_FILE", pepper_file.to_str().unwrap())];
        let cli = |app: &App, args: &[&str], key: Option<&str>| cli_with(app, args, key, &peppered);
        let keyless = cli(&app, &glass, None);
        assert!(!keyless.status.success(), "{backend:?}: break-glass without a key");
        assert!(text(&keyless).contains("CUSTODY_INDEXER_OPERATOR_KEY"), "{}", text(&keyless));
        let treasury = cli(&app, &glass, Some(&tom_key));
        assert!(
            !treasury.status.success() && text(&treasury).contains("`compliance`"),
            "{}",
            text(&treasury)
        );
        let forged = cli(&app, &glass, Some(&format!("{}x", &cleo_key[..cleo_key.len() - 1])));
        assert!(!forged.status.success(), "{backend:?}: a key that is not one");
        let glass = cli(&app, &glass, Some(&cleo_key));
        assert!(glass.status.success(), "{backend:?}: {}", text(&glass));
        let log = app.store().audit_entries(0, Some("acme"), 100).await.unwrap();
        let last: Vec<_> = log.iter().rev().take(2).map(|e| (e.action.as_str(), e.actor.clone())).collect();
        assert_eq!(
            last,
            [
                ("identity.reinstated", format!("break-glass:{}", cleo.id)),
                ("identity.suspended", format!("operator:{}", cleo.id))
            ],
            "{backend:?}"
        );
        // The name beside it is the operator's and the process's real user,
        // whatever $USER says.
        let named = log.last().unwrap().actor_name.clone().unwrap();
        assert!(named.starts_with(&format!("{} (uid ", cleo.name)), "{named}");
        let spoofed = std::process::Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
            .args([&suspend[..], &["--break-glass"]].concat())
            .env("DATABASE_URL", &app.db.url)
            .env("CUSTODY_INDEXER_PII_KEY", common::db::TEST_PII_KEY)
            .env_remove("CUSTODY_INDEXER_SERVER")
            .env("CUSTODY_INDEXER_OPERATOR_KEY", &cleo_key)
            .env("CUSTODY_INDEXER_KEY_PEPPER_FILE", &pepper_file)
            .env("USER", "mallory")
            .env("USERNAME", "mallory")
            .output()
            .unwrap();
        assert!(spoofed.status.success(), "{}", text(&spoofed));
        let log = app.store().audit_entries(0, Some("acme"), 100).await.unwrap();
        assert_eq!(log.last().unwrap().actor_name.as_deref(), Some(named.as_str()), "{backend:?}");
        let verify = cli(&app, &["audit", "verify"], None);
        assert!(verify.status.success(), "{backend:?}: {}", text(&verify));
    }
}
