//! Rows that authenticate, written with SQL: a session inserted with the
//! SHA-256 of a chosen token (as tried on a `dev` store, and once more as
//! if the writer could key it), a session moved to another user, a password
//! hash, a role raised, an API key's owner repointed, an operator's roles
//! raised. Each signs no one in and makes nothing, while the service's own
//! rows do; `audit verify` names every row changed. Rows rolled back with
//! their older MACs grant nothing the log took away, even once the owner
//! strips the MACs of the entries that took it.

use super::{
    ADMIN_EMAIL, PASSWORD, World,
    common::{
        api::seed_operator,
        console::{csrf, enrol, get, post, sign_in},
        db::BACKENDS,
        writer::drop_guards,
    },
};
use alloy::transports::http::reqwest::Method;
use argon2::password_hash::PasswordHasher;
use custody_indexer::{
    api_key::sha256_hex,
    audit::{Actor, verify},
    environment::Environment,
    operators::{NewOperator, Role, taking},
    people::{self, rules::TenantRole},
    store::now_micros,
};

const SIGN_IN: (u16, &str) = (303, "/console/sign-in");

#[tokio::test]
async fn a_session_row_written_with_sql_signs_no_one_in_and_makes_nothing() {
    for backend in BACKENDS {
        let world = World::new(backend).await;
        let (base, store) = (&world.app.base, world.app.store());
        let page = get(base, "/console/keys", Some(&world.session)).await;
        assert_eq!(page.status, 200, "{backend:?}: the service's own session");
        let token = csrf(&page.body);
        let made =
            post(base, "/console/keys", Some(&world.session), &[("name", "ci"), ("csrf", &token)]).await;
        assert_eq!(made.status, 201, "{backend:?}: {}", made.body);
        assert_eq!(store.api_keys(Some("acme")).await.unwrap().len(), 1);

        let ada = store.console_users_of("acme").await.unwrap()[0].id.clone();
        let insert = |id_hash: String| {
            format!(
                "INSERT INTO console_sessions (id_hash, user_id, csrf, created_at, last_seen_at) \
                 VALUES ('{id_hash}', '{ada}', 'chosen-csrf', {now}, {now})",
                now = now_micros()
            )
        };
        // The attack as tried: the SHA-256 of a chosen token.
        let chosen = "a-session-the-database-writer-chose";
        world.sql(&insert(sha256_hex(chosen.as_bytes())), &[]).await;
        // And as if the writer could key it: the row still has no MAC.
        let keyed = "a-session-keyed-as-the-service-keys-them";
        world.sql(&insert(people::session_hash(keyed)), &[]).await;
        for forged in [chosen, keyed] {
            let page = get(base, "/console/keys", Some(forged)).await;
            assert_eq!((page.status, page.location.as_str()), SIGN_IN, "{backend:?}: {forged}");
            let form = [("name", "forged"), ("csrf", "chosen-csrf")];
            let page = post(base, "/console/keys", Some(forged), &form).await;
            assert_eq!((page.status, page.location.as_str()), SIGN_IN, "{backend:?}: {forged}");
        }
        assert_eq!(store.api_keys(Some("acme")).await.unwrap().len(), 1, "{backend:?}: nothing made");

        // A live session of the service moved to another user: ended for both.
        let bo = people::invite(store, "acme", ("bo@acme.example", TenantRole::Viewer), &Actor::System, None)
            .await
            .unwrap();
        let moved = format!(
            "UPDATE console_sessions SET user_id = '{}' WHERE id_hash = '{}'",
            bo.user.id,
            people::session_hash(&world.session)
        );
        world.sql(&moved, &[]).await;
        let page = get(base, "/console/keys", Some(&world.session)).await;
        assert_eq!((page.status, page.location.as_str()), SIGN_IN, "{backend:?}: a session moved");

        // Only the service's sign-in is in the log.
        let entries = store.audit_entries(0, None, 1000).await.unwrap();
        let signed_in: Vec<_> = entries.iter().filter(|e| e.action == "console_user.signed_in").collect();
        assert_eq!(signed_in.len(), 1, "{backend:?}");
        assert_eq!(
            (signed_in[0].target_id.as_str(), signed_in[0].organization_id.as_deref()),
            (ada.as_str(), Some("acme"))
        );
        let report = verify::verify(store, &[], None).await.unwrap();
        for id in
            [sha256_hex(chosen.as_bytes()), people::session_hash(keyed), people::session_hash(&world.session)]
        {
            assert!(
                report.unsealed.contains(&format!("console_sessions {id}")),
                "{backend:?}: {:?}",
                report.unsealed
            );
        }
    }
}

#[tokio::test]
async fn users_keys_and_operators_changed_with_sql_authenticate_nothing() {
    for backend in BACKENDS {
        let world = World::new(backend).await;
        let (base, store) = (&world.app.base, world.app.store());
        // A viewer, enrolled by the service.
        let who = ("vi@acme.example", TenantRole::Viewer);
        let viewer = people::invite(store, "acme", who, &Actor::System, None).await.unwrap();
        assert_eq!(enrol(&format!("{base}{}", viewer.enrol_path), PASSWORD).await.status, 200);
        let viewer_session = sign_in(base, who.0, PASSWORD).await.cookie.unwrap();
        // Its organization's activity shows its people's sign-ins.
        let activity = get(base, "/console/activity", Some(&viewer_session)).await;
        assert_eq!(activity.status, 200, "{backend:?}");
        assert!(
            activity.body.contains("console_user.signed_in") && activity.body.contains(who.0),
            "{backend:?}"
        );
        let key = world.app.key("acme").await;
        assert_eq!(world.app.get("/v2/webhooks", &key).await.status, 200, "{backend:?}: the service's key");
        let operator_key = world.operator.key.as_ref().unwrap().token.clone();
        let operators = world.app.request(Method::GET, "/operator/v1/operators", Some(&operator_key)).await;
        assert_eq!(operators.status, 200, "{backend:?}: the service's operator key");

        // The writer's changes, one of each kind.
        // A hash made as the writer makes it: argon2id, without the pepper.
        let attacker =
            argon2::Argon2::default().hash_password(b"the writer's own password").unwrap().to_string();
        world
            .sql(
                "UPDATE console_users SET password_hash = $1 WHERE email_key = $2",
                &[&attacker, ADMIN_EMAIL],
            )
            .await;
        world.sql("UPDATE console_users SET role = 'admin' WHERE email_key = $1", &[who.0]).await;
        let key_id = custody_indexer::api_key::key_id(&key).unwrap().to_string();
        custody_indexer::operators::tenants::create_bare_organization(store, "globex", None).await.unwrap();
        world.sql("UPDATE api_keys SET organization_id = 'globex' WHERE id = $1", &[&key_id]).await;
        let operator_id = world.operator.operator.id.clone();
        world
            .sql("UPDATE operators SET roles = 'admin,compliance,treasury' WHERE id = $1", &[&operator_id])
            .await;

        let refused = sign_in(base, ADMIN_EMAIL, "the writer's own password").await;
        assert_eq!(refused.status, 401, "{backend:?}: a password hash written with SQL");
        assert_eq!(sign_in(base, ADMIN_EMAIL, PASSWORD).await.status, 401, "{backend:?}: the row is no user");
        let page = get(base, "/console/activity", Some(&viewer_session)).await;
        assert_eq!((page.status, page.location.as_str()), SIGN_IN, "{backend:?}: a role raised");
        assert_eq!(sign_in(base, who.0, PASSWORD).await.status, 401, "{backend:?}: a role raised");
        assert_eq!(world.app.get("/v2/webhooks", &key).await.status, 401, "{backend:?}: a key repointed");
        let operators = world.app.request(Method::GET, "/operator/v1/operators", Some(&operator_key)).await;
        assert_eq!(operators.status, 401, "{backend:?}: an operator's roles raised");

        let report = verify::verify(store, &[], None).await.unwrap();
        let ada = store
            .console_users_of("acme")
            .await
            .unwrap()
            .into_iter()
            .find(|u| u.email == ADMIN_EMAIL)
            .unwrap();
        for row in [
            format!("console_users {}", ada.id),
            format!("console_users {}", viewer.user.id),
            format!("api_keys {key_id}"),
            format!("operators {operator_id}"),
        ] {
            assert!(report.unsealed.contains(&row), "{backend:?}: {row} in {:?}", report.unsealed);
        }
        assert!(!report.intact(), "{backend:?}");
    }
}

/// The `row_mac` of row `id` of `table`, as a writer keeps a copy.

#[tokio::test]
async fn a_row_rolled_back_with_its_older_mac_grants_nothing_the_log_took_away() {
    for backend in BACKENDS {
        let world = World::new(backend).await;
        let store = world.app.store();
        // An API key, and its row's MAC while it was live.
        let key = world.app.key("acme").await;
        let key_id = custody_indexer::api_key::key_id(&key).unwrap().to_string();
        let live_mac = world.row_mac("api_keys", &key_id).await;
        custody_indexer::api_key::manage::revoke(store, &key_id, &Actor::System).await.unwrap();
        assert_eq!(world.app.get("/v2/webhooks", &key).await.status, 401, "{backend:?}: revoked");
        let revived = "UPDATE api_keys SET revoked_at = NULL, row_mac = $1 WHERE id = $2";
        world.sql(revived, &[&live_mac, &key_id]).await;
        assert_eq!(
            world.app.get("/v2/webhooks", &key).await.status,
            401,
            "{backend:?}: a revoked key revived"
        );

        // An operator, and its row's MAC while it was enabled.
        let new = NewOperator {
            name: "Tess".into(),
            email: "tess@platform.example".into(),
            roles: vec![Role::Treasury],
        };
        let tess = seed_operator(store, &world.operator.operator, new).await;
        let tess_key = tess.key.as_ref().unwrap().token.clone();
        let enabled_mac = world.row_mac("operators", &tess.operator.id).await;
        let app = &world.app;
        let queues = |key: String| async move {
            app.request(Method::GET, "/operator/v1/changes", Some(&key)).await.status
        };
        // Authenticated, whatever its role may read there.
        assert_ne!(queues(tess_key.clone()).await, 401, "{backend:?}: the service's operator");
        taking::disable(store, Environment::Sandbox, &world.operator.operator, &tess.operator.id, "left")
            .await
            .unwrap();
        assert_eq!(queues(tess_key.clone()).await, 401, "{backend:?}: disabled");
        let enabled =
            "UPDATE operators SET disabled_at = NULL, disabled_reason = NULL, row_mac = $1 WHERE id = $2";
        world.sql(enabled, &[&enabled_mac, &tess.operator.id]).await;
        assert_eq!(queues(tess_key.clone()).await, 401, "{backend:?}: a disabled operator enabled again");

        // A person's row before enrolment, and the link it used: enrols no
        // one again (with the writer's password) once rolled back.
        let who = ("re@acme.example", TenantRole::Viewer);
        let invited = people::invite(store, "acme", who, &Actor::System, None).await.unwrap();
        let unenrolled = world.row_mac("console_users", &invited.user.id).await;
        let link = format!("{}{}", world.app.base, invited.enrol_path);
        assert_eq!(enrol(&link, PASSWORD).await.status, 200, "{backend:?}");
        let rolled = "UPDATE console_users SET password_hash = NULL, totp_secret = NULL, totp_last_step = NULL, \
                      row_mac = $1 WHERE id = $2";
        world.sql(rolled, &[&unenrolled, &invited.user.id]).await;
        world
            .sql("UPDATE console_enrolments SET used_at = NULL WHERE user_id = $1", &[&invited.user.id])
            .await;
        // A role the log took away, back with the row's older MAC.
        let boss = ("ro@acme.example", TenantRole::Admin);
        let ro = people::invite(store, "acme", boss, &Actor::System, None).await.unwrap();
        assert_eq!(enrol(&format!("{}{}", world.app.base, ro.enrol_path), PASSWORD).await.status, 200);
        let as_admin = world.row_mac("console_users", &ro.user.id).await;
        people::set_role(store, "acme", &ro.user.id, TenantRole::Viewer, &Actor::System).await.unwrap();
        assert_eq!(sign_in(&world.app.base, boss.0, PASSWORD).await.status, 303, "{backend:?}: a viewer now");
        let raised = "UPDATE console_users SET role = 'admin', row_mac = $1 WHERE id = $2";
        world.sql(raised, &[&as_admin, &ro.user.id]).await;
        assert_eq!(sign_in(&world.app.base, boss.0, PASSWORD).await.status, 401, "{backend:?}: a role back");

        let again = enrol(&link, "the writer's own password").await;
        assert_eq!(again.status, 404, "{backend:?}: a link replayed: {}", again.body);
        assert_eq!(
            sign_in(&world.app.base, who.0, "the writer's own password").await.status,
            401,
            "{backend:?}"
        );

        // The tables' owner drops the guards and strips the MACs of the
        // entries that took it all away (a MAC is not in its entry's hash:
        // the chain and the checkpoints stay as they were): still nothing.
        drop_guards(&world.pool, backend).await;
        let stripped = "UPDATE audit_log SET mac = NULL WHERE action = $1 AND target_id = $2";
        for (action, target) in [
            ("api_key.revoked", &key_id),
            ("operator.disabled", &tess.operator.id),
            ("console_user.role_set", &ro.user.id),
        ] {
            world.sql(stripped, &[action, target]).await;
        }
        assert_eq!(world.app.get("/v2/webhooks", &key).await.status, 401, "{backend:?}: a key, stripped");
        assert_eq!(queues(tess_key).await, 401, "{backend:?}: an operator, stripped");
        let status = sign_in(&world.app.base, boss.0, PASSWORD).await.status;
        assert_eq!(status, 401, "{backend:?}: a person, stripped");
    }
}

#[tokio::test]
async fn a_link_is_never_mailed_to_an_address_written_with_sql() {
    for backend in BACKENDS {
        let world = World::new(backend).await;
        let store = world.app.store();
        let who = ("late@acme.example", TenantRole::Viewer);
        let invited = people::invite(store, "acme", who, &Actor::System, None).await.unwrap();
        let fresh = people::reissue(store, "acme", &invited.user.id, &Actor::System, None).await;
        assert!(fresh.is_ok(), "{backend:?}: the service's own row");
        let readdressed = "UPDATE console_users SET email = 'mallory@evil.example' WHERE id = $1";
        world.sql(readdressed, &[&invited.user.id]).await;
        let refused =
            people::reissue(store, "acme", &invited.user.id, &Actor::System, None).await.unwrap_err();
        assert!(refused.to_string().contains("written outside the service"), "{backend:?}: {refused}");
    }
}
