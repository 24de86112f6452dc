//! The adversary who writes the database with plain SQL (the service's
//! own credentials: no pepper, no host), against a service that has the
//! pepper, on both stores and over real HTTP: a session, user, key or
//! operator row written or changed with SQL authenticates nothing, and an
//! audit entry appended with SQL (chained as the guards let it) is never
//! authority.
//!
//! One test binary, apart from the others: its process holds the tests'
//! pepper (installed before anything reads it), as `run` does in
//! production, which the other binaries' in-process services do not.
//!
//! Each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod broken;
mod entries;
mod grants;
mod sessions;
mod suspension;

use common::{
    api::{App, spawn_configured},
    cli::TEST_KEY_PEPPER,
    console::{enrol, sign_in},
    db::Backend,
};
use custody_indexer::{
    api::ApiState,
    api_key::pepper,
    audit::Actor,
    config::Chains,
    environment::Environment,
    operators::{Created, NewOperator, Role, manage},
    people::{self, rules::TenantRole},
    store::keyring::{self, Pepper},
};

pub const ADMIN_EMAIL: &str = "ada@acme.example";
pub const PASSWORD: &str = "correct horse battery";

/// Installs the tests' pepper as this process's (the one `Env`'s
/// processes read from their file), before anything reads it.
pub fn keyed() -> &'static Pepper {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pepper"), TEST_KEY_PEPPER).unwrap();
    assert!(keyring::install(Pepper::from_file(&dir.path().join("pepper")).unwrap()), "another pepper");
    keyring::process().unwrap().unwrap()
}

/// A `sandbox` service with the pepper over a fresh store of `backend`, its
/// log authenticated, with organization `acme`, the bootstrap operator
/// admin, and acme's admin enrolled and signed in.
pub struct World {
    pub app: App,
    pub operator: Created,
    /// The signed-in admin's session cookie.
    pub session: String,
    pub pool: sqlx::AnyPool,
}

impl World {
    pub async fn new(backend: Backend) -> World {
        keyed();
        let sandbox = |state: ApiState| state.with_compliance(Environment::Sandbox, Default::default());
        let app = spawn_configured(backend, Chains::default(), sandbox).await;
        let store = app.store();
        pepper::for_keys(store).await.unwrap();
        custody_indexer::operators::tenants::create_bare_organization(store, "acme", Some("Acme"))
            .await
            .unwrap();
        let new = NewOperator {
            name: "Opal Admin".into(),
            email: "opal@platform.example".into(),
            roles: vec![Role::Admin],
        };
        let operator =
            manage::bootstrap(store, Environment::Sandbox, &Actor::local(None), new).await.unwrap();
        let invited = people::invite(store, "acme", (ADMIN_EMAIL, TenantRole::Admin), &Actor::System, None)
            .await
            .unwrap();
        let link = format!("{}{}", app.base, invited.enrol_path);
        assert_eq!(enrol(&link, PASSWORD).await.status, 200, "{backend:?}: a link the service made");
        let signed = sign_in(&app.base, ADMIN_EMAIL, PASSWORD).await;
        assert_eq!(signed.status, 303, "{backend:?}: {}", signed.body);
        let pool = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
        // Stamped as `serve` in sandbox stamps it: the command line reads it.
        sqlx::query("INSERT INTO store_environment (id, environment, stamped_at) VALUES (1, 'sandbox', 0)")
            .execute(&pool)
            .await
            .unwrap();
        World { session: signed.cookie.unwrap(), operator, app, pool }
    }

    /// The `row_mac` of row `id` of `table`, as the store holds it now.
    pub async fn row_mac(&self, table: &str, id: &str) -> String {
        let sql = format!("SELECT row_mac FROM {table} WHERE id = $1");
        sqlx::query_scalar(&sql).bind(id).fetch_one(&self.pool).await.unwrap()
    }

    /// Runs `sql` with `binds` (text) on the store, as its writer would.
    pub async fn sql(&self, sql: &str, binds: &[&str]) {
        let mut query = sqlx::query(sql);
        for bind in binds {
            query = query.bind(*bind);
        }
        query.execute(&self.pool).await.unwrap();
    }
}
