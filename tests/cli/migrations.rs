//! The rule that lets instances of two releases share a store during a
//! rolling upgrade: from migration 0055 on, a migration only adds. It drops,
//! renames, retypes or tightens (`SET NOT NULL`) no table or column unless
//! its first line says `-- unused since migration NNNN` (what it removes is
//! read by no release from that one on), and it makes no index on a large
//! table (`deposits`, `events`, `transfers`, `audit_log`): those are made by
//! code per backend, concurrently on PostgreSQL. And `migrate --dry-run`
//! lists what a store lacks, changing nothing.

use std::path::Path;

use crate::common::cli::Env;

/// The first migration the rule holds.
const FIRST: u32 = 55;

/// The tables whose indexes are made by code.
const LARGE: [&str; 4] = ["deposits", "events", "transfers", "audit_log"];

/// What in `sql` (a migration's text) the rule refuses, if anything.
fn refused(sql: &str) -> Option<String> {
    let exempt = sql.lines().next().is_some_and(|line| {
        line.strip_prefix("-- unused since migration ")
            .is_some_and(|n| n.trim().len() == 4 && n.trim().chars().all(|c| c.is_ascii_digit()))
    });
    let code: String = sql
        .lines()
        .map(|line| line.split("--").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase();
    let words: Vec<&str> =
        code.split(|c: char| c.is_whitespace() || c == '(' || c == ';').filter(|w| !w.is_empty()).collect();
    let has = |phrase: &[&str]| words.windows(phrase.len()).any(|w| w == phrase);
    let altering = ["DROP", "RENAME"]
        .into_iter()
        .find(|word| words.contains(word))
        .map(str::to_string)
        .or_else(|| has(&["SET", "NOT", "NULL"]).then(|| "SET NOT NULL".to_string()))
        .or_else(|| has(&["TYPE"]).then(|| "ALTER … TYPE".to_string()));
    if let Some(what) = altering.filter(|_| !exempt) {
        return Some(format!("{what} without `-- unused since migration NNNN` on its first line"));
    }
    let index = words.iter().position(|w| *w == "INDEX").filter(|_| has(&["CREATE"]))?;
    let on = words[index..].iter().position(|w| *w == "ON")?;
    let table = words.get(index + on + 1)?.to_lowercase();
    LARGE.contains(&table.as_str()).then(|| format!("an index on {table}, a large table: make it in code"))
}

#[test]
fn the_rule_refuses_what_two_releases_cannot_share() {
    let cases = [
        ("ALTER TABLE deposits ADD COLUMN n BIGINT NOT NULL DEFAULT 0;", None),
        ("CREATE TABLE x (id TEXT PRIMARY KEY);\nCREATE INDEX x_at ON x (at);", None),
        ("-- a comment that says DROP is no statement\nALTER TABLE x ADD COLUMN y TEXT;", None),
        ("ALTER TABLE deposits DROP COLUMN position;", Some("DROP")),
        ("-- unused since migration 0049\nALTER TABLE deposits DROP COLUMN position;", None),
        ("-- unused since 49\nALTER TABLE deposits DROP COLUMN position;", Some("DROP")),
        ("DROP TABLE old_rows;", Some("DROP")),
        ("ALTER TABLE x RENAME COLUMN a TO b;", Some("RENAME")),
        ("ALTER TABLE x ALTER COLUMN a TYPE BIGINT;", Some("TYPE")),
        ("ALTER TABLE x ALTER COLUMN a SET NOT NULL;", Some("SET NOT NULL")),
        ("CREATE INDEX deposits_at ON deposits (created_at);", Some("index on deposits")),
        ("CREATE UNIQUE INDEX audit_x ON audit_log (seq);", Some("index on audit_log")),
    ];
    for (sql, expected) in cases {
        match (refused(sql), expected) {
            (None, None) => {}
            (Some(why), Some(part)) => assert!(why.contains(part), "{sql}: {why}"),
            (found, _) => panic!("{sql}: {found:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn every_migration_from_0055_on_only_adds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut held = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let number: u32 = name.split('_').next().unwrap().parse().unwrap();
        if number < FIRST {
            continue;
        }
        held += 1;
        if let Some(why) = refused(&std::fs::read_to_string(&path).unwrap()) {
            panic!("migrations/{name}: {why}");
        }
    }
    assert!(held >= 2, "the rule held {held} migrations");
}

#[tokio::test]
async fn migrate_dry_run_lists_what_a_store_lacks_and_changes_nothing() {
    let env = Env::with_chain_file("");
    env.ok(&["migrate"]);
    assert_eq!(env.ok(&["migrate", "--dry-run"]).trim(), "nothing to apply");
    // A store as the release before left it: without the last migration.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&env.database_url).await.unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 56").execute(&pool).await.unwrap();
    pool.close().await;
    assert_eq!(env.ok(&["migrate", "--dry-run"]).trim(), "0056_deposit_event_counts");
    assert_eq!(env.ok(&["migrate", "--dry-run"]).trim(), "0056_deposit_event_counts", "it changed nothing");
}
