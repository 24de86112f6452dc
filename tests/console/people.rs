//! The console's people over real HTTP: enrolment's rules (a 12-character
//! password typed twice, a link used once within 24 hours, an optional
//! TOTP second factor whose codes are accepted once), `users invite` and
//! `operators create` printing enrol links, the team's roles and the last
//! admin kept, on both stores.

use super::{
    ADMIN_EMAIL, PASSWORD, Tenant, cli,
    common::db::BACKENDS,
    sessions::{FormOf, client, csrf, enrol, get, post, sign_in},
};
use custody_indexer::{
    api::ApiState,
    audit::Actor,
    environment::Environment,
    people::{self, rules::TenantRole, totp},
    store::now_micros,
};

#[tokio::test]
async fn enrolment_takes_a_long_password_once_and_an_optional_second_factor() {
    for backend in BACKENDS {
        let tenant = Tenant::new(backend).await;
        let base = &tenant.app.base;
        let link = &tenant.enrol_link;
        let page = client().get(link).send().await.unwrap().text().await.unwrap();
        let (_, rest) = page.split_once("name=\"totp_secret\" value=\"").unwrap();
        let secret = rest.split('"').next().unwrap().to_string();
        let send = |password: &'static str, again: &'static str, code: String| {
            let secret = secret.clone();
            async move {
                client()
                    .post(link)
                    .form_of(&[
                        ("password", password),
                        ("again", again),
                        ("totp_secret", &secret),
                        ("code", &code),
                    ])
                    .send()
                    .await
                    .unwrap()
            }
        };
        let short = send("elevenchars", "elevenchars", String::new()).await;
        assert_eq!(short.status(), 422, "{backend:?}");
        assert!(short.text().await.unwrap().contains("at least 12 characters"));
        let differ = send(PASSWORD, "correct horse battery!", String::new()).await;
        assert_eq!(differ.status(), 422, "{backend:?}");
        let wrong_code = send(PASSWORD, PASSWORD, "000000".into()).await;
        assert_eq!(wrong_code.status(), 422, "{backend:?}: a code not of the secret");

        let enrol_code = totp::code(&secret, now_micros()).unwrap();
        let enrolled = send(PASSWORD, PASSWORD, enrol_code.clone()).await;
        assert_eq!(enrolled.status(), 200, "{backend:?}");
        assert!(enrolled.text().await.unwrap().contains("with a second factor"));
        assert_eq!(client().get(link).send().await.unwrap().status(), 404, "{backend:?}: used");

        // Sign-in asks for the code; each code once, the enrolment's too.
        assert_eq!(sign_in(base, ADMIN_EMAIL, PASSWORD).await.status, 401, "{backend:?}: no code");
        let with = |code: &str| {
            [("email", ADMIN_EMAIL), ("password", PASSWORD), ("code", code)].map(|(k, v)| (k, v.to_string()))
        };
        let send_sign_in = |form: [(&'static str, String); 3]| async move {
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            post(base, "/console/sign-in", None, &form).await
        };
        assert_eq!(send_sign_in(with(&enrol_code)).await.status, 401, "{backend:?}: the enrolment's code");
        // The next step's code (accepted with one step of skew).
        let code = totp::code(&secret, now_micros() + 30_000_000).unwrap();
        let signed = send_sign_in(with(&code)).await;
        assert_eq!(signed.status, 303, "{backend:?}: {}", signed.body);
        assert_eq!(send_sign_in(with(&code)).await.status, 401, "{backend:?}: replayed code");

        // A link past its 24 hours leads nowhere (the admin's team invitation).
        let who = ("late@acme.example", TenantRole::Viewer);
        let invited = people::invite(tenant.app.store(), "acme", who, &Actor::System, None).await.unwrap();
        let late = format!("{base}{}", invited.enrol_path);
        let pool = sqlx::AnyPool::connect(&tenant.app.db.url).await.unwrap();
        sqlx::query("UPDATE console_enrolments SET expires_at = $1 WHERE used_at IS NULL")
            .bind(now_micros() - 1)
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(client().get(&late).send().await.unwrap().status(), 404, "{backend:?}: expired");
        assert_eq!(enrol(&late, PASSWORD).await.status, 404, "{backend:?}: expired");
    }
}

#[tokio::test]
async fn invitations_need_an_admin_and_sandbox_operators_get_an_enrol_link_above_their_key() {
    for backend in BACKENDS {
        let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
        let tenant = Tenant::configured(backend, sandbox).await;
        let app = &tenant.app;
        let args =
            ["users", "invite", "--organization", "acme", "--email", "x@acme.example", "--role", "admin"];
        let tenant_key = app.key("acme").await;
        let refused = cli(app, &args, &tenant_key).await;
        assert!(!refused.status.success(), "{backend:?}: a tenant's API key");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("401"), "{backend:?}");
        let unknown =
            ["users", "invite", "--organization", "nope", "--email", "y@acme.example", "--role", "admin"];
        let missing = cli(app, &unknown, &tenant.operator_key).await;
        assert!(String::from_utf8_lossy(&missing.stderr).contains("404"), "{backend:?}");
        let again = [
            "users",
            "invite",
            "--organization",
            "acme",
            "--email",
            " ADA@acme.example ",
            "--role",
            "viewer",
        ];
        let taken = cli(app, &again, &tenant.operator_key).await;
        assert!(
            String::from_utf8_lossy(&taken.stderr).contains("409"),
            "{backend:?}: the email, in any case"
        );

        let create = [
            "operators",
            "create",
            "--name",
            "Cleo",
            "--email",
            "cleo@platform.example",
            "--role",
            "compliance",
        ];
        let created = cli(app, &create, &tenant.operator_key).await;
        let stdout = String::from_utf8_lossy(&created.stdout).to_string();
        assert!(
            created.status.success(),
            "{backend:?}: {stdout}{}",
            String::from_utf8_lossy(&created.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert!(lines.last().unwrap().starts_with("cio_"), "{backend:?}: the key stays last: {stdout}");
        let link = lines
            .iter()
            .find_map(|l| l.strip_prefix("console enrol link (once, within 24 hours): "))
            .unwrap();
        assert!(link.starts_with(&format!("{}/console/enrol/", app.base)), "{stdout}");
        let cleo_key = lines.last().unwrap().to_string();
        let by_compliance = cli(app, &args, &cleo_key).await;
        assert!(String::from_utf8_lossy(&by_compliance.stderr).contains("403"), "{backend:?}: needs admin");

        assert_eq!(enrol(link, PASSWORD).await.status, 200, "{backend:?}");
        let signed = sign_in(&app.base, "cleo@platform.example", PASSWORD).await;
        assert_eq!(signed.status, 303, "{backend:?}");
        let cleo_session = signed.cookie.unwrap();
        let tenant_page = get(&app.base, "/console/keys", Some(&cleo_session)).await;
        assert_eq!(tenant_page.status, 404, "{backend:?}: an operator on a tenant's page");
        assert_eq!(get(&app.base, "/console/queues", Some(&cleo_session)).await.status, 200, "{backend:?}");

        // Disabled: its session ends at once, and it signs in no more.
        let cleo_id = stdout.lines().next().unwrap().split_whitespace().nth(1).unwrap().to_string();
        let disabled =
            cli(app, &["operators", "disable", &cleo_id, "--reason", "left"], &tenant.operator_key).await;
        assert!(disabled.status.success(), "{backend:?}: {}", String::from_utf8_lossy(&disabled.stderr));
        assert_eq!(get(&app.base, "/console/queues", Some(&cleo_session)).await.status, 303, "{backend:?}");
        assert_eq!(sign_in(&app.base, "cleo@platform.example", PASSWORD).await.status, 401, "{backend:?}");
    }
}

#[tokio::test]
async fn an_admin_runs_the_team_and_each_role_does_what_it_may() {
    for backend in BACKENDS {
        let tenant = Tenant::new(backend).await;
        let base = &tenant.app.base;
        enrol(&tenant.enrol_link, PASSWORD).await;
        let admin = sign_in(base, ADMIN_EMAIL, PASSWORD).await.cookie.unwrap();
        let token = csrf(&get(base, "/console/team", Some(&admin)).await.body);

        let mut sessions = Vec::new();
        for (email, role) in [("dev@acme.example", "developer"), ("viv@acme.example", "viewer")] {
            let invited = post(
                base,
                "/console/team",
                Some(&admin),
                &[("email", email), ("role", role), ("csrf", &token)],
            )
            .await;
            assert_eq!(invited.status, 201, "{backend:?}: {}", invited.body);
            let (_, rest) = invited.body.split_once("id=\"enrol-link\">").unwrap();
            let link = rest.split('<').next().unwrap();
            assert!(link.starts_with(&format!("{base}/console/enrol/")), "{link}");
            assert_eq!(enrol(link, PASSWORD).await.status, 200);
            sessions.push(sign_in(base, email, PASSWORD).await.cookie.unwrap());
        }
        let (developer, viewer) = (&sessions[0], &sessions[1]);
        let dev_token = csrf(&get(base, "/console/keys", Some(developer)).await.body);
        let bare =
            post(base, "/console/keys", Some(developer), &[("name", "dev key"), ("csrf", &dev_token)]).await;
        assert_eq!(bare.status, 403, "{backend:?}: only an admin makes a key without a public key");
        let signer = super::common::signing::ClientKey::p256();
        let form = [("name", "dev key"), ("public_key", signer.public_pem.as_str()), ("csrf", &dev_token)];
        let made = post(base, "/console/keys", Some(developer), &form).await;
        assert_eq!(made.status, 201, "{backend:?}: a developer makes keys that sign");
        let keys = tenant.app.store().api_keys(Some("acme")).await.unwrap();
        let made = keys.iter().find(|k| k.name == "dev key").unwrap();
        assert!(made.signature_algorithm.is_some(), "{backend:?}: paired at once");
        let unpair = format!("/console/keys/{}/unpair", made.id);
        let unpaired = post(base, &unpair, Some(developer), &[("csrf", &dev_token)]).await;
        assert_eq!(unpaired.status, 403, "{backend:?}: only an admin unpairs");
        assert_eq!(post(base, &unpair, Some(&admin), &[("csrf", &token)]).await.status, 303, "{backend:?}");
        let invite = [("email", "z@acme.example"), ("role", "admin"), ("csrf", dev_token.as_str())];
        assert_eq!(post(base, "/console/team", Some(developer), &invite).await.status, 403, "{backend:?}");
        let viewer_page = get(base, "/console/keys", Some(viewer)).await;
        assert!(viewer_page.body.contains("dev key") && !viewer_page.body.contains("Create key"));
        let view_token = csrf(&viewer_page.body);
        let refused =
            post(base, "/console/keys", Some(viewer), &[("name", "v"), ("csrf", &view_token)]).await;
        assert_eq!(refused.status, 403, "{backend:?}: a viewer reads only");

        // An invited admin who has not enrolled is no admin yet.
        let invite = [("email", "ad2@acme.example"), ("role", "admin"), ("csrf", token.as_str())];
        let first = post(base, "/console/team", Some(&admin), &invite).await;
        assert_eq!(first.status, 201, "{backend:?}");
        let first_link =
            first.body.split_once("id=\"enrol-link\">").unwrap().1.split('<').next().unwrap().to_string();

        // The last admin keeps its role; a removed user's session ends.
        let users = tenant.app.store().console_users_of("acme").await.unwrap();
        let id = |email: &str| users.iter().find(|u| u.email == email).unwrap().id.clone();
        let demote = format!("/console/team/{}/role", id(ADMIN_EMAIL));
        let last = post(base, &demote, Some(&admin), &[("role", "viewer"), ("csrf", &token)]).await;
        assert_eq!(last.status, 409, "{backend:?}: {}", last.body);
        let removed = post(
            base,
            &format!("/console/team/{}/remove", id("dev@acme.example")),
            Some(&admin),
            &[("csrf", &token)],
        )
        .await;
        assert_eq!(removed.status, 303, "{backend:?}");
        assert_eq!(get(base, "/console/keys", Some(developer)).await.status, 303, "{backend:?}: signed out");
        assert_eq!(sign_in(base, "dev@acme.example", PASSWORD).await.status, 401, "{backend:?}");
        let again = [("email", "dev@acme.example"), ("role", "viewer"), ("csrf", token.as_str())];
        assert_eq!(
            post(base, "/console/team", Some(&admin), &again).await.status,
            201,
            "{backend:?}: invited again"
        );

        // A new link for the admin who has not enrolled: the first works no more.
        let reissued = post(
            base,
            &format!("/console/team/{}/link", id("ad2@acme.example")),
            Some(&admin),
            &[("csrf", &token)],
        )
        .await;
        assert_eq!(reissued.status, 201, "{backend:?}: {}", reissued.body);
        let second_link =
            reissued.body.split_once("id=\"enrol-link\">").unwrap().1.split('<').next().unwrap().to_string();
        assert_eq!(enrol(&first_link, PASSWORD).await.status, 404, "{backend:?}: the first link");
        assert_eq!(enrol(&second_link, PASSWORD).await.status, 200, "{backend:?}: the new link");

        // Another organization's user: not found.
        custody_indexer::operators::tenants::create_bare_organization(tenant.app.store(), "globex", None)
            .await
            .unwrap();
        let args =
            ["users", "invite", "--organization", "globex", "--email", "g@globex.example", "--role", "admin"];
        assert!(cli(&tenant.app, &args, &tenant.operator_key).await.status.success());
        let users = tenant.app.store().console_users_of("globex").await.unwrap();
        let foreign = format!("/console/team/{}/remove", users[0].id);
        assert_eq!(post(base, &foreign, Some(&admin), &[("csrf", &token)]).await.status, 404, "{backend:?}");
    }
}

#[tokio::test]
async fn on_a_production_store_a_tenant_with_console_users_keeps_its_keys_in_the_console() {
    for backend in BACKENDS {
        let tenant = Tenant::new(backend).await;
        let app = &tenant.app;
        custody_indexer::operators::tenants::create_bare_organization(app.store(), "globex", None)
            .await
            .unwrap();
        custody_indexer::start::stamp_environment(app.store(), Environment::Production).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pepper = dir.path().join("pepper");
        std::fs::write(&pepper, "a pepper of thirty-two bytes or more").unwrap();
        let on_store = |args: &[&str]| {
            std::process::Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
                .args(args)
                .env("DATABASE_URL", &app.db.url)
                .env("CUSTODY_INDEXER_PII_KEY", super::common::db::TEST_PII_KEY)
                .env("CUSTODY_INDEXER_KEY_PEPPER_FILE", &pepper)
                .env_remove("CUSTODY_INDEXER_SERVER")
                .output()
                .unwrap()
        };
        let text = |out: &std::process::Output| {
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        };
        // acme has a console user (its invited admin): refused, naming the console.
        let refused = on_store(&["api-keys", "create", "--organization", "acme", "--name", "mine"]);
        assert!(!refused.status.success(), "{backend:?}: {}", text(&refused));
        assert!(text(&refused).contains("/console/keys"), "{}", text(&refused));
        // A tenant without console users (the README's quick start) is served.
        let made = on_store(&["api-keys", "create", "--organization", "globex", "--name", "ops"]);
        assert!(made.status.success(), "{backend:?}: {}", text(&made));
        let keys = app.store().api_keys(Some("acme")).await.unwrap();
        assert!(keys.is_empty(), "{backend:?}: nothing was made for acme");
    }
}
