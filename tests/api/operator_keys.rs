//! Operator keys in production, through real HTTP on both stores: the
//! scripted enrolment offers a second factor and ends with the operator's
//! first key (90 days); further keys need a current code, last at most as
//! long as the key that asked, and go with it when it is revoked; an
//! expired key answers 401 `KEY_EXPIRED`; a key whose expiry is moved with
//! plain SQL fails `audit verify`.

use crate::common;

use alloy::transports::http::reqwest::{Method, header};
use common::{
    api::{App, send_json, send_raw, spawn_configured},
    db::BACKENDS,
    smtp::unsent,
};
use custody_indexer::{
    api::ApiState,
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Role, manage},
    people::{self, totp},
    store::now_micros,
};
use serde_json::{Value, json};

const DAY: i64 = 86_400_000_000;

/// Enrols `operator` through the scripted door with a second factor: its
/// secret and the answer's key and expiry.
async fn scripted_enrolment(app: &App, operator: &str) -> (String, Value) {
    let path = people::operator_link(app.store(), operator, &Actor::local(None)).await.unwrap();
    let json_headers = [(header::ACCEPT.as_str(), "application/json")];
    let url = format!("{}{path}", app.base);
    let offered = send_raw(Method::GET, &url, None, None, &json_headers).await;
    assert_eq!(offered.status, 200, "{:?}", offered.body);
    let secret = offered.body["totp_secret"].as_str().unwrap().to_string();
    assert!(offered.body["otpauth_uri"].as_str().unwrap().starts_with("otpauth://totp/"));
    // A step back (within the allowed skew): the steps after it stay free
    // for the keys the test makes next.
    let without = json!({ "password": "correct horse battery staple" }).to_string();
    let refused = send_raw(Method::POST, &url, None, Some(without), &json_headers).await;
    assert_eq!(refused.status, 400, "production operators enrol with a second factor: {:?}", refused.body);
    let code = common::totp::a_step_back(&secret).await;
    let body = json!({ "password": "correct horse battery staple", "totp_code": code }).to_string();
    let enrolled = send_raw(Method::POST, &url, None, Some(body.clone()), &json_headers).await;
    assert_eq!(enrolled.status, 200, "{:?}", enrolled.body);
    let again = send_raw(Method::POST, &url, None, Some(body), &json_headers).await;
    assert_eq!(again.status, 404, "a link enrols once");
    (secret, enrolled.body)
}

fn micros(rfc3339: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339.as_str().unwrap()).unwrap().timestamp_micros()
}

async fn own_key(app: &App, key: &str, body: Value) -> (u16, Value) {
    let answer =
        send_json(Method::POST, &format!("{}/operator/v1/me/keys", app.base), Some(key), Some(&body)).await;
    (answer.status, answer.body)
}

#[tokio::test]
async fn an_operators_keys_are_their_own_expire_and_go_with_the_key_that_made_them() {
    for backend in BACKENDS {
        let mail = |state: ApiState| state.with_mail(Some(unsent("https://custody.example")));
        let app = spawn_configured(backend, Chains::default(), mail).await;
        let new =
            NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
        let ada =
            manage::bootstrap(app.store(), Environment::Production, &Actor::local(None), new).await.unwrap();
        let ada_key = ada.key.unwrap().token.to_string();
        let added = send_json(
            Method::POST,
            &format!("{}/operator/v1/operators", app.base),
            Some(&ada_key),
            Some(&json!({ "name": "Bea", "email": "bea@example.com", "roles": ["admin"] })),
        )
        .await;
        assert_eq!(added.status, 201, "{backend:?}: {:?}", added.body);
        let bea_id = added.body["operator"]["id"].as_str().unwrap().to_string();

        // The scripted enrolment ends with Bea's first key, 90 days.
        let (secret, enrolled) = scripted_enrolment(&app, &bea_id).await;
        let bea = enrolled["operator_key"].as_str().unwrap().to_string();
        let lasts = micros(&enrolled["expires_at"]) - now_micros();
        assert!((89 * DAY..=90 * DAY).contains(&lasts), "{backend:?}: {enrolled}");

        // Further keys: a current code, once; 1 to 365 days; never beyond
        // the asking key's own expiry.
        let next = |offset: i64| totp::code(&secret, now_micros() + offset).unwrap();
        let (status, body) = own_key(&app, &bea, json!({ "expires_in_days": 7 })).await;
        assert_eq!(status, 403, "{backend:?}: no code: {body}");
        let (status, _) = own_key(&app, &bea, json!({ "totp_code": "000000", "expires_in_days": 7 })).await;
        assert_eq!(status, 403, "{backend:?}: a wrong code");
        let code = next(0);
        let (status, _) = own_key(&app, &bea, json!({ "totp_code": code, "expires_in_days": 400 })).await;
        assert_eq!(status, 400, "{backend:?}: past 365 days");
        let (status, week) = own_key(&app, &bea, json!({ "totp_code": code, "expires_in_days": 7 })).await;
        assert_eq!(status, 201, "{backend:?}: {week}");
        assert!((6 * DAY..=7 * DAY).contains(&(micros(&week["expires_at"]) - now_micros())), "{week}");
        let (status, _) = own_key(&app, &bea, json!({ "totp_code": code, "expires_in_days": 7 })).await;
        assert_eq!(status, 403, "{backend:?}: a code is taken once");
        let week_key = week["token"].as_str().unwrap().to_string();
        let code = next(30_000_000);
        let (status, long) =
            own_key(&app, &week_key, json!({ "totp_code": code, "expires_in_days": 365 })).await;
        assert_eq!(status, 201, "{backend:?}: {long}");
        assert_eq!(long["expires_at"], week["expires_at"], "{backend:?}: never beyond its parent");
        let grandchild = long["token"].as_str().unwrap().to_string();

        // Revoking a key revokes the keys made with it.
        let week_id = week["id"].as_str().unwrap();
        let revoke = format!("{}/operator/v1/operator-keys/{week_id}/revoke", app.base);
        assert_eq!(send_json(Method::POST, &revoke, Some(&ada_key), Some(&json!({}))).await.status, 204);
        let audit = format!("{}/operator/v1/audit", app.base);
        assert_eq!(send_json(Method::GET, &audit, Some(&grandchild), None).await.status, 401, "{backend:?}");
        assert_eq!(send_json(Method::GET, &audit, Some(&bea), None).await.status, 200, "{backend:?}");

        // Listed with their expiry.
        let listed =
            send_json(Method::GET, &format!("{}/operator/v1/operators", app.base), Some(&ada_key), None)
                .await;
        let keys: Vec<&Value> = listed.body["operators"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|o| o["keys"].as_array().unwrap())
            .collect();
        assert!(keys.iter().all(|k| k["expires_at"].is_string()), "{backend:?}: {keys:?}");

        // An expired key answers KEY_EXPIRED; one moved later with SQL is
        // named by audit verify.
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        let bea_key_id = bea.split('_').nth(1).unwrap();
        sqlx::query("UPDATE operator_keys SET expires_at = 1 WHERE id = $1")
            .bind(bea_key_id)
            .execute(&pool)
            .await
            .unwrap();
        let expired = send_json(Method::GET, &audit, Some(&bea), None).await;
        assert_eq!(
            (expired.status, expired.body["code"].as_str()),
            (401, Some("KEY_EXPIRED")),
            "{backend:?}"
        );
        sqlx::query("UPDATE operator_keys SET expires_at = 9000000000000000 WHERE id = $1")
            .bind(bea_key_id)
            .execute(&pool)
            .await
            .unwrap();
        let report = custody_indexer::audit::verify::verify(app.store(), &[], None).await.unwrap();
        let named: Vec<String> = report.unexplained.iter().map(ToString::to_string).collect();
        assert!(
            named.iter().any(|f| f.contains(bea_key_id) && f.contains("expires later than the log set it")),
            "{backend:?}: {named:?}"
        );
    }
}
