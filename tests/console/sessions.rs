//! Sessions and sign-in over real HTTP, on both stores: a new session id at
//! each sign-in, the cookie's flags, `Secure` off loopback, sessions shared
//! by instances and ended everywhere at sign-out, idle expiry, the doubling
//! delay after failed tries (alike for unknown emails), the CSRF token.

use alloy::transports::http::reqwest::header;

use super::{
    ADMIN_EMAIL, PASSWORD, Tenant,
    common::db::{BACKENDS, Backend},
};
use custody_indexer::{api::ApiState, config::Chains, environment::Environment};

pub use super::common::console::{FormOf, Page, client, csrf, enrol, get, post, read, sign_in};

#[tokio::test]
async fn sessions_are_new_at_each_sign_in_shared_by_instances_and_ended_everywhere() {
    for backend in BACKENDS {
        let tenant = Tenant::new(backend).await;
        let base = &tenant.app.base;
        assert_eq!(enrol(&tenant.enrol_link, PASSWORD).await.status, 200, "{backend:?}");
        assert_eq!(enrol(&tenant.enrol_link, PASSWORD).await.status, 404, "{backend:?}: a link works once");

        let first = sign_in(base, ADMIN_EMAIL, PASSWORD).await;
        assert_eq!(
            (first.status, first.location.as_str()),
            (303, "/console/"),
            "{backend:?}: {}",
            first.body
        );
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
            assert!(first.set_cookie.contains(flag), "{backend:?}: {}", first.set_cookie);
        }
        assert!(!first.set_cookie.contains("Secure"), "{backend:?}: loopback http");
        let second = sign_in(base, ADMIN_EMAIL, PASSWORD).await;
        let (a, b) = (first.cookie.unwrap(), second.cookie.unwrap());
        assert_ne!(a, b, "{backend:?}: each sign-in a new session id");

        assert!(first.hsts.is_empty(), "{backend:?}: no HSTS over loopback http");
        // Off loopback, the cookie is `__Host-` and Secure, for the whole
        // host, the answer keeps the browser to https, and only that
        // cookie is read there.
        let answer = client()
            .post(format!("{base}/console/sign-in"))
            .header(header::HOST, "console.example.com")
            .form_of(&[("email", ADMIN_EMAIL), ("password", PASSWORD)])
            .send()
            .await
            .unwrap();
        let off = read(answer).await;
        assert!(off.set_cookie.starts_with("__Host-console_session="), "{backend:?}: {}", off.set_cookie);
        for flag in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/;"] {
            assert!(
                format!("{};", off.set_cookie).contains(flag),
                "{backend:?}: {flag} in {}",
                off.set_cookie
            );
        }
        assert_eq!(off.hsts, "max-age=31536000", "{backend:?}");
        let token = off.set_cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string();
        let as_host = |cookie: String| {
            client()
                .get(format!("{base}/console/keys"))
                .header(header::HOST, "console.example.com")
                .header(header::COOKIE, cookie)
                .send()
        };
        let planted = read(as_host(format!("console_session={token}")).await.unwrap()).await;
        assert_eq!(planted.status, 303, "{backend:?}: the plain cookie is not read off loopback");
        let kept = read(as_host(format!("__Host-console_session={token}")).await.unwrap()).await;
        assert_eq!(kept.status, 200, "{backend:?}: {}", kept.body);

        // Another instance knows the session; sign-out there ends it here.
        let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
        let other = tenant.app.another_configured(Chains::default(), sandbox).await;
        let keys = get(&other.base, "/console/keys", Some(&a)).await;
        assert_eq!(keys.status, 200, "{backend:?}: {}", keys.body);
        let out = post(&other.base, "/console/sign-out", Some(&a), &[("csrf", &csrf(&keys.body))]).await;
        assert_eq!((out.status, out.location.as_str()), (303, "/console/sign-in"), "{backend:?}");
        let after = get(base, "/console/keys", Some(&a)).await;
        assert_eq!((after.status, after.location.as_str()), (303, "/console/sign-in"), "{backend:?}");
        assert_eq!(
            get(base, "/console/keys", Some(&b)).await.status,
            200,
            "{backend:?}: the other session lives"
        );

        // Sign-out everywhere ends every session of the user.
        let keys = get(base, "/console/keys", Some(&b)).await;
        let third = sign_in(base, ADMIN_EMAIL, PASSWORD).await.cookie.unwrap();
        let everywhere = [("csrf", csrf(&keys.body)), ("everywhere", "1".into())];
        let everywhere: Vec<(&str, &str)> = everywhere.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(post(base, "/console/sign-out", Some(&b), &everywhere).await.status, 303);
        assert_eq!(get(base, "/console/keys", Some(&third)).await.status, 303, "{backend:?}");

        // Idle for more than 30 minutes: over.
        let idle = sign_in(base, ADMIN_EMAIL, PASSWORD).await.cookie.unwrap();
        assert_eq!(get(base, "/console/keys", Some(&idle)).await.status, 200);
        let long_ago = custody_indexer::store::now_micros() - 31 * 60 * 1_000_000;
        let pool = sqlx::AnyPool::connect(&tenant.app.db.url).await.unwrap();
        sqlx::query("UPDATE console_sessions SET last_seen_at = $1")
            .bind(long_ago)
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(get(base, "/console/keys", Some(&idle)).await.status, 303, "{backend:?}: idle");
    }
}

#[tokio::test]
async fn failed_sign_ins_slow_further_tries_alike_for_known_and_unknown_emails() {
    for backend in BACKENDS {
        let tenant = Tenant::new(backend).await;
        let base = &tenant.app.base;
        enrol(&tenant.enrol_link, PASSWORD).await;
        for email in [ADMIN_EMAIL, "nobody@acme.example"] {
            let mut messages = Vec::new();
            for _ in 0..5 {
                let wrong = sign_in(base, email, "not the password!").await;
                assert_eq!(wrong.status, 401, "{backend:?} {email}");
                messages.push(message(&wrong.body));
            }
            // Within the delay, however slow the machine hashed the tries.
            failed_now(&tenant).await;
            let slowed = sign_in(base, email, PASSWORD).await;
            assert_eq!(slowed.status, 429, "{backend:?} {email}: even the right password waits");
            assert!(slowed.cookie.is_none());
            messages.push(message(&slowed.body));
            assert_eq!(
                messages,
                [
                    vec!["the email, password or code is not right".to_string(); 5],
                    vec!["too many failed sign-ins for this email: try again in 1 s".to_string()]
                ]
                .concat(),
                "{backend:?} {email}: the same answers whether the email exists or not"
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let after = sign_in(base, ADMIN_EMAIL, PASSWORD).await;
        assert_eq!(after.status, 303, "{backend:?}: after the delay");
    }
}

/// A sign-in as a proxy in front passes it on, from `address`.
async fn sign_in_from(base: &str, address: &str, email: &str, password: &str) -> Page {
    let answer = client()
        .post(format!("{base}/console/sign-in"))
        .header("x-forwarded-for", format!("198.51.100.99, {address}"))
        .form_of(&[("email", email), ("password", password)])
        .send()
        .await
        .unwrap();
    read(answer).await
}

/// Every counted failure made the last one now, however slowly the
/// machine hashed them.
async fn failed_now(tenant: &Tenant) {
    let pool = sqlx::AnyPool::connect(&tenant.app.db.url).await.unwrap();
    sqlx::query("UPDATE console_sign_in_failures SET last_failed_at = $1")
        .bind(custody_indexer::store::now_micros())
        .execute(&pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn sign_ins_are_slowed_per_email_and_client_and_per_client_behind_trusted_proxies() {
    let loopback: Vec<ipnet::IpNet> = vec!["127.0.0.1/32".parse().unwrap(), "::1/128".parse().unwrap()];
    let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
    let tenant =
        Tenant::configured(Backend::Sqlite, |state| sandbox(state).with_trusted_proxies(loopback)).await;
    let base = &tenant.app.base;
    enrol(&tenant.enrol_link, PASSWORD).await;
    for _ in 0..5 {
        assert_eq!(sign_in_from(base, "203.0.113.7", ADMIN_EMAIL, "not the password!").await.status, 401);
    }
    failed_now(&tenant).await;
    let slowed = sign_in_from(base, "203.0.113.7", ADMIN_EMAIL, PASSWORD).await;
    assert_eq!(slowed.status, 429, "the email from that address waits");
    let elsewhere = sign_in_from(base, "203.0.113.8", ADMIN_EMAIL, PASSWORD).await;
    assert_eq!(
        elsewhere.status, 303,
        "the same email from another address is not held up: {}",
        elsewhere.body
    );

    // Sign-ins that succeed are no failures of their address.
    for _ in 0..21 {
        assert_eq!(sign_in_from(base, "203.0.113.10", ADMIN_EMAIL, PASSWORD).await.status, 303);
    }
    // One address trying many emails waits past twenty failures, for any email.
    for n in 0..20 {
        let email = format!("guess{n}@acme.example");
        assert_eq!(sign_in_from(base, "203.0.113.9", &email, "not the password!").await.status, 401);
    }
    failed_now(&tenant).await;
    let flooded = sign_in_from(base, "203.0.113.9", ADMIN_EMAIL, PASSWORD).await;
    assert_eq!(flooded.status, 429);
    assert!(message(&flooded.body).contains("from this address"), "{}", flooded.body);

    // Without trusted proxies, a forwarded address is the client's own word:
    // the peer is the client.
    let plain = Tenant::new(Backend::Sqlite).await;
    enrol(&plain.enrol_link, PASSWORD).await;
    for _ in 0..5 {
        sign_in_from(&plain.app.base, "203.0.113.7", ADMIN_EMAIL, "not the password!").await;
    }
    failed_now(&plain).await;
    let claimed = sign_in_from(&plain.app.base, "203.0.113.8", ADMIN_EMAIL, PASSWORD).await;
    assert_eq!(claimed.status, 429, "a header the client wrote changes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_sent_at_once_cannot_all_pass_the_delay() {
    let tenant = Tenant::new(Backend::Postgres).await;
    let base = tenant.app.base.clone();
    enrol(&tenant.enrol_link, PASSWORD).await;
    let tries = (0..16).map(|_| {
        let base = base.clone();
        tokio::spawn(async move { sign_in(&base, ADMIN_EMAIL, "not the password!").await.status })
    });
    let statuses: Vec<u16> = futures::future::join_all(tries).await.into_iter().map(Result::unwrap).collect();
    let checked = statuses.iter().filter(|s| **s == 401).count();
    assert!((1..=5).contains(&checked), "each try counted before its check: {statuses:?}");
    assert!(statuses.iter().all(|s| *s == 401 || *s == 429), "{statuses:?}");
}

/// The message a page shows.
fn message(body: &str) -> String {
    let (_, rest) = body.split_once("role=\"alert\">").expect("a message");
    rest.split('<').next().unwrap().to_string()
}

#[tokio::test]
async fn a_state_changing_request_needs_the_sessions_csrf_token_and_the_same_origin() {
    let tenant = Tenant::new(Backend::Postgres).await;
    let base = &tenant.app.base;
    enrol(&tenant.enrol_link, PASSWORD).await;
    let session = sign_in(base, ADMIN_EMAIL, PASSWORD).await.cookie.unwrap();
    let other = sign_in(base, ADMIN_EMAIL, PASSWORD).await.cookie.unwrap();
    let token = csrf(&get(base, "/console/keys", Some(&session)).await.body);
    let other_token = csrf(&get(base, "/console/keys", Some(&other)).await.body);
    assert_ne!(token, other_token);

    let refused = [vec![("name", "no token")], vec![("name", "other session's"), ("csrf", &other_token)]];
    for form in refused {
        assert_eq!(post(base, "/console/keys", Some(&session), &form).await.status, 403, "{form:?}");
    }
    let foreign = client()
        .post(format!("{base}/console/keys"))
        .header(header::COOKIE, format!("console_session={session}"))
        .header(header::ORIGIN, "https://evil.example")
        .form_of(&[("name", "cross-site"), ("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403, "another site's form");
    assert!(tenant.app.store().api_keys(Some("acme")).await.unwrap().is_empty());

    let created =
        post(base, "/console/keys", Some(&session), &[("name", "with token"), ("csrf", &token)]).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(created.body.contains("cik_"));
    // No session: to sign-in, whatever the form says.
    let anonymous = post(base, "/console/keys", None, &[("name", "x"), ("csrf", &token)]).await;
    assert_eq!((anonymous.status, anonymous.location.as_str()), (303, "/console/sign-in"));
}
