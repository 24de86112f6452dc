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

/// What in `sql` (a migration's text) the rule refuses, if anything:
/// each statement is read on its own, comments aside.
fn refused(sql: &str) -> Option<String> {
    let exempt = sql.lines().next().is_some_and(|line| {
        line.strip_prefix("-- unused since migration ")
            .is_some_and(|n| n.trim().len() == 4 && n.trim().chars().all(|c| c.is_ascii_digit()))
    });
    let code: String =
        sql.lines().map(|line| line.split("--").next().unwrap_or_default()).collect::<Vec<_>>().join(" ");
    code.split(';').find_map(|statement| statement_refused(statement, exempt))
}

/// What one statement does that the rule refuses.
fn statement_refused(statement: &str, exempt: bool) -> Option<String> {
    let upper = statement.to_uppercase().replace(['(', ')', ','], " ");
    let words: Vec<String> = upper
        .split_whitespace()
        .map(|w| w.replace('"', "").rsplit('.').next().unwrap_or_default().to_string())
        .collect();
    let has =
        |phrase: &[&str]| words.windows(phrase.len()).any(|w| w.iter().zip(phrase).all(|(a, b)| a == b));
    // `ALTER COLUMN c TYPE …` or `ALTER COLUMN c SET DATA TYPE …`.
    let column_type = words.iter().enumerate().any(|(at, word)| {
        let next = |n: usize| words.get(at + n).map(String::as_str);
        word == "ALTER"
            && next(1) == Some("COLUMN")
            && (next(3) == Some("TYPE")
                || (next(3) == Some("SET") && next(4) == Some("DATA") && next(5) == Some("TYPE")))
    });
    let removing = if has(&["DROP", "TABLE"]) || has(&["DROP", "COLUMN"]) {
        Some("DROP")
    } else if has(&["RENAME"]) {
        Some("RENAME")
    } else if column_type {
        Some("ALTER … TYPE")
    } else if has(&["SET", "NOT", "NULL"]) {
        Some("SET NOT NULL")
    } else if has(&["ADD", "COLUMN"]) && has(&["NOT", "NULL"]) && !has(&["DEFAULT"]) {
        Some("a NOT NULL column without a DEFAULT")
    } else {
        None
    };
    if let Some(what) = removing.filter(|_| !exempt) {
        return Some(format!("{what} without `-- unused since migration NNNN` on its first line"));
    }
    let indexed = has(&["INDEX"]) || has(&["UNIQUE"]);
    let mut tables =
        words.windows(2).filter(|w| w[0] == "ON" || w[0] == "TABLE").map(|w| w[1].to_lowercase());
    let large = tables.find(|t| LARGE.contains(&t.as_str())).filter(|_| indexed)?;
    Some(format!("an index on {large}, a large table: make it in code"))
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
        (
            "CREATE INDEX x_at ON x (at);\nCREATE INDEX d_at ON public.\"deposits\" (at);",
            Some("index on deposits"),
        ),
        ("ALTER TABLE transfers ADD CONSTRAINT t_u UNIQUE (request_id);", Some("index on transfers")),
        ("ALTER TABLE x ADD COLUMN y TEXT NOT NULL;", Some("without a DEFAULT")),
        ("CREATE TABLE x (id TEXT, type TEXT NOT NULL);", None),
        ("ALTER TABLE x ADD COLUMN type TEXT;", None),
        ("ALTER TABLE x ALTER COLUMN a SET DATA TYPE BIGINT;", Some("TYPE")),
        ("ALTER TABLE x ALTER COLUMN type SET DEFAULT 'a';", None),
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
