//! The audit log against whoever can write the database, on both stores:
//! the guards refuse every change but an append; a table owner who drops
//! them, rewrites or truncates the log and puts them back passes the hash
//! chain but fails a signed checkpoint kept elsewhere; operator, role and
//! key rows written with plain SQL are named; a role without DDL rights
//! appends and cannot lift the guards; `run`'s checkpoint is written once a
//! period, to a directory and to NATS.

use crate::common;

use std::process::{Command, Output};

use common::{
    db::{BACKENDS, Backend, TEST_PII_KEY, TestDb},
    nats::NatsServer,
};
use custody_indexer::{
    api_key,
    audit::{
        Actor, Record,
        chain::Entry,
        checkpoint::{self, Checkpoint},
        schedule::{self, Schedule, ScheduleError},
    },
    environment::Environment,
    operators::{Created, NewOperator, Role, manage, tenants},
    store::Store,
};
use sqlx::AnyPool;

/// The command line on the store at `url`, with `envs`.
pub(super) fn cli(url: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_custody-indexer"));
    command
        .args(args)
        .env("DATABASE_URL", url)
        .env("CUSTODY_INDEXER_PII_KEY", TEST_PII_KEY)
        .env_remove("CUSTODY_INDEXER_AUDIT_KEY_FILE")
        .env_remove("CUSTODY_INDEXER_AUDIT_PUBLIC_KEY");
    command.envs(envs.iter().copied());
    command.output().unwrap()
}

pub(super) fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

pub(super) async fn bootstrap(store: &Store) -> Created {
    let new =
        NewOperator { name: "Ada Admin".into(), email: "ada@example.com".into(), roles: vec![Role::Admin] };
    manage::bootstrap(store, Environment::Sandbox, &Actor::local(None), new).await.unwrap()
}

/// The bootstrapped admin, and a treasury operator it created.
async fn admin_and_treasurer(store: &Store) -> (Created, Created) {
    let admin = bootstrap(store).await;
    let new =
        NewOperator { name: "Tom".into(), email: "tom@example.com".into(), roles: vec![Role::Treasury] };
    let tom = common::api::seed_operator(store, &admin.operator, new).await;
    (admin, tom)
}

/// Appends a decision as the service does, by the library's one append.
pub(super) async fn decide(store: &Store, mint: &str) {
    decide_as(store, &Actor::System, mint).await
}

async fn decide_as(store: &Store, actor: &Actor, mint: &str) {
    let mut tx = store.begin().await.unwrap();
    let record = Record {
        actor,
        action: "wire.approved",
        target_kind: "mint",
        target_id: mint,
        organization_id: None,
        reason: None,
        request_id: None,
        detail: None,
    };
    custody_indexer::audit::append(&mut tx, None, record).await.unwrap();
    tx.commit().await.unwrap();
}

pub use common::writer::drop_guards;

#[tokio::test]
async fn the_log_refuses_every_change_but_an_append() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let (admin, tom) = admin_and_treasurer(&db.store).await;
        let pool = AnyPool::connect(&db.url).await.unwrap();
        let mut refused = vec![
            ("an entry edited", "UPDATE audit_log SET target_id = 'op_other' WHERE seq = 2"),
            ("an entry deleted", "DELETE FROM audit_log WHERE seq = 2"),
            (
                "the head moved back",
                "UPDATE audit_head SET seq = 1, hash = (SELECT hash FROM audit_log WHERE seq = 1)",
            ),
            ("the head moved on alone", "UPDATE audit_head SET seq = 3"),
            ("the head deleted", "DELETE FROM audit_head"),
            ("a second head", "INSERT INTO audit_head (id, seq, hash) VALUES (2, 0, 'x')"),
            (
                "an entry past the head",
                "INSERT INTO audit_log (seq, at, actor, action, target_kind, target_id, prev_hash, hash)
                 VALUES (9, 0, 'system', 'wire.approved', 'mint', 'm', 'x', 'x')",
            ),
            (
                "an entry with a false link",
                "INSERT INTO audit_log (seq, at, actor, action, target_kind, target_id, prev_hash, hash)
                 VALUES (3, 0, 'system', 'wire.approved', 'mint', 'm', 'x', 'x')",
            ),
        ];
        if backend == Backend::Postgres {
            refused.push(("the log truncated", "TRUNCATE audit_log"));
            refused.push(("the head truncated", "TRUNCATE audit_head"));
        }
        for (what, statement) in refused {
            let error = sqlx::query(statement).execute(&pool).await.expect_err(what);
            assert!(error.to_string().contains("audit_"), "{backend:?}: {what}: {error}");
        }
        let stored = db.store.audit_entries(0, None, 10).await.unwrap();
        assert_eq!(stored.len(), 2, "{backend:?}: nothing changed");

        // The service's own append goes through, and the log verifies.
        custody_indexer::operators::taking::disable(
            &db.store,
            Environment::Sandbox,
            &admin.operator,
            &tom.operator.id,
            "left",
        )
        .await
        .unwrap();
        let out = cli(&db.url, &["audit", "verify"], &[]);
        assert!(out.status.success(), "{backend:?}: {}", text(&out));
        assert!(text(&out).contains("verified: 3 entries"), "{}", text(&out));
    }
}

/// The log's entries with `change` made to the one at `seq`, every hash
/// after it computed again, as an owner with the hashing code would.
pub(super) async fn rehash_from(pool: &AnyPool, store: &Store, seq: i64, change: impl Fn(&mut Entry)) {
    let mut entries = store.audit_entries(0, None, 1000).await.unwrap();
    let mut prev = entries[(seq - 2) as usize].hash.clone();
    for entry in entries.iter_mut().filter(|e| e.seq >= seq) {
        if entry.seq == seq {
            change(entry);
        }
        entry.prev_hash = prev.clone();
        entry.hash = entry.digest();
        prev = entry.hash.clone();
        sqlx::query("UPDATE audit_log SET target_id = $1, prev_hash = $2, hash = $3 WHERE seq = $4")
            .bind(&entry.target_id)
            .bind(&entry.prev_hash)
            .bind(&entry.hash)
            .bind(entry.seq)
            .execute(pool)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE audit_head SET hash = $1 WHERE id = 1").bind(&prev).execute(pool).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_behind_guards_put_back_fails_the_checkpoint_kept_elsewhere() {
    let attacks = ["truncated", "rehashed"];
    for backend in BACKENDS {
        for attack in attacks {
            let db = TestDb::new(backend).await;
            bootstrap(&db.store).await;
            for mint in ["mint-2", "mint-3", "mint-4", "mint-5"] {
                decide(&db.store, mint).await;
            }
            let dir = tempfile::tempdir().unwrap();
            let key = dir.path().join("audit.key");
            let key_path = key.to_str().unwrap();
            let out = cli(&db.url, &["audit", "keygen", "--out", key_path], &[]);
            assert!(out.status.success(), "{}", text(&out));
            let public = String::from_utf8(out.stdout).unwrap().trim().to_string();
            let again = cli(&db.url, &["audit", "keygen", "--out", key_path], &[]);
            assert!(!again.status.success(), "an existing key file is never replaced");

            let cp_path = dir.path().join("cp.json");
            let cp = cp_path.to_str().unwrap();
            let key_env = [("CUSTODY_INDEXER_AUDIT_KEY_FILE", key_path)];
            let out = cli(&db.url, &["audit", "checkpoint", "--out", cp], &key_env);
            assert!(out.status.success(), "{}", text(&out));
            let printed = Checkpoint::parse(&String::from_utf8(out.stdout).unwrap(), "stdout").unwrap();
            let kept = Checkpoint::parse(&std::fs::read_to_string(&cp_path).unwrap(), "file").unwrap();
            assert_eq!((printed.seq, &printed), (5, &kept));
            let checked = ["audit", "verify", "--checkpoint", cp, "--public-key", &public];
            let out = cli(&db.url, &checked, &[]);
            assert!(out.status.success() && text(&out).contains("checkpoint seq 5"), "{}", text(&out));
            let out = cli(&db.url, &["audit", "verify", "--checkpoint", cp], &[]);
            assert!(!out.status.success() && text(&out).contains("--public-key"), "{}", text(&out));
            let other = checkpoint::public_key_text(&checkpoint::generate().verifying_key());
            let out = cli(&db.url, &["audit", "verify", "--checkpoint", cp, "--public-key", &other], &[]);
            assert_eq!(out.status.code(), Some(1), "{}", text(&out));
            assert!(text(&out).contains("BROKEN at seq 5: the checkpoint's signature does not verify"));
            decide(&db.store, "mint-6").await;
            decide(&db.store, "mint-7").await;

            // The owner lifts the guards: verify says so.
            let pool = AnyPool::connect(&db.url).await.unwrap();
            drop_guards(&pool, backend).await;
            let out = cli(&db.url, &["audit", "verify"], &[]);
            assert_eq!(out.status.code(), Some(1), "{}", text(&out));
            assert!(text(&out).contains("UNGUARDED"), "{}", text(&out));

            let why = match attack {
                "truncated" => {
                    sqlx::query("DELETE FROM audit_log WHERE seq >= 4").execute(&pool).await.unwrap();
                    sqlx::query(
                        "UPDATE audit_head SET seq = 3, hash = (SELECT hash FROM audit_log WHERE seq = 3)",
                    )
                    .execute(&pool)
                    .await
                    .unwrap();
                    "BROKEN at seq 5: the log's head lies before this checkpoint: its tail was truncated"
                }
                _ => {
                    rehash_from(&pool, &db.store, 3, |e| e.target_id = "mint-forged".into()).await;
                    "BROKEN at seq 5: the log's entry is not the one checkpointed: the log was rewritten"
                }
            };
            // … and puts them back: the chain alone no longer tells.
            let out = cli(&db.url, &["migrate"], &[]);
            assert!(out.status.success(), "{}", text(&out));
            let out = cli(&db.url, &["audit", "verify"], &[]);
            assert!(out.status.success(), "{backend:?} {attack}: the chain is consistent: {}", text(&out));
            let out = cli(&db.url, &checked, &[]);
            assert_eq!(out.status.code(), Some(1), "{backend:?} {attack}: {}", text(&out));
            assert!(text(&out).contains(why), "{backend:?} {attack}: {}", text(&out));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_written_with_plain_sql_are_named() {
    for backend in BACKENDS {
        let db = TestDb::new(backend).await;
        let (admin, tom) = admin_and_treasurer(&db.store).await;
        let spare = custody_indexer::operators::keys::create_key(
            &db.store,
            Environment::Sandbox,
            &admin.operator,
            &tom.operator.id,
        )
        .await
        .unwrap();
        custody_indexer::operators::keys::revoke_key(&db.store, &admin.operator, &spare.id).await.unwrap();
        tenants::create_bare_organization(&db.store, "acme", None).await.unwrap();
        let secret = api_key::generate();
        api_key::manage::create_with(&db.store, "acme", "ci", (&secret.id, &secret.hash), &Actor::System)
            .await
            .unwrap();
        let out = cli(&db.url, &["audit", "verify"], &[]);
        assert!(out.status.success(), "{backend:?}: {}", text(&out));

        // No trigger stands in the way of these: the rows are not the log.
        let pool = AnyPool::connect(&db.url).await.unwrap();
        let forged = api_key::generate_with(api_key::OPERATOR_PREFIX);
        let admin_id = &admin.operator.id;
        for statement in [
            format!(
                "INSERT INTO operator_keys (id, operator_id, secret_hash, created_at) VALUES ('{}', '{admin_id}', '{}', 0)",
                forged.id, forged.hash
            ),
            format!("UPDATE operators SET roles = 'admin,treasury' WHERE id = '{admin_id}'"),
            format!("UPDATE operator_keys SET revoked_at = NULL WHERE id = '{}'", spare.id),
            "INSERT INTO api_keys (id, organization_id, name, secret_hash, created_at)
             VALUES ('key_sql', 'acme', 'sql', 'x', 0)"
                .to_string(),
        ] {
            sqlx::query(&statement).execute(&pool).await.unwrap();
        }
        let out = cli(&db.url, &["audit", "verify"], &[]);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", text(&out));
        let said = text(&out);
        for finding in [
            format!("operator key {}: no audit entry made it", forged.id),
            format!("operator {admin_id}: holds the roles \"admin,treasury\", the log gave \"admin\""),
            format!("operator key {}: is live, the log revoked it", spare.id),
            "API key key_sql: no audit entry made it".to_string(),
        ] {
            assert!(said.contains(&finding), "{backend:?}: {finding} in {said}");
        }
    }
}

#[tokio::test]
async fn a_role_without_ddl_rights_appends_and_cannot_lift_the_guards() {
    let db = TestDb::unmigrated(Backend::Postgres).await;
    let refused = Store::open_migrated(&db.url).await.unwrap_err();
    assert!(refused.to_string().contains("custody-indexer migrate"), "{refused}");
    db.store.migrate().await.unwrap();

    let role = format!("ci_app_{}", uuid::Uuid::new_v4().simple());
    let owner = AnyPool::connect(&db.url).await.unwrap();
    for statement in [
        format!("CREATE ROLE {role} LOGIN"),
        format!("GRANT USAGE ON SCHEMA public TO {role}"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"),
    ] {
        sqlx::query(&statement).execute(&owner).await.unwrap();
    }
    let (base, name) = db.url.rsplit_once('/').unwrap();
    let (scheme, host) = base.split_once("://").unwrap();
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let app_url = format!("{scheme}://{role}@{host}/{name}");

    let store = Store::open_migrated(&app_url).await.unwrap();
    bootstrap(&store).await;
    decide(&store, "mint-2").await;
    let app = AnyPool::connect(&app_url).await.unwrap();
    for statement in [
        "UPDATE audit_log SET target_id = 'x' WHERE seq = 2",
        "DROP TRIGGER audit_log_guard ON audit_log",
        "ALTER TABLE audit_log DISABLE TRIGGER audit_log_guard",
        "TRUNCATE audit_log",
    ] {
        let error = sqlx::query(statement).execute(&app).await.expect_err(statement);
        let error = error.to_string();
        assert!(
            error.contains("audit_") || error.contains("owner") || error.contains("denied"),
            "{statement}: {error}"
        );
    }
    let out = cli(&app_url, &["audit", "verify"], &[]);
    assert!(out.status.success() && text(&out).contains("2 entries"), "{}", text(&out));

    app.close().await;
    store.close().await;
    sqlx::query(&format!("DROP OWNED BY {role}")).execute(&owner).await.unwrap();
    sqlx::query(&format!("DROP ROLE {role}")).execute(&owner).await.unwrap();
}

#[tokio::test]
async fn each_period_one_instance_writes_the_checkpoint_to_its_directory_and_nats() {
    let db = TestDb::new(Backend::Sqlite).await;
    bootstrap(&db.store).await;
    decide(&db.store, "mint-2").await;
    let nats = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = checkpoint::generate();
    let public = key.verifying_key();
    let schedule = Schedule {
        key,
        every: std::time::Duration::from_secs(3600),
        dir: Some(dir.path().join("checkpoints")),
        nats: Some(nats.url().parse().unwrap()),
        last: Default::default(),
    };
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();

    // Two instances asking at once: one claims the period.
    let (now, hour) = (1_800_000_000_000_000, 3_600_000_000);
    let (a, b) = tokio::join!(
        schedule::claim_checkpoint(&db.store, "node-a", now, hour),
        schedule::claim_checkpoint(&db.store, "node-b", now, hour)
    );
    assert_eq!([a.unwrap(), b.unwrap()].iter().filter(|c| **c).count(), 1);
    assert!(!schedule::claim_checkpoint(&db.store, "node-b", now + hour - 1, hour).await.unwrap());
    assert!(schedule::claim_checkpoint(&db.store, "node-b", now + hour, hour).await.unwrap());
    // A break-glass step makes the next one due at once.
    assert!(!schedule::claim_checkpoint(&db.store, "node-a", now + hour + 1, hour).await.unwrap());
    let glass = Actor::break_glass("op_0123456789abcdef0123456789abcdef", "Ada");
    decide_as(&db.store, &glass, "mint-3").await;
    assert!(schedule::claim_checkpoint(&db.store, "node-a", now + hour + 1, hour).await.unwrap());
    // Put off or deleted by a writer: due all the same, and claimed once.
    let writer = AnyPool::connect(&db.url).await.unwrap();
    sqlx::query("UPDATE audit_checkpoint_due SET due_at = 9000000000000000000")
        .execute(&writer)
        .await
        .unwrap();
    assert!(schedule::claim_checkpoint(&db.store, "node-a", now + hour + 2, hour).await.unwrap());
    sqlx::query("DELETE FROM audit_checkpoint_due").execute(&writer).await.unwrap();
    assert!(schedule::claim_checkpoint(&db.store, "node-b", now + hour + 3, hour).await.unwrap());
    assert!(!schedule::claim_checkpoint(&db.store, "node-a", now + hour + 4, hour).await.unwrap());

    let written = schedule::write(&db.store, &schedule).await.unwrap();
    assert_eq!(written.seq, 3);
    let files: Vec<_> =
        std::fs::read_dir(dir.path().join("checkpoints")).unwrap().map(|f| f.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let stored = Checkpoint::parse(&std::fs::read_to_string(&files[0]).unwrap(), "file").unwrap();
    assert_eq!(stored, written);
    let messages = nats.messages().await;
    assert_eq!(messages.len(), 1);
    let (subject, id, body) = &messages[0];
    assert_eq!(subject, "custody.events.platform.audit_checkpoint");
    assert_eq!(id, &format!("audit-checkpoint-3-{}", written.at));
    let published = Checkpoint::parse(body, "nats").unwrap();
    let entries = db.store.audit_entries(0, None, 10).await.unwrap();
    assert_eq!(published.check(&public, &entries, 3), Ok(()));

    // A log rewritten since the last checkpoint is never signed, however
    // consistent its chain, nor one broken.
    let pool = AnyPool::connect(&db.url).await.unwrap();
    drop_guards(&pool, Backend::Sqlite).await;
    rehash_from(&pool, &db.store, 2, |e| e.target_id = "mint-forged".into()).await;
    let refused = schedule::write(&db.store, &schedule).await.unwrap_err();
    assert!(matches!(refused, ScheduleError::Broken(ref at) if at.seq == 3), "{refused}");
    let restarted = Schedule {
        key: schedule.key.clone(),
        every: schedule.every,
        dir: schedule.dir.clone(),
        nats: None,
        last: std::sync::Mutex::new(schedule::newest(schedule.dir.as_deref().unwrap(), &schedule.key)),
    };
    let refused = schedule::write(&db.store, &restarted).await.unwrap_err();
    assert!(
        matches!(refused, ScheduleError::Broken(ref at) if at.seq == 3),
        "after a restart too: {refused}"
    );
    sqlx::query("UPDATE audit_log SET actor = 'x' WHERE seq = 2").execute(&pool).await.unwrap();
    let refused = schedule::write(&db.store, &schedule).await.unwrap_err();
    assert!(matches!(refused, ScheduleError::Broken(ref at) if at.seq == 2), "{refused}");
    assert_eq!(std::fs::read_dir(dir.path().join("checkpoints")).unwrap().count(), 1);
    assert_eq!(nats.messages().await.len(), 1);
}
