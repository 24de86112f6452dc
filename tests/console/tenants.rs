//! Operators stay out of tenants, on a `production` service over real HTTP
//! and a real SMTP listener, on both stores: an organization made with its
//! contact address (`organizations create --contact-email`, audited); its
//! first console admin invited only at that address, as a change another
//! admin approves, the link mailed there and shown to no operator; any
//! other operator invitation into it refused (`409`), and none at an address
//! a database writer put in its row; the tenant's admin
//! invites their team from the console, each link mailed to the person
//! invited; the contact address changed only by an approved change, mailed
//! to the previous address as well as the new one. In
//! `sandbox` an operator still invites a first admin alone and sees the
//! link.

use alloy::transports::http::reqwest::Method;
use custody_indexer::{
    api::ApiState,
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Role, manage},
    people::totp,
    store::now_micros,
};
use serde_json::{Value, json};

use super::{
    PASSWORD,
    common::{
        api::{Answer, App, send_json, spawn_configured},
        db::{BACKENDS, Backend, TEST_PII_KEY},
        governance::past_genesis,
        smtp::Smtp,
    },
    sessions::{self, FormOf, client, get, post},
};

async fn call(app: &App, method: Method, path: &str, key: &str, body: Value) -> Answer {
    send_json(method, &format!("{}{path}", app.base), Some(key), Some(&body)).await
}

/// `organizations create` on the store, as the platform's engineer runs it.
fn create_organization(app: &App, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
        .args(["organizations", "create"])
        .args(args)
        .env("DATABASE_URL", &app.db.url)
        .env("CUSTODY_INDEXER_PII_KEY", TEST_PII_KEY)
        .env_remove("CUSTODY_INDEXER_SERVER")
        .output()
        .unwrap()
}

/// Enrols through `link` with the second factor; answers its secret.
async fn enrol(link: &str) -> String {
    let page = client().get(link).send().await.unwrap().text().await.unwrap();
    let (_, rest) = page.split_once("name=\"totp_secret\" value=\"").unwrap_or_else(|| panic!("{page}"));
    let secret = rest.split('"').next().unwrap().to_string();
    let code = super::common::totp::a_step_back(&secret).await;
    let fields = [("password", PASSWORD), ("again", PASSWORD), ("totp_secret", &secret), ("code", &code)];
    let answer = sessions::read(client().post(link).form_of(&fields).send().await.unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    secret
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_stay_out_of_tenants_and_invitations_reach_their_owner_by_mail() {
    let smtp = Smtp::start().await;
    for (round, backend) in BACKENDS.into_iter().enumerate() {
        let public = "https://custody.example";
        let app = spawn_configured(backend, Chains::default(), |state| {
            state.with_mail(Some(smtp.settings(public)))
        })
        .await;
        let (store, base) = (app.store(), app.base.clone());
        let opened = |link: String| {
            assert!(link.starts_with(&format!("{public}/console/enrol/")), "{link}");
            format!("{base}{}", &link[public.len()..])
        };
        let new = NewOperator {
            name: "Ada".into(),
            email: "ada@platform.example".into(),
            roles: vec![Role::Admin],
        };
        let ada = manage::bootstrap(store, Environment::Production, &Actor::local(None), new).await.unwrap();
        let admins = past_genesis(&base, store, (ada.operator.id, ada.key.unwrap().token.to_string())).await;
        let (first, second) = (admins.first.1.as_str(), admins.second.1.as_str());

        let made = create_organization(&app, &["--id", "acme", "--contact-email", "boss@acme.example"]);
        assert!(made.status.success(), "{backend:?}: {}", String::from_utf8_lossy(&made.stderr));
        let bad =
            create_organization(&app, &["--id", "globex", "--contact-email", "Boss <b@globex.example>"]);
        assert!(!bad.status.success(), "{backend:?}: a contact is one plain address");
        // A database writer readdresses an organization's contact with plain
        // SQL: no invitation goes there.
        let made = create_organization(&app, &["--id", "globex", "--contact-email", "boss@globex.example"]);
        assert!(made.status.success(), "{backend:?}: {}", String::from_utf8_lossy(&made.stderr));
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        sqlx::query("UPDATE organizations SET contact_email = 'mallory@evil.example' WHERE id = 'globex'")
            .execute(&pool)
            .await
            .unwrap();
        let globex = "/operator/v1/organizations/globex/users";
        let body = json!({ "email": "mallory@evil.example", "role": "admin" });
        let refused = call(&app, Method::POST, globex, first, body).await;
        assert_eq!(refused.status, 409, "{backend:?}: {:?}", refused.body);
        assert!(refused.body["message"].as_str().unwrap().contains("not the one the audit log recorded"));

        // The first admin: at the contact address only, and only as a change.
        let users = "/operator/v1/organizations/acme/users";
        let elsewhere = json!({ "email": "mallory@platform.example", "role": "admin" });
        let refused = call(&app, Method::POST, users, first, elsewhere).await;
        assert_eq!(refused.status, 400, "{backend:?}: {:?}", refused.body);
        assert!(
            refused.body["message"].as_str().unwrap().contains("boss@acme.example"),
            "{:?}",
            refused.body
        );
        let contact = json!({ "email": "boss@acme.example", "role": "admin" });
        let proposed = call(&app, Method::POST, users, first, contact).await;
        assert_eq!(proposed.status, 202, "{backend:?}: {:?}", proposed.body);
        assert_eq!(proposed.body["change"]["kind"], "organization.first_admin");
        assert_eq!(proposed.body["change"]["target"], "acme");
        let change = proposed.body["change"]["id"].as_str().unwrap().to_string();
        let approve = format!("/operator/v1/changes/{change}/approve");
        assert_eq!(call(&app, Method::POST, &approve, first, json!({})).await.status, 403, "{backend:?}");
        assert!(
            store.console_users_of("acme").await.unwrap().is_empty(),
            "{backend:?}: nobody before approval"
        );
        let approved = call(&app, Method::POST, &approve, second, json!({})).await;
        assert_eq!(approved.status, 200, "{backend:?}: {:?}", approved.body);
        assert_eq!(approved.body["invitation"], "sent to boss@acme.example");
        for answer in [&proposed.body, &approved.body] {
            assert!(!answer.to_string().contains("/console/enrol/"), "{backend:?}: no link to an operator");
        }
        // Each round mails the boss twice: the invitation, then the notice
        // of the contact address changed.
        let boss_link = opened(smtp.link_to("boss@acme.example", 2 * round + 1).await);

        // No other operator invitation into the organization.
        let viewer = json!({ "email": "vic@acme.example", "role": "viewer" });
        let refused = call(&app, Method::POST, users, second, viewer).await;
        assert_eq!(refused.status, 409, "{backend:?}: {:?}", refused.body);
        assert!(refused.body["message"].as_str().unwrap().contains("team"), "{:?}", refused.body);

        // The tenant's admin invites the team: each link mailed, none shown.
        let secret = enrol(&boss_link).await;
        let code = totp::code(&secret, now_micros()).unwrap();
        let fields = [("email", "boss@acme.example"), ("password", PASSWORD), ("code", code.as_str())];
        let signed = post(&base, "/console/sign-in", None, &fields).await;
        let session = signed.cookie.unwrap_or_else(|| panic!("{backend:?}: {}", signed.body));
        let csrf = sessions::csrf(&get(&base, "/console/team", Some(&session)).await.body);
        let form = [("csrf", csrf.as_str()), ("email", "dev@acme.example"), ("role", "developer")];
        let invited = post(&base, "/console/team", Some(&session), &form).await;
        assert_eq!(invited.status, 201, "{backend:?}: {}", invited.body);
        assert!(invited.body.contains("sent to dev@acme.example"), "{backend:?}: {}", invited.body);
        assert!(!invited.body.contains("/console/enrol/"), "{backend:?}: {}", invited.body);
        opened(smtp.link_to("dev@acme.example", round + 1).await);

        // The contact address changes only with a second admin.
        let contact = "/operator/v1/organizations/acme/contact";
        let body = json!({ "contact_email": "treasury@acme.example", "reason": "new treasurer" });
        let proposed = call(&app, Method::PUT, contact, first, body).await;
        assert_eq!(proposed.status, 202, "{backend:?}: {:?}", proposed.body);
        assert_eq!(proposed.body["change"]["kind"], "organization.contact");
        let held = store.organizations().await.unwrap().into_iter().find(|o| o.id == "acme").unwrap();
        assert_eq!(held.contact_email.as_deref(), Some("boss@acme.example"), "{backend:?}");
        let approve =
            format!("/operator/v1/changes/{}/approve", proposed.body["change"]["id"].as_str().unwrap());
        let approved = call(&app, Method::POST, &approve, second, json!({})).await;
        assert_eq!(approved.status, 200, "{backend:?}: {:?}", approved.body);
        assert_eq!(approved.body["organization"]["contact_email"], "treasury@acme.example");
        // Mailed to the previous address as well as the new one.
        for (to, count) in [("boss@acme.example", 2 * round + 2), ("treasury@acme.example", round + 1)] {
            let notice = smtp.messages_to(to, count).await.swap_remove(count - 1);
            assert!(notice.contains("Subject: The contact address of organization acme changed"), "{notice}");
            assert!(notice.contains("from boss@acme.example to treasury@acme.example"), "{notice}");
        }

        let entries = store.audit_entries(0, Some("acme"), 200).await.unwrap();
        let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
        for action in ["organization.created", "console_user.invited", "organization.contact_set"] {
            assert!(actions.contains(&action), "{backend:?}: {action} in {actions:?}");
        }
    }
}

#[tokio::test]
async fn in_sandbox_an_operator_invites_a_first_admin_alone_and_no_one_after() {
    let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
    let app = spawn_configured(Backend::Sqlite, Chains::default(), sandbox).await;
    custody_indexer::operators::tenants::create_bare_organization(app.store(), "acme", None).await.unwrap();
    let new =
        NewOperator { name: "Opal".into(), email: "opal@platform.example".into(), roles: vec![Role::Admin] };
    let opal = manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), new).await.unwrap();
    let key = opal.key.unwrap().token.to_string();
    let users = "/operator/v1/organizations/acme/users";
    let viewer =
        call(&app, Method::POST, users, &key, json!({ "email": "v@acme.example", "role": "viewer" })).await;
    assert_eq!(viewer.status, 400, "a first user is an admin: {:?}", viewer.body);
    let admin =
        call(&app, Method::POST, users, &key, json!({ "email": "a@acme.example", "role": "admin" })).await;
    assert_eq!(admin.status, 201, "{:?}", admin.body);
    assert!(admin.body["enrol_path"].as_str().unwrap().starts_with("/console/enrol/"));
    let again =
        call(&app, Method::POST, users, &key, json!({ "email": "b@acme.example", "role": "admin" })).await;
    assert_eq!(again.status, 409, "{:?}", again.body);
    // An invitation that lapsed unused does not lock the tenant out: it is
    // removed (and logged) when the next first admin is invited.
    let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
    sqlx::query("UPDATE console_enrolments SET expires_at = $1 WHERE used_at IS NULL")
        .bind(now_micros() - 1)
        .execute(&pool)
        .await
        .unwrap();
    let body = json!({ "email": "a@acme.example", "role": "admin" });
    let again = call(&app, Method::POST, users, &key, body).await;
    assert_eq!(again.status, 201, "{:?}", again.body);
    let entries = app.store().audit_entries(0, Some("acme"), 100).await.unwrap();
    let lapsed = entries.iter().filter(|e| e.action == "console_user.removed" && e.actor == "system").count();
    assert_eq!(lapsed, 1, "{entries:#?}");
    let body = json!({ "contact_email": "a@acme.example" });
    let set = call(&app, Method::PUT, "/operator/v1/organizations/acme/contact", &key, body).await;
    assert_eq!(
        (set.status, set.body["contact_email"].as_str()),
        (200, Some("a@acme.example")),
        "{:?}",
        set.body
    );
}
