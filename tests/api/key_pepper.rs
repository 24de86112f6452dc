//! Keys under the pepper, against a database writer: a store's plain key
//! hashes re-keyed once (on both stores), a row inserted with SQL holding a
//! token's SHA-256 refused by a `serve` that has the pepper, and a process
//! without it, or with another, refused at start; `production` needs one.

use crate::common;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use alloy::transports::http::reqwest::Method;
use common::{
    CHAIN, chain_toml,
    cli::Env,
    db::{BACKENDS, TestDb},
    dead_port,
    platform::api_up,
};
use custody_indexer::{
    api_key::{
        self,
        pepper::{self, Pepper, Peppering},
    },
    audit::Actor,
    environment::Environment,
    operators::{NewOperator, Role, manage},
};
use sqlx::AnyPool;

fn pepper_of(text: &str) -> (tempfile::TempDir, Pepper) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pepper"), text).unwrap();
    let pepper = Pepper::from_file(&dir.path().join("pepper")).unwrap();
    (dir, pepper)
}

async fn hashes(pool: &AnyPool) -> Vec<String> {
    let mut all: Vec<String> =
        sqlx::query_scalar("SELECT secret_hash FROM operator_keys").fetch_all(pool).await.unwrap();
    all.extend(
        sqlx::query_scalar::<_, String>("SELECT secret_hash FROM api_keys").fetch_all(pool).await.unwrap(),
    );
    all
}

/// An API key row of `acme` holding `key`'s plain SHA-256, as plain SQL
/// writes it.
async fn insert_plain(pool: &AnyPool, key: &api_key::NewSecret) {
    sqlx::query(
        "INSERT INTO api_keys (id, organization_id, name, secret_hash, created_at) VALUES ($1, 'acme', 'x', $2, 0)",
    )
    .bind(&key.id)
    .bind(&key.hash)
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_stores_plain_key_hashes_are_keyed_once_and_never_again() {
    let (_a, pepper) = pepper_of(&"a".repeat(32));
    let (_b, other) = pepper_of(&"b".repeat(40));
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let admin =
            NewOperator { name: "Ada".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
        let admin =
            manage::bootstrap(&db.store, Environment::Sandbox, &Actor::local(None), admin).await.unwrap();
        custody_indexer::operators::tenants::create_bare_organization(&db.store, "acme", None).await.unwrap();
        let (_, tenant) = api_key::manage::create(&db.store, "acme", "ci", &Actor::System).await.unwrap();
        let pool = AnyPool::connect(&db.url).await.unwrap();
        let plain = hashes(&pool).await;
        assert!(plain.iter().all(|h| h.len() == 64), "{backend:?}: a process without a pepper keeps SHA-256");

        assert_eq!(
            pepper::adopt(&db.store, Some(&pepper)).await.unwrap(),
            Peppering::Rekeyed(2),
            "{backend:?}"
        );
        let keyed = hashes(&pool).await;
        let expected =
            [&admin.key.unwrap().token, &tenant.token].map(|t| pepper.keyed(&api_key::hash(t)).unwrap());
        assert_eq!(keyed, expected, "{backend:?}: HMAC of each key's SHA-256");
        assert_eq!(pepper::adopt(&db.store, Some(&pepper)).await.unwrap(), Peppering::Keyed);
        let none = pepper::adopt(&db.store, None).await.unwrap_err().to_string();
        assert!(none.contains("CUSTODY_INDEXER_KEY_PEPPER_FILE") && none.contains(&pepper.id()), "{none}");
        let another = pepper::adopt(&db.store, Some(&other)).await.unwrap_err().to_string();
        assert!(another.contains(&other.id()), "{another}");

        // A plain hash written afterwards is never made a key.
        let forged = api_key::generate();
        insert_plain(&pool, &forged).await;
        assert_eq!(pepper::adopt(&db.store, Some(&pepper)).await.unwrap(), Peppering::Keyed);
        assert!(hashes(&pool).await.contains(&forged.hash), "{backend:?}: left as written");
        let entries = db.store.audit_entries(0, None, 100).await.unwrap();
        let peppered: Vec<_> = entries.iter().filter(|e| e.action == pepper::PEPPERED).collect();
        assert_eq!(peppered.len(), 1, "{backend:?}");
        assert!(peppered[0].detail.as_deref().unwrap().contains(&pepper.id()));
    }
}

/// `command`'s output once it exits, within 60 s: it must not start.
fn refused(mut command: Command) -> String {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("it started");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_row_inserted_with_sql_authenticates_nothing_under_the_pepper() {
    let url = format!("http://127.0.0.1:{}", dead_port());
    let env = Env::with_chain_file(&chain_toml(std::slice::from_ref(&url), None, ""));
    let key = env.organization_with_key();
    let forged = api_key::generate();
    let pool = AnyPool::connect(&env.database_url).await.unwrap();
    insert_plain(&pool, &forged).await;

    let port = dead_port();
    let serve = env.listen("serve", CHAIN, port, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")]);
    api_up(port).await;
    let webhooks = format!("http://127.0.0.1:{port}/v2/webhooks");
    let answer = common::api::send(Method::GET, &webhooks, Some(&key)).await;
    assert_eq!(answer.status, 200, "the key made by the command line, keyed: {answer:?}");
    let answer = common::api::send(Method::GET, &webhooks, Some(&forged.token)).await;
    assert_eq!(answer.status, 401, "a row holding the token's SHA-256: {answer:?}");
    drop(serve);

    let out = env.command(&["audit", "verify"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("API key {}: no audit entry made it", forged.id)), "{said}");

    // Without the pepper, or with another, the store's keys are no keys.
    let serve = |port: u16| {
        let listen = format!("127.0.0.1:{port}");
        let mut command = env.command(&[
            "serve",
            "--chain",
            CHAIN.as_str(),
            "--listen",
            &listen,
            "--environment",
            "sandbox",
        ]);
        command.env_remove("CUSTODY_INDEXER_KEY_PEPPER_FILE");
        command
    };
    let said = refused(serve(dead_port()));
    assert!(
        said.contains("hashed under a pepper") && said.contains("CUSTODY_INDEXER_KEY_PEPPER_FILE"),
        "{said}"
    );
    let other = env.dir.path().join("other-pepper");
    std::fs::write(&other, "another pepper of thirty-two bytes or more").unwrap();
    let mut with_other = serve(dead_port());
    with_other.env("CUSTODY_INDEXER_KEY_PEPPER_FILE", &other);
    let said = refused(with_other);
    assert!(said.contains("no key would authenticate"), "{said}");
    let short = env.dir.path().join("short-pepper");
    std::fs::write(&short, "short\n").unwrap();
    let mut with_short = serve(dead_port());
    with_short.env("CUSTODY_INDEXER_KEY_PEPPER_FILE", &short);
    assert!(refused(with_short).contains("at least 32 bytes"));

    // Production starts with a pepper only.
    let fresh = Env::with_chain_file(&chain_toml(&[url], None, ""));
    let mut production = fresh.command(&[
        "serve",
        "--chain",
        CHAIN.as_str(),
        "--listen",
        "127.0.0.1:0",
        "--environment",
        "production",
    ]);
    production.env_remove("CUSTODY_INDEXER_KEY_PEPPER_FILE");
    let said = refused(production);
    assert!(said.contains("CUSTODY_INDEXER_KEY_PEPPER_FILE"), "{said}");
    let store = fresh.store().await;
    assert_eq!(store.environment().await.unwrap(), None, "refused before the store is stamped");
}
