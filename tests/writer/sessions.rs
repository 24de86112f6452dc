//! Rows that authenticate, written with SQL: a session inserted with the
//! SHA-256 of a chosen token (as tried on a `dev` store, and once more as
//! if the writer could key it), a session moved to another user, a password
//! hash, a role raised, an API key's owner repointed, an operator's roles
//! raised. Each signs no one in and makes nothing, while the service's own
//! rows do; `audit verify` names every row changed.

use super::{
    ADMIN_EMAIL, PASSWORD, World,
    common::{
        console::{csrf, enrol, get, post, sign_in},
        db::BACKENDS,
    },
};
use alloy::transports::http::reqwest::Method;
use argon2::password_hash::PasswordHasher;
use custody_indexer::{
    api_key::sha256_hex,
    audit::{Actor, verify},
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
