//! An operator whose keys have all expired makes a new one in the console
//! (`/console/operator/keys`), in a real browser on a `production`
//! service: the expired key's refusal names that page; the password and a
//! fresh code are asked again; the key is shown once and works; a wrong
//! code makes none, nor does the page while a key is live.

use alloy::transports::http::reqwest::Method;
use custody_indexer::{
    audit::Actor,
    environment::Environment,
    operators::{NewOperator, Role, manage},
    people::totp,
    store::now_micros,
};

use super::{
    browser::Browser,
    common::{api::send_json, db::Backend, issuance::app},
    operators::sign_in,
};

const PASSWORD: &str = "operator console password";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_whose_keys_expired_makes_one_in_the_console() {
    let app = app(Backend::Sqlite, Environment::Production, None).await;
    let new = NewOperator {
        name: "cleo".into(),
        email: "cleo@platform.example".into(),
        roles: vec![Role::Compliance],
    };
    let created =
        manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), new).await.unwrap();
    let (cleo, old_key) = (created.operator.id.clone(), created.key.unwrap().token.to_string());
    let audit = format!("{}/operator/v1/audit", app.base);
    assert_eq!(send_json(Method::GET, &audit, Some(&old_key), None).await.status, 200);
    let browser = Browser::start("operator-keys").await;
    let link = format!("{}{}", app.base, created.enrol_path);
    let secret = sign_in(&browser, &app.base, "cleo", &link).await;
    // Every key of hers (the bootstrap's, and the one her enrolment made)
    // expires. This store has no pepper: its rows carry no MAC.
    let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
    sqlx::query("UPDATE operator_keys SET expires_at = $1 WHERE operator_id = $2")
        .bind(now_micros() - 1)
        .bind(&cleo)
        .execute(&pool)
        .await
        .unwrap();
    let expired = send_json(Method::GET, &audit, Some(&old_key), None).await;
    assert_eq!((expired.status, expired.body["code"].as_str()), (401, Some("KEY_EXPIRED")));
    let message = expired.body["message"].as_str().unwrap();
    assert!(message.contains("/console/operator/keys"), "{message}");

    browser.visit(&format!("{}/console/operator/keys", app.base), "operator-keys").await;
    // A wrong code makes no key.
    browser.fill("#password", PASSWORD).await;
    browser.fill("#code", "000000").await;
    browser.click("main form button[type=submit]").await;
    let said = browser.source().await;
    assert!(said.contains("role=\"alert\"") && said.contains("not right"), "{said}");
    // The password and the next step's code (the sign-in took this one).
    let next = totp::code(&secret, now_micros() + 30_000_000).unwrap();
    browser.fill("#password", PASSWORD).await;
    browser.fill("#code", &next).await;
    browser.click("main form button[type=submit]").await;
    browser.check("operator-key-made").await;
    let key = browser.text("#operator-key").await;
    assert!(key.starts_with("cio_"), "{key}");
    assert_eq!(send_json(Method::GET, &audit, Some(&key), None).await.status, 200, "the new key works");
    let log = send_json(Method::GET, &format!("{audit}?limit=1000"), Some(&key), None).await;
    let made = log.body["entries"].as_array().unwrap().iter().any(|e| {
        e.get("action").and_then(|a| a.as_str()) == Some("operator_key.created")
            && e["actor"] == format!("operator:{cleo}").as_str()
    });
    assert!(made, "made by its owner, in the log: {}", log.body);

    // With a live key the page offers none: the key makes the next one.
    browser.visit(&format!("{}/console/operator/keys", app.base), "operator-keys-live").await;
    assert!(browser.text("[role=alert]").await.contains("a key of yours is live"));
    assert!(browser.client.find(fantoccini::Locator::Css("main form")).await.is_err(), "no form");
}
