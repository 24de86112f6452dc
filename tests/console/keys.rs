//! A tenant's admin in a real browser: enrols from the link `users invite`
//! printed, signs in, creates a key, sees its secret once, uses it, finds
//! it nowhere after a reload, revokes it; a form without its CSRF token is
//! refused; the session cookie has its flags; another organization's key
//! answers 404.

use alloy::transports::http::reqwest;
use custody_indexer::console::COOKIE;

use super::{ADMIN_EMAIL, PASSWORD, Tenant, browser::Browser, common::db::Backend};

async fn status(base: &str, path: &str, key: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Enrols and signs in the tenant's admin; ends on the keys page.
pub async fn enrol_and_sign_in(browser: &Browser, tenant: &Tenant) {
    browser.visit(&tenant.enrol_link, "enrol").await;
    assert!(browser.text("header .environment").await.contains("SANDBOX"));
    browser.fill("#password", PASSWORD).await;
    browser.fill("#again", PASSWORD).await;
    browser.click("form button[type=submit]").await;
    assert!(browser.text("h1").await.contains("enrolled"), "{}", browser.source().await);
    browser.check("enrolled").await;

    browser.visit(&format!("{}/console/sign-in", tenant.app.base), "sign-in").await;
    browser.fill("#email", ADMIN_EMAIL).await;
    browser.fill("#password", PASSWORD).await;
    browser.click("form button[type=submit]").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/console/keys", "{}", browser.source().await);
}

#[tokio::test]
async fn a_tenant_admin_creates_a_key_sees_it_once_uses_it_and_revokes_it() {
    let tenant = Tenant::new(Backend::Sqlite).await;
    let base = tenant.app.base.clone();
    let browser = Browser::start("keys").await;
    enrol_and_sign_in(&browser, &tenant).await;
    browser.check("keys-empty").await;

    // The cookie as the browser holds it.
    let cookie = browser.client.get_named_cookie(COOKIE).await.unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(cookie.same_site(), Some(cookie::SameSite::Strict));
    assert_ne!(cookie.secure(), Some(true), "plain http on loopback: not Secure, or the browser drops it");

    // Created: the secret on the answer only.
    browser.fill("#name", "payments backend 7").await;
    browser.click("form[action='/console/keys'] button[type=submit]").await;
    browser.check("key-created").await;
    let secret = browser.text("#new-secret").await;
    assert!(secret.starts_with("cik_"), "{secret}");
    assert_eq!(status(&base, "/v2/accounts", &secret).await, 200);

    browser.visit(&format!("{base}/console/keys"), "keys").await;
    let page = browser.source().await;
    // `cik_<id>_<secret>`: the secret's base64 may hold `_` itself.
    let (_, secret_part) = secret.strip_prefix("cik_").unwrap().split_once('_').unwrap();
    assert!(!page.contains(&secret) && !page.contains(secret_part), "the secret is shown again");
    assert!(page.contains("payments backend 7"));
    let row = browser.text("tbody tr").await;
    assert!(row.contains("Active") && !row.contains("never"), "used a moment ago: {row}");

    // A form sent without its CSRF token is refused, and changes nothing.
    browser
        .client
        .execute("document.querySelector(\"form[action='/console/keys'] input[name=csrf]\").remove()", vec![])
        .await
        .unwrap();
    browser.fill("#name", "forged").await;
    browser.click("form[action='/console/keys'] button[type=submit]").await;
    assert_eq!(browser.text("h1").await, "403");
    browser.check("csrf-refused").await;
    let keys = tenant.app.store().api_keys(Some("acme")).await.unwrap();
    assert_eq!(keys.len(), 1, "no key made without the token");

    // Another organization's key: not found, and not revoked.
    let other = tenant.app.key("globex").await;
    let other_id = custody_indexer::api_key::key_id(&other).unwrap().to_string();
    browser.visit(&format!("{base}/console/keys/{other_id}"), "other-organization").await;
    assert_eq!(browser.text("h1").await, "404");
    let revoke = format!(
        "const done = arguments[0]; const csrf = document.body.getAttribute('hx-headers');
         fetch('/console/keys/{other_id}/revoke', {{ method: 'POST', headers: JSON.parse(csrf) }})
           .then(r => done(r.status));"
    );
    browser.visit(&format!("{base}/console/keys"), "keys").await;
    let answer = browser.client.execute_async(&revoke, vec![]).await.unwrap();
    assert_eq!(answer, 404, "another organization's key");
    assert_eq!(status(&base, "/v2/accounts", &other).await, 200, "globex's key still works");

    // Revoked: refused at once.
    browser.click("tbody tr button.danger").await;
    browser.check("key-revoked").await;
    assert!(browser.text("tbody tr").await.contains("Revoked"));
    assert_eq!(status(&base, "/v2/accounts", &secret).await, 401);

    // Each change in the log, as the console user.
    let entries = tenant.app.store().audit_entries(0, Some("acme"), 100).await.unwrap();
    let user = tenant.app.store().console_users_of("acme").await.unwrap().remove(0);
    let by_user: Vec<_> = entries
        .iter()
        .filter(|e| e.actor == format!("user:{}", user.id))
        .map(|e| e.action.as_str())
        .collect();
    assert_eq!(
        by_user,
        ["console_user.enrolled", "console_user.signed_in", "api_key.created", "api_key.revoked"],
        "{entries:#?}"
    );
}
