//! The console: tenants' and operators' pages in a real browser (chromium
//! through WebDriver), sessions, sign-in and CSRF over real HTTP, on both
//! stores.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod dev;
mod factor;
mod keys;
mod operator_keys;
mod operators;
mod payouts;
mod people;
mod sessions;
mod tenants;

use tokio::process::Command;

use common::{
    api::{App, spawn_configured},
    db::{Backend, TEST_PII_KEY},
};
use custody_indexer::{
    api::ApiState,
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{NewOperator, Role, manage},
};

/// A service over a fresh store of `backend` with organization `acme`, an
/// operator admin (its key) and acme's first admin invited through the
/// service with `users invite` (the enrol link it printed).
pub struct Tenant {
    pub app: App,
    pub operator_key: String,
    pub enrol_link: String,
}

pub const ADMIN_EMAIL: &str = "ada@acme.example";
pub const PASSWORD: &str = "correct horse battery";

impl Tenant {
    /// A `sandbox` service (production's console asks its admins for a
    /// second factor: tests/console/factor.rs).
    pub async fn new(backend: Backend) -> Tenant {
        Self::configured(backend, |state| state.with_compliance(Environment::Sandbox, Default::default()))
            .await
    }

    /// As [`Tenant::new`], its service's state as `configure` makes it.
    pub async fn configured(backend: Backend, configure: impl FnOnce(ApiState) -> ApiState) -> Tenant {
        let app = spawn_configured(backend, Chains::default(), configure).await;
        custody_indexer::operators::tenants::create_bare_organization(app.store(), "acme", Some("Acme"))
            .await
            .unwrap();
        let new = NewOperator {
            name: "Opal Admin".into(),
            email: "opal@platform.example".into(),
            roles: vec![Role::Admin],
        };
        let operator_key = manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), new)
            .await
            .unwrap()
            .key
            .unwrap()
            .token;
        let output = cli(
            &app,
            &["users", "invite", "--organization", "acme", "--email", ADMIN_EMAIL, "--role", "admin"],
            &operator_key,
        )
        .await;
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        let enrol_link = stdout.lines().last().unwrap().trim().to_string();
        assert!(enrol_link.starts_with(&format!("{}/console/enrol/", app.base)), "{stdout}");
        Tenant { app, operator_key, enrol_link }
    }
}

/// The command line through `app`'s service, as the operator of `key`.
pub async fn cli(app: &App, args: &[&str], key: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
        .args(args)
        .env("DATABASE_URL", &app.db.url)
        .env("CUSTODY_INDEXER_PII_KEY", TEST_PII_KEY)
        .env("CUSTODY_INDEXER_SERVER", &app.base)
        .env("CUSTODY_INDEXER_OPERATOR_KEY", key)
        .output()
        .await
        .unwrap()
}
