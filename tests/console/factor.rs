//! A second factor for everyone who can move money, on a `production`
//! service over HTTP, on both stores: a tenant admin's enrolment without a
//! code (or with a code of a secret it chose itself) is refused and leaves
//! it unenrolled; a viewer enrols without one; a viewer made developer is
//! sent to `/console/second-factor` before any page until a current code is
//! entered, which ends every session it had (one opened with the password
//! alone among them), and its sign-ins ask for the code from then on. In `sandbox`
//! the factor stays optional (the other console tests enrol without one).

use custody_indexer::{
    audit::Actor,
    config::Chains,
    environment::Environment,
    people::{self, rules::TenantRole, totp},
    store::now_micros,
};

use super::{
    PASSWORD,
    common::{api::spawn_configured, db::BACKENDS},
    sessions::{self, FormOf, Page, client, get, post},
};

/// The value of the hidden field `name` of a page's form.
fn field(body: &str, name: &str) -> String {
    let (_, rest) = body.split_once(&format!("name=\"{name}\" value=\"")).expect(name);
    rest.split('"').next().unwrap().to_string()
}

/// Enrols `link` with the secret `secret` and `code` as the form sends them.
async fn enrol_with(link: &str, secret: &str, code: &str) -> Page {
    let fields = [("password", PASSWORD), ("again", PASSWORD), ("totp_secret", secret), ("code", code)];
    let answer = client().post(link).form_of(&fields).send().await.unwrap();
    sessions::read(answer).await
}

async fn sign_in(base: &str, email: &str, code: &str) -> Page {
    post(base, "/console/sign-in", None, &[("email", email), ("password", PASSWORD), ("code", code)]).await
}

/// The code of `secret` a step ago (within the skew allowed), never the
/// current one, so that the next sign-in's current code is still unused.
async fn earlier(secret: &str) -> String {
    super::common::totp::a_step_back(secret).await
}

#[tokio::test]
async fn in_production_admins_and_developers_need_a_second_factor_and_viewers_do_not() {
    for backend in BACKENDS {
        let app = spawn_configured(backend, Chains::default(), |state| {
            state.with_compliance(Environment::Production, Default::default())
        })
        .await;
        let (store, base) = (app.store(), app.base.as_str());
        custody_indexer::operators::tenants::create_bare_organization(store, "acme", None).await.unwrap();
        let actor = Actor::local(None);
        let ada = people::invite(store, "acme", ("ada@acme.example", TenantRole::Admin), &actor, None)
            .await
            .unwrap();
        let vic = people::invite(store, "acme", ("vic@acme.example", TenantRole::Viewer), &actor, None)
            .await
            .unwrap();
        let link = format!("{base}{}", ada.enrol_path);

        let page = client().get(&link).send().await.unwrap().text().await.unwrap();
        assert!(page.contains("data:image/svg+xml;base64,"), "{backend:?}: a QR code: {page}");
        assert!(!page.contains("(optional)"), "{backend:?}: {page}");
        let offered = field(&page, "totp_secret");
        let refused = enrol_with(&link, &offered, "").await;
        assert_eq!(refused.status, 422, "{backend:?}: {}", refused.body);
        assert!(refused.body.contains("a second factor is required"), "{backend:?}: {}", refused.body);
        // A secret of the person's own choosing is not the one offered.
        let chosen = totp::new_secret();
        let refused = enrol_with(&link, &chosen, &totp::code(&chosen, now_micros()).unwrap()).await;
        assert_eq!(refused.status, 422, "{backend:?}: {}", refused.body);
        let ada_user = store.console_user(&ada.user.id).await.unwrap().unwrap();
        assert!(!ada_user.enrolled, "{backend:?}: refused enrolments leave the admin unenrolled");
        let enrolled =
            enrol_with(&link, "ignored: the offered secret counts", &earlier(&offered).await).await;
        assert_eq!(enrolled.status, 200, "{backend:?}: {}", enrolled.body);
        let signed = sign_in(base, "ada@acme.example", "").await;
        assert_eq!(signed.status, 401, "{backend:?}: a password alone does not sign the admin in");
        let signed = sign_in(base, "ada@acme.example", &totp::code(&offered, now_micros()).unwrap()).await;
        assert_eq!(signed.status, 303, "{backend:?}: {}", signed.body);

        // A viewer may go without.
        let vic_link = format!("{base}{}", vic.enrol_path);
        assert_eq!(sessions::enrol(&vic_link, PASSWORD).await.status, 200, "{backend:?}");
        let session = sign_in(base, "vic@acme.example", "").await.cookie.unwrap();
        // A second session opened with the password alone (a thief's).
        let other = sign_in(base, "vic@acme.example", "").await.cookie.unwrap();
        assert_eq!(get(base, "/console/deposits", Some(&session)).await.status, 200, "{backend:?}");
        // Made a developer, the viewer opens nothing but the page that adds
        // the factor (its sign-out still works).
        people::set_role(store, "acme", &vic.user.id, TenantRole::Developer, &actor).await.unwrap();
        for path in ["/console/deposits", "/console/keys", "/console/"] {
            let page = get(base, path, Some(&session)).await;
            assert_eq!((page.status, page.location.as_str()), (303, "/console/second-factor"), "{path}");
        }
        let page = get(base, "/console/second-factor", Some(&session)).await;
        assert_eq!(page.status, 200, "{backend:?}: {}", page.body);
        // A form sent anyway is not served either.
        let csrf = sessions::csrf(&page.body);
        let created = post(base, "/console/keys", Some(&session), &[("csrf", &csrf), ("name", "mine")]).await;
        assert_eq!(
            (created.status, created.location.as_str()),
            (303, "/console/second-factor"),
            "{backend:?}"
        );
        assert!(page.body.contains("data:image/svg+xml;base64,"), "{backend:?}");
        let secret = page.body.split_once("id=\"totp-secret\">").unwrap().1.split('<').next().unwrap();
        let (csrf, offer) = (sessions::csrf(&page.body), field(&page.body, "offer"));
        let wrong = [("csrf", csrf.as_str()), ("offer", &offer), ("code", "000000")];
        let answer = post(base, "/console/second-factor", Some(&session), &wrong).await;
        assert_eq!(answer.status, 422, "{backend:?}: {}", answer.body);
        // The offer is sealed to this session: another session cannot use it.
        let ada_session = signed.cookie.unwrap();
        let ada_csrf = sessions::csrf(&get(base, "/console/keys", Some(&ada_session)).await.body);
        let code = earlier(secret).await;
        let stolen = [("csrf", ada_csrf.as_str()), ("offer", &offer), ("code", &code)];
        assert_eq!(post(base, "/console/second-factor", Some(&ada_session), &stolen).await.status, 422);
        let right = [("csrf", csrf.as_str()), ("offer", &offer), ("code", &code)];
        let added = post(base, "/console/second-factor", Some(&session), &right).await;
        assert_eq!(
            (added.status, added.location.as_str()),
            (303, "/console/sign-in"),
            "{backend:?}: {}",
            added.body
        );
        // Every session opened without the code ended with it.
        for ended in [&session, &other] {
            let page = get(base, "/console/keys", Some(ended)).await;
            assert_eq!((page.status, page.location.as_str()), (303, "/console/sign-in"), "{backend:?}");
        }
        assert_eq!(sign_in(base, "vic@acme.example", "").await.status, 401, "{backend:?}: the code is asked");
        let again = sign_in(base, "vic@acme.example", &totp::code(secret, now_micros()).unwrap()).await;
        assert_eq!(again.status, 303, "{backend:?}: {}", again.body);
        assert_eq!(get(base, "/console/keys", again.cookie.as_deref()).await.status, 200, "{backend:?}");

        let entries = store.audit_entries(0, Some("acme"), 100).await.unwrap();
        let added: Vec<_> =
            entries.iter().filter(|e| e.action == "console_user.second_factor_added").collect();
        assert_eq!(added.len(), 1, "{backend:?}: {entries:#?}");
        assert_eq!(added[0].actor, format!("user:{}", vic.user.id));
    }
}
