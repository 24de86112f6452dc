//! People changes take two admins, in production, through real HTTP on
//! both stores: genesis adds admins alone until two have enrolled and then
//! ends for good (disabling an admin does not reopen it), disabling the
//! admins it added that never enrolled; every grant is a
//! change that neither its proposer nor its target decides; taking power
//! away applies at once; a change expires after seven days undecided; a
//! change row written with plain SQL is never applied; and no answer holds
//! another person's key or enrol link: invitations reach their owner by
//! mail, through a real SMTP listener.

use crate::common;

use alloy::transports::http::reqwest::Method;
use common::{
    api::{Answer, App, send_json, spawn_app, spawn_configured},
    db::BACKENDS,
    governance::{enrol, enrol_at},
    smtp::Smtp,
};
use custody_indexer::{
    api::{ApiState, RateLimit},
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Role, manage},
    people::{self, rules::TenantRole},
};
use serde_json::{Value, json};

async fn call(app: &App, method: Method, path: &str, key: &str, body: Value) -> Answer {
    send_json(method, &format!("{}{path}", app.base), Some(key), Some(&body)).await
}

fn person(name: &str, roles: &[&str]) -> Value {
    json!({ "name": name, "email": format!("{}@example.com", name.to_lowercase()), "roles": roles })
}

/// Proposes `body` at `path` as `proposer`, answered 202: the change's id.
async fn proposed(app: &App, method: Method, path: &str, proposer: &str, body: Value) -> String {
    let answer = call(app, method, path, proposer, body).await;
    assert_eq!(answer.status, 202, "{path}: {:?}", answer.body);
    let change = &answer.body["change"];
    assert_eq!(change["status"], "PENDING");
    for field in ["id", "kind", "status", "proposed_by", "target", "created_at", "decided_by", "decided_at"] {
        assert!(change.get(field).is_some(), "{field} in {change}");
    }
    change["id"].as_str().unwrap().to_string()
}

fn backend_index(backend: common::db::Backend) -> usize {
    BACKENDS.iter().position(|b| *b == backend).unwrap()
}

async fn decide(app: &App, change: &str, verb: &str, key: &str) -> Answer {
    let body = if verb == "refuse" { json!({ "reason": "not agreed" }) } else { json!({}) };
    call(app, Method::POST, &format!("/operator/v1/changes/{change}/{verb}"), key, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_admin_alone_cannot_grant_a_money_role_nor_reopen_genesis() {
    let smtp = Smtp::start().await;
    for backend in BACKENDS {
        let public = "https://custody.example";
        let mail = |state: ApiState| state.with_mail(Some(smtp.settings(public)));
        let app = spawn_configured(backend, Chains::default(), mail).await;
        let store = app.store();
        // The mailed link, on the public address, opened on this service
        // (as the public address's proxy forwards it).
        let mailed = |link: String| {
            assert!(link.starts_with(&format!("{public}/console/enrol/")), "{link}");
            format!("{}{}", app.base, &link[public.len()..])
        };
        let new =
            NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
        let ada = manage::bootstrap(store, Environment::Production, &Actor::local(None), new).await.unwrap();
        let (ada_id, ada_key) = (ada.operator.id.clone(), ada.key.unwrap().token.to_string());
        let again =
            NewOperator { name: "Eve".into(), email: "eve@example.com".into(), roles: vec![Role::Admin] };
        let refused = manage::bootstrap(store, Environment::Production, &Actor::local(None), again).await;
        assert!(refused.unwrap_err().to_string().contains("an admin has existed"), "{backend:?}");

        // Genesis: admins alone, and no other role.
        let ops = "/operator/v1/operators";
        let tom = call(&app, Method::POST, ops, &ada_key, person("Tom", &["treasury"])).await;
        assert_eq!(
            (tom.status, tom.body["code"].as_str()),
            (409, Some("CONFLICT")),
            "{backend:?}: {:?}",
            tom.body
        );
        let both = call(&app, Method::POST, ops, &ada_key, person("Tim", &["admin", "treasury"])).await;
        assert_eq!(both.status, 409, "{backend:?}: a money role beside admin");
        let bea = call(&app, Method::POST, ops, &ada_key, person("Bea", &["admin"])).await;
        assert_eq!(bea.status, 201, "{backend:?}: {:?}", bea.body);
        assert!(bea.body.get("key").is_none() && bea.body.get("enrol_path").is_none(), "{:?}", bea.body);
        assert_eq!(bea.body["invitation"], "sent to bea@example.com");
        let bea_id = bea.body["operator"]["id"].as_str().unwrap().to_string();
        // One admin enrolled is not two: genesis goes on.
        assert_eq!(enrol(&app.base, store, &ada_id).await, None);
        let cid = call(&app, Method::POST, ops, &ada_key, person("Cid", &["admin"])).await;
        assert_eq!(cid.status, 201, "{backend:?}: {:?}", cid.body);
        let cid_id = cid.body["operator"]["id"].as_str().unwrap().to_string();
        // Bea's link reaches Bea alone, by mail; a fresh one voids it.
        let first = mailed(smtp.link_to("bea@example.com", 2 * backend_index(backend) + 1).await);
        let path = format!("{ops}/{bea_id}/invitation");
        let again = call(&app, Method::POST, &path, &ada_key, json!({})).await;
        assert_eq!((again.status, again.body["invitation"].as_str()), (200, Some("sent to bea@example.com")));
        assert!(again.body.get("enrol_path").is_none(), "{:?}", again.body);
        let second = mailed(smtp.link_to("bea@example.com", 2 * backend_index(backend) + 2).await);
        assert_ne!(first, second);
        let gone = common::api::send(Method::GET, &first, None).await;
        assert_eq!(gone.status, 404, "{backend:?}: the first link is void");
        let bea_key = enrol_at(&second).await.expect("Bea's own first key");
        assert!(!smtp.messages().iter().any(|m| m.contains(&bea_key[4..])), "a key is never mailed");

        // Genesis ended with Bea: Cid, added alone and never enrolled, is
        // disabled then; its mailed link is void and none is reissued.
        let cid_mail = |n: usize| smtp.link_to("cid@example.com", 2 * backend_index(backend) + n);
        let dormant = mailed(cid_mail(1).await);
        let gone = common::api::send(Method::GET, &dormant, None).await;
        assert_eq!(gone.status, 404, "{backend:?}: a dormant admin's link is void");
        let invitation = format!("{ops}/{cid_id}/invitation");
        let reissued = call(&app, Method::POST, &invitation, &ada_key, json!({})).await;
        assert_eq!(reissued.status, 400, "{backend:?}: {:?}", reissued.body);
        assert!(reissued.body["message"].as_str().unwrap().contains("disabled"), "{:?}", reissued.body);
        // It comes back only through an approved enabling, and enrols anew.
        let path = format!("{ops}/{cid_id}/enable");
        let back = proposed(&app, Method::POST, &path, &ada_key, json!({ "reason": "enrols now" })).await;
        assert_eq!(decide(&app, &back, "approve", &bea_key).await.status, 200, "{backend:?}");
        assert_eq!(call(&app, Method::POST, &invitation, &ada_key, json!({})).await.status, 200);
        let cid_key = enrol_at(&mailed(cid_mail(2).await)).await.expect("Cid's own first key");

        // Two have enrolled: every grant now waits for another admin.
        let dan = proposed(&app, Method::POST, ops, &ada_key, person("Dan", &["admin"])).await;
        let tom = proposed(&app, Method::POST, ops, &ada_key, person("Tom", &["treasury"])).await;
        let twice = call(&app, Method::POST, ops, &bea_key, person("Tom", &["compliance"])).await;
        assert_eq!(twice.status, 409, "{backend:?}: an email a pending change proposes");
        let own = decide(&app, &tom, "approve", &ada_key).await;
        assert_eq!(own.status, 403, "{backend:?}: its proposer: {:?}", own.body);
        let approved = decide(&app, &tom, "approve", &bea_key).await;
        assert_eq!(approved.status, 200, "{backend:?}: {:?}", approved.body);
        assert_eq!(approved.body["change"]["status"], "APPLIED");
        assert_eq!(approved.body["change"]["decided_by"], bea_id.as_str());
        let created = &approved.body["created"];
        assert!(created.get("key").is_none() && created.get("enrol_path").is_none(), "{created}");
        let tom_id = created["operator"]["id"].as_str().unwrap().to_string();
        assert_eq!(decide(&app, &tom, "approve", &bea_key).await.status, 409, "{backend:?}: decided once");
        let tom_key = enrol(&app.base, store, &tom_id).await.expect("Tom's own first key");
        let refused = call(&app, Method::GET, ops, &tom_key, json!({})).await;
        assert_eq!(refused.status, 403, "{backend:?}: Tom's key authenticates, as treasury");

        // Disabling the other admin applies at once and reopens nothing.
        let path = format!("{ops}/{bea_id}/disable");
        let disabled = call(&app, Method::POST, &path, &ada_key, json!({ "reason": "left" })).await;
        assert_eq!(disabled.status, 200, "{backend:?}: {:?}", disabled.body);
        let eve = call(&app, Method::POST, ops, &ada_key, person("Eve", &["admin"])).await;
        assert_eq!(eve.status, 202, "{backend:?}: genesis ended for good: {:?}", eve.body);
        assert_eq!(decide(&app, &dan, "approve", &bea_key).await.status, 401, "{backend:?}: disabled");

        // Enabling is a grant: a third admin, Cid, decides it.
        let path = format!("{ops}/{bea_id}/enable");
        let enable = proposed(&app, Method::POST, &path, &ada_key, json!({ "reason": "back" })).await;
        let refused = decide(&app, &enable, "refuse", &cid_key).await;
        assert_eq!((refused.status, refused.body["change"]["status"].as_str()), (200, Some("REFUSED")));
        assert_eq!(decide(&app, &enable, "approve", &cid_key).await.status, 409, "{backend:?}: refused");

        // Roles: adding waits, and the change's target does not decide it;
        // removing applies at once.
        let path = format!("{ops}/{cid_id}/roles");
        let add = json!({ "roles": ["admin", "compliance"], "reason": "covers compliance" });
        let grant = proposed(&app, Method::PUT, &path, &ada_key, add).await;
        let target = decide(&app, &grant, "approve", &cid_key).await;
        assert_eq!(target.status, 403, "{backend:?}: its target: {:?}", target.body);
        let path = format!("{ops}/{tom_id}/roles");
        let remove = json!({ "roles": ["treasury"], "reason": "same" });
        assert_eq!(call(&app, Method::PUT, &path, &ada_key, remove).await.status, 200, "{backend:?}");

        // Seven days undecided: expired, and no longer decidable.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        sqlx::query("UPDATE operator_changes SET created_at = created_at - 604800000001 WHERE id = $1")
            .bind(&dan)
            .execute(&pool)
            .await
            .unwrap();
        let listed = call(&app, Method::GET, "/operator/v1/changes", &cid_key, json!({})).await;
        let dan_change = listed.body["changes"].as_array().unwrap().iter().find(|c| c["id"] == dan.as_str());
        assert_eq!(dan_change.unwrap()["status"], "EXPIRED", "{backend:?}");
        assert_eq!(decide(&app, &dan, "approve", &cid_key).await.status, 409, "{backend:?}: expired");

        // A change written with plain SQL has no proposal in the log.
        sqlx::query(
            "INSERT INTO operator_changes (id, kind, status, proposed_by, target, proposal, created_at)
             VALUES ('chg_forged', 'operator.roles', 'PENDING', $1, $2, '{\"roles\":[\"admin\",\"treasury\"]}', $3)",
        )
        .bind(&ada_id)
        .bind(&tom_id)
        .bind(custody_indexer::store::now_micros())
        .execute(&pool)
        .await
        .unwrap();
        let forged = decide(&app, "chg_forged", "approve", &cid_key).await;
        assert_eq!(forged.status, 409, "{backend:?}: {:?}", forged.body);
        assert!(forged.body["message"].as_str().unwrap().contains("written outside the service"));

        // Every step is in the log.
        let log = call(&app, Method::GET, "/operator/v1/audit?limit=200", &ada_key, json!({})).await;
        let actions: Vec<_> =
            log.body["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
        for action in [
            "operator.genesis_created",
            "operator.genesis_ended",
            "operator_change.proposed",
            "operator_change.approved",
            "operator_change.refused",
            "operator_change.expired",
            "operator.roles_set",
            "operator.disabled",
            "operator.enabled",
        ] {
            assert!(actions.contains(&action), "{backend:?}: {action} in {actions:?}");
        }
        assert_eq!(actions.iter().filter(|a| **a == "operator.genesis_ended").count(), 1, "{backend:?}");
    }
}

#[tokio::test]
async fn production_invites_no_one_without_mail_naming_the_variables() {
    let app = spawn_app(common::db::Backend::Sqlite, Chains::default(), RateLimit::default()).await;
    let new = NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
    let ada =
        manage::bootstrap(app.store(), Environment::Production, &Actor::local(None), new).await.unwrap();
    let key = ada.key.unwrap().token.to_string();
    let refused = call(&app, Method::POST, "/operator/v1/operators", &key, person("Bea", &["admin"])).await;
    assert_eq!((refused.status, refused.body["code"].as_str()), (503, Some("MAIL_UNAVAILABLE")));
    let message = refused.body["message"].as_str().unwrap();
    for name in ["CUSTODY_INDEXER_SMTP_URL", "CUSTODY_INDEXER_EMAIL_FROM", "CUSTODY_INDEXER_PUBLIC_URL"] {
        assert!(message.contains(name), "{message}");
    }
    assert!(app.store().operators().await.unwrap().len() == 1, "nothing made");
}

/// A production app with mail through `smtp` (links on `public`), past
/// genesis: Ada (the bootstrap's admin) and Bea, both enrolled; their ids
/// and keys.
async fn past_genesis(backend: common::db::Backend, smtp: &Smtp) -> (App, [(String, String); 2]) {
    let settings = smtp.settings("https://custody.example");
    let app =
        spawn_configured(backend, Chains::default(), |state: ApiState| state.with_mail(Some(settings))).await;
    let new = NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
    let ada =
        manage::bootstrap(app.store(), Environment::Production, &Actor::local(None), new).await.unwrap();
    let ada = (ada.operator.id.clone(), ada.key.unwrap().token.to_string());
    let admins = common::governance::past_genesis(&app.base, app.store(), ada).await;
    (app, [admins.first, admins.second])
}

/// Posts an urlencoded `form` to `url`: its status.
async fn post_form(url: &str, form: &'static str) -> u16 {
    let client = alloy::transports::http::reqwest::Client::new();
    let request = client.post(url).header("content-type", "application/x-www-form-urlencoded").body(form);
    request.send().await.unwrap().status().as_u16()
}

async fn sql(app: &App, statement: &str, binds: &[&str]) {
    let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
    let mut query = sqlx::query(statement);
    for bind in binds {
        query = query.bind(*bind);
    }
    query.execute(&pool).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_owner_cannot_bend_a_change_nor_an_invitation() {
    let smtp = Smtp::start().await;
    for backend in BACKENDS {
        let (app, [(ada_id, ada), (_, bea)]) = past_genesis(backend, &smtp).await;
        let ops = "/operator/v1/operators";

        // A proposal rewritten in the store is not what its entry recorded.
        let tom = proposed(&app, Method::POST, ops, &ada, person("Tom", &["compliance"])).await;
        let bent = r#"{"name":"Tom","email":"tom@example.com","roles":["admin","treasury"]}"#;
        sql(&app, "UPDATE operator_changes SET proposal = $1 WHERE id = $2", &[bent, &tom]).await;
        let refused = decide(&app, &tom, "approve", &bea).await;
        assert_eq!(refused.status, 409, "{backend:?}: {:?}", refused.body);
        assert!(refused.body["message"].as_str().unwrap().contains("written outside the service"));
        // Nor is a proposer swapped so that the real one approves it.
        let ok = r#"{"name":"Tom","email":"tom@example.com","roles":["compliance"]}"#;
        sql(&app, "UPDATE operator_changes SET proposal = $1 WHERE id = $2", &[ok, &tom]).await;
        let bea_id = app.store().operators().await.unwrap()[1].id.clone();
        sql(&app, "UPDATE operator_changes SET proposed_by = $1 WHERE id = $2", &[&bea_id, &tom]).await;
        assert_eq!(decide(&app, &tom, "approve", &ada).await.status, 409, "{backend:?}: swapped proposer");
        sql(&app, "UPDATE operator_changes SET proposed_by = $1 WHERE id = $2", &[&ada_id, &tom]).await;
        // A refused change set back to pending stays refused.
        assert_eq!(decide(&app, &tom, "refuse", &bea).await.status, 200);
        sql(&app, "UPDATE operator_changes SET status = 'PENDING', decided_by = NULL WHERE id = $1", &[&tom])
            .await;
        assert_eq!(decide(&app, &tom, "approve", &bea).await.status, 409, "{backend:?}: decided in the log");

        // A display name is no address: what is shown is what is mailed.
        let sly =
            json!({ "name": "Al", "email": "al@example.com<mallory@evil.example>", "roles": ["treasury"] });
        assert_eq!(call(&app, Method::POST, ops, &ada, sly).await.status, 400, "{backend:?}");

        // An approved operator; its enrolment through a link of its own.
        let cy = proposed(&app, Method::POST, ops, &ada, person("Cy", &["treasury"])).await;
        let approved = decide(&app, &cy, "approve", &bea).await;
        assert_eq!(approved.status, 200, "{backend:?}: {:?}", approved.body);

        // A link row written with plain SQL enrols no one.
        let cy_id = approved.body["created"]["operator"]["id"].as_str().unwrap().to_string();
        let token = "a-link-the-database-owner-made";
        let hash = people::link_hash(token);
        sql(
            &app,
            "INSERT INTO console_enrolments (token_hash, user_id, expires_at)
             SELECT $1, id, 9000000000000000 FROM console_users WHERE operator_id = $2",
            &[&hash, &cy_id],
        )
        .await;
        let link = format!("{}/console/enrol/{token}", app.base);
        let form =
            "password=correct+horse+battery+staple&again=correct+horse+battery+staple&totp_secret=&code=";
        let answer = post_form(&link, form).await;
        assert_eq!(answer, 404, "{backend:?}: a forged link");
        let live = app.store().operator_keys(&cy_id).await.unwrap();
        assert!(live.is_empty(), "{backend:?}: no key for a forged enrolment");
        // Nor does a tenant's link moved onto the operator's sign-in.
        custody_indexer::operators::tenants::create_bare_organization(app.store(), "acme", None)
            .await
            .unwrap();
        let invited = people::invite(
            app.store(),
            "acme",
            ("ten@acme.example", TenantRole::Viewer),
            &Actor::System,
            None,
        )
        .await
        .unwrap();
        let tenant_token = invited.enrol_path.rsplit('/').next().unwrap().to_string();
        let moved =
            "UPDATE console_enrolments SET user_id = (SELECT id FROM console_users WHERE operator_id = $1)
             WHERE token_hash = $2";
        sql(&app, moved, &[&cy_id, &people::link_hash(&tenant_token)]).await;
        let link = format!("{}/console/enrol/{tenant_token}", app.base);
        let answer = post_form(&link, form).await;
        assert_eq!(answer, 404, "{backend:?}: a link made for someone else");

        // A revoked key's proposals are refused with it.
        let dee = proposed(&app, Method::POST, ops, &bea, person("Dee", &["compliance"])).await;
        let bea_key_id = bea.split('_').nth(1).unwrap();
        let revoke = format!("/operator/v1/operator-keys/{bea_key_id}/revoke");
        assert_eq!(call(&app, Method::POST, &revoke, &ada, json!({})).await.status, 204, "{backend:?}");
        let listed = call(&app, Method::GET, "/operator/v1/changes", &ada, json!({})).await;
        let dee =
            listed.body["changes"].as_array().unwrap().iter().find(|c| c["id"] == dee.as_str()).cloned();
        assert_eq!(dee.unwrap()["status"], "REFUSED", "{backend:?}");
    }
}

#[tokio::test]
async fn an_invitation_readdressed_in_the_store_is_sent_to_no_one() {
    let smtp = Smtp::start().await;
    let unsent = common::smtp::unsent("https://custody.example");
    let app = spawn_configured(common::db::Backend::Postgres, Chains::default(), |state: ApiState| {
        state.with_mail(Some(unsent))
    })
    .await;
    let new = NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
    let ada =
        manage::bootstrap(app.store(), Environment::Production, &Actor::local(None), new).await.unwrap();
    let ada = ada.key.unwrap().token.to_string();
    for name in ["Bea", "Cid"] {
        let added = call(&app, Method::POST, "/operator/v1/operators", &ada, person(name, &["admin"])).await;
        assert_eq!(added.status, 201, "{:?}", added.body);
    }
    // Queued, not sent (the service's relay is down, and the service
    // stopped); then Bea's is readdressed by whoever writes the database.
    app.stop();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let readdress =
        "UPDATE mail_outbox SET to_address = 'mallory@evil.example' WHERE to_address = 'bea@example.com'";
    sql(&app, readdress, &[]).await;
    sql(&app, "UPDATE mail_outbox SET next_at = 0, claimed_until = NULL", &[]).await;
    let settings = smtp.settings("https://custody.example");
    let transport = custody_indexer::mail::sender::transport(&settings).unwrap();
    let sent = custody_indexer::mail::sender::send_due(app.store(), &settings, &transport).await.unwrap();
    assert_eq!(sent, 1, "Cid's invitation only");
    let link = smtp.link_to("cid@example.com", 1).await;
    assert!(link.starts_with("https://custody.example/console/enrol/"), "{link}");
    assert!(smtp.messages().iter().all(|m| !m.contains("mallory")), "nothing to the new address");
}
