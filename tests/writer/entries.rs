//! Audit entries appended with SQL, chained as the guards let them in but
//! without the MAC only the pepper makes: never authority. Every reader
//! that takes an entry as authority is given the service's entries from
//! before the log's authentication and after it, an entry without a MAC
//! from before it, and a writer's after it; a forged `operator.created` beside a link row enrols no one
//! and `audit verify` names it until it is acknowledged; the log's authentication over a store that
//! holds a forgery lists the forged principal for review, and nothing made
//! before it acts after it.

use super::{
    ADMIN_EMAIL, PASSWORD, World,
    common::{
        api::spawn_configured,
        cli::Env,
        console::{enrol, get, sign_in},
        db::{BACKENDS, TestDb},
        writer::{Forged, append_forged},
    },
    keyed,
};
use custody_indexer::{
    api::ApiState,
    api_key::pepper,
    audit::{self, Actor, Detail, Record, verify},
    config::Chains,
    environment::Environment,
    people::{self, rules::TenantRole},
    store::{Store, audit as log, now_micros},
};

const ACTION: &str = "operator.created";

fn link(target: &str) -> Detail {
    Detail { link_sha256: Some(format!("link-of-{target}")), ..Detail::default() }
}

/// The service's own entry about `target`.
async fn service_entry(store: &Store, target: &str) {
    let mut tx = store.begin().await.unwrap();
    let record = Record {
        actor: &Actor::System,
        action: ACTION,
        target_kind: "operator",
        target_id: target,
        organization_id: None,
        reason: None,
        request_id: None,
        detail: Some(link(target)),
    };
    audit::append(&mut tx, None, record).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn every_reader_takes_only_entries_made_with_the_pepper_as_authority() {
    keyed();
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
        service_entry(&db.store, "before").await;
        let forged = |target| Forged {
            actor: "system",
            action: ACTION,
            target_kind: "operator",
            target_id: target,
            organization_id: None,
            detail: Some(link(target)),
        };
        // As written before the store had the pepper, or by a writer then.
        append_forged(&pool, &db.store, forged("unkeyed")).await;
        pepper::for_keys(&db.store).await.unwrap();
        service_entry(&db.store, "after").await;
        append_forged(&pool, &db.store, forged("forged")).await;
        // (target, authority for a new effect, explains history)
        let table = [
            ("before", true, true),
            ("unkeyed", false, true),
            ("after", true, true),
            ("forged", false, false),
        ];
        for (target, admits, explains) in table {
            let mut tx = db.store.begin().await.unwrap();
            let case = format!("{backend:?}: the entry made {target}");
            let found = log::entry_about(&mut tx, ACTION, target).await.unwrap();
            assert_eq!(found.is_some(), admits, "{case}: a decision's reading");
            let linked = log::has_link(&mut tx, &format!("link-of-{target}"), &[target]).await.unwrap();
            assert_eq!(linked, admits, "{case}: an enrol link's");
            let logged = log::logged_entry_about(&mut tx, ACTION, target).await.unwrap();
            assert_eq!(logged.is_some(), explains, "{case}: a report's");
            let last =
                log::last_entry_about(&mut tx, (ACTION, "organization.contact_set"), target).await.unwrap();
            assert_eq!(last.is_some(), explains, "{case}: a contact address's");
            tx.rollback().await.unwrap();
        }
    }
}

// Multi-threaded: while this thread waits for a command line's process,
// the service in this process goes on (and ends a transaction it holds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_operator_entry_beside_a_link_row_enrols_no_one_and_verify_names_it() {
    for backend in BACKENDS {
        let world = World::new(backend).await;
        let (base, store) = (&world.app.base, world.app.store());
        let opal = world.operator.operator.id.clone();
        let keys_before = store.operator_keys(&opal).await.unwrap().len();
        // A sign-in for the real admin, its link keyed as if the writer
        // could, and the entry that would explain it.
        let token = "a-link-the-database-writer-made";
        let user = format!(
            "INSERT INTO console_users (id, email, email_key, operator_id, created_at) \
             VALUES ('u-forged', 'mallory@evil.example', 'mallory@evil.example', '{opal}', {})",
            now_micros()
        );
        world.sql(&user, &[]).await;
        let link_row = format!(
            "INSERT INTO console_enrolments (token_hash, user_id, expires_at) VALUES ('{}', 'u-forged', 9000000000000000)",
            people::link_hash(token)
        );
        world.sql(&link_row, &[]).await;
        let detail = Detail {
            link_sha256: Some(people::link_hash(token)),
            roles: Some(vec!["admin".into()]),
            ..Detail::default()
        };
        let forged = Forged {
            actor: "system",
            action: ACTION,
            target_kind: "operator",
            target_id: &opal,
            organization_id: None,
            detail: Some(detail),
        };
        let entry = append_forged(&world.pool, store, forged).await;
        let page = enrol(&format!("{base}/console/enrol/{token}"), PASSWORD).await;
        assert_eq!(page.status, 404, "{backend:?}: {}", page.body);
        assert_eq!(store.operator_keys(&opal).await.unwrap().len(), keys_before, "{backend:?}: no key made");

        // `audit verify`, a process of its own with the pepper, names it.
        let mut env = Env::with_chain_file("");
        env.database_url = world.app.db.url.clone();
        let out = env.command(&["audit", "verify"]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        let errors = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {said}{errors}");
        assert!(
            said.contains(&format!("audit entry {}: not authenticated", entry.seq)),
            "{backend:?}: {said}{errors}"
        );
        // Without the pepper it checks no MAC, and says so.
        let out =
            env.command(&["audit", "verify"]).env_remove("CUSTODY_INDEXER_KEY_PEPPER_FILE").output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("MACs not checked (no pepper)"));

        // Acknowledged (on this sandbox store, with the pepper): listed as
        // such, `audit verify` passes, and the entry is still no authority.
        let seq = entry.seq.to_string();
        let acknowledge =
            |seq: &str| env.command(&["audit", "acknowledge", seq, "--reason", "found, reported"]);
        let out = acknowledge(&seq).env_remove("CUSTODY_INDEXER_KEY_PEPPER_FILE").output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{backend:?}: without the pepper");
        let out = acknowledge(&seq).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{backend:?}: {said}{}", String::from_utf8_lossy(&out.stderr));
        let by: i64 = said.trim().rsplit(' ').next().unwrap().parse().unwrap();
        let again = acknowledge(&seq).output().unwrap();
        let refused = String::from_utf8_lossy(&again.stderr);
        assert!(refused.contains(&format!("was acknowledged by entry {by}")), "{backend:?}: {refused}");
        let authentic = acknowledge(&by.to_string()).output().unwrap();
        assert!(
            String::from_utf8_lossy(&authentic.stderr).contains("is authenticated: nothing to acknowledge")
        );
        // The writer's rows taken out as well: nothing is left to name.
        world.sql("DELETE FROM console_enrolments WHERE user_id = 'u-forged'", &[]).await;
        world.sql("DELETE FROM console_users WHERE id = 'u-forged'", &[]).await;
        let out = env.command(&["audit", "verify"]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        let errors = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {said}{errors}");
        let listed = format!("audit entry {}: not authenticated, acknowledged by entry {by}", entry.seq);
        assert!(said.contains(&listed), "{backend:?}: {said}");
        world.sql(&user, &[]).await;
        world.sql(&link_row, &[]).await;
        let page = enrol(&format!("{base}/console/enrol/{token}"), PASSWORD).await;
        assert_eq!(page.status, 404, "{backend:?}: still no authority");
    }
}

#[tokio::test]
async fn authentication_over_a_forgery_lists_it_and_nothing_made_before_acts() {
    keyed();
    for backend in BACKENDS {
        let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
        let app = spawn_configured(backend, Chains::default(), sandbox).await;
        let (base, store) = (&app.base, app.store());
        custody_indexer::operators::tenants::create_bare_organization(store, "acme", None).await.unwrap();
        let invited = |email: &'static str| {
            people::invite(store, "acme", (email, TenantRole::Admin), &Actor::System, None)
        };
        let ada = invited(ADMIN_EMAIL).await.unwrap();
        assert_eq!(enrol(&format!("{base}{}", ada.enrol_path), PASSWORD).await.status, 200);
        let session = sign_in(base, ADMIN_EMAIL, PASSWORD).await.cookie.unwrap();
        let unused = invited("late@acme.example").await.unwrap();
        // The writer's operator, with the entry that would explain it.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        sqlx::query(
            "INSERT INTO operators (id, name, email, roles, created_at) \
             VALUES ('op_forged', 'Mallory', 'mallory@evil.example', 'admin', 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
        let forged = Forged {
            actor: "system",
            action: ACTION,
            target_kind: "operator",
            target_id: "op_forged",
            organization_id: None,
            detail: Some(Detail::roles_of(&["admin"])),
        };
        append_forged(&pool, store, forged).await;
        // And a console user of its own in acme, as an admin.
        sqlx::query(
            "INSERT INTO console_users (id, email, email_key, organization_id, role, created_at) \
             VALUES ('u-mallory', 'mallory@evil.example', 'mallory@evil.example', 'acme', 'admin', 0)",
        )
        .execute(&pool)
        .await
        .unwrap();

        pepper::for_keys(store).await.unwrap();
        let report = verify::verify(store, &[], None).await.unwrap();
        let verify::Macs::Checked { entry } = &report.macs else { panic!("{backend:?}: {:?}", report.macs) };
        let detail = Detail::parse(entry.detail.as_deref().unwrap()).unwrap();
        let lines = detail.principals.unwrap();
        assert!(
            lines.contains(&"operator op_forged roles=admin enabled".to_string()),
            "{backend:?}: {lines:?}"
        );
        let people = [
            "console_user u-mallory organization=acme role=admin invited".to_string(),
            format!("console_user {} organization=acme role=admin enrolled", ada.user.id),
        ];
        for line in people {
            assert!(lines.contains(&line), "{backend:?}: {line} in {lines:?}");
        }
        assert_eq!(detail.principals_sha256.unwrap(), audit::authenticate::digest(&lines));
        assert!(report.intact(), "{backend:?}: found by the review alone: {report:?}");

        let page = get(base, "/console/", Some(&session)).await;
        assert_eq!(
            (page.status, page.location.as_str()),
            (303, "/console/sign-in"),
            "{backend:?}: a session"
        );
        let page = enrol(&format!("{base}{}", unused.enrol_path), PASSWORD).await;
        assert_eq!(page.status, 404, "{backend:?}: an unused link");
        assert_eq!(
            sign_in(base, ADMIN_EMAIL, PASSWORD).await.status,
            303,
            "{backend:?}: signing in again works"
        );
    }
}
