//! The guards that keep the audit log append-only in the database itself:
//! triggers that let an entry in only right after the head, the head move
//! only one step forward onto the entry just inserted, and refuse every
//! `UPDATE` or `DELETE` of an entry, any other change of the head, and (on
//! PostgreSQL) `TRUNCATE` of either table. `migrate` installs them (their
//! language differs between SQLite and PostgreSQL, so they are not a
//! migration file); [`missing`] names those absent, disabled or changed, for
//! `audit verify`. A table's owner can still drop them: what they hold off
//! is the service's own role and any writer without DDL rights, and the
//! signed checkpoints find what an owner did.

use sqlx::{AnyPool, Row};

use crate::store::{Backend, StoreError};

/// SQLite's triggers, by name, as created (the text SQLite keeps).
const SQLITE: [(&str, &str); 6] = [
    (
        "audit_log_no_update",
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log \
         BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: an entry is never changed'); END",
    ),
    (
        "audit_log_no_delete",
        "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log \
         BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: an entry is never deleted'); END",
    ),
    (
        "audit_log_append",
        "CREATE TRIGGER audit_log_append BEFORE INSERT ON audit_log \
         WHEN NEW.seq IS NOT (SELECT seq + 1 FROM audit_head WHERE id = 1) \
         OR NEW.prev_hash IS NOT (SELECT hash FROM audit_head WHERE id = 1) \
         BEGIN SELECT RAISE(ABORT, 'audit_log: an entry is appended right after the head only'); END",
    ),
    (
        "audit_head_forward",
        "CREATE TRIGGER audit_head_forward BEFORE UPDATE ON audit_head \
         WHEN NEW.id IS NOT OLD.id OR NEW.seq IS NOT OLD.seq + 1 \
         OR NEW.hash IS NOT (SELECT hash FROM audit_log WHERE seq = NEW.seq) \
         BEGIN SELECT RAISE(ABORT, 'audit_head moves one step forward onto the entry appended only'); END",
    ),
    (
        "audit_head_no_delete",
        "CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head \
         BEGIN SELECT RAISE(ABORT, 'audit_head is never deleted'); END",
    ),
    (
        "audit_head_no_insert",
        "CREATE TRIGGER audit_head_no_insert BEFORE INSERT ON audit_head \
         BEGIN SELECT RAISE(ABORT, 'audit_head has one row'); END",
    ),
];

/// PostgreSQL's guard functions, by name, with their bodies.
const POSTGRES_FUNCTIONS: [(&str, &str); 3] = [
    (
        "audit_log_guard",
        "BEGIN
    IF TG_OP = 'INSERT' AND EXISTS (
        SELECT 1 FROM audit_head WHERE id = 1 AND seq + 1 = NEW.seq AND hash = NEW.prev_hash
    ) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused (an entry is appended right after the head only)', TG_OP;
END",
    ),
    (
        "audit_head_guard",
        "BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.seq = OLD.seq + 1
        AND NEW.hash = (SELECT hash FROM audit_log WHERE seq = NEW.seq) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_head moves one step forward onto the entry appended only: % refused', TG_OP;
END",
    ),
    (
        "audit_no_truncate",
        "BEGIN
    RAISE EXCEPTION '% is append-only: TRUNCATE refused', TG_TABLE_NAME;
END",
    ),
];

/// PostgreSQL's triggers: name, table, when, and the function called.
/// Their `tgtype`s: a row trigger before insert, update and delete is
/// `1 | 2 | 4 | 8 | 16`; a statement trigger before truncate `2 | 32`.
const POSTGRES_TRIGGERS: [(&str, &str, &str, &str); 4] = [
    (
        "audit_log_guard",
        "audit_log",
        "BEFORE INSERT OR UPDATE OR DELETE",
        "FOR EACH ROW EXECUTE FUNCTION audit_log_guard()",
    ),
    (
        "audit_log_no_truncate",
        "audit_log",
        "BEFORE TRUNCATE",
        "FOR EACH STATEMENT EXECUTE FUNCTION audit_no_truncate()",
    ),
    (
        "audit_head_guard",
        "audit_head",
        "BEFORE INSERT OR UPDATE OR DELETE",
        "FOR EACH ROW EXECUTE FUNCTION audit_head_guard()",
    ),
    (
        "audit_head_no_truncate",
        "audit_head",
        "BEFORE TRUNCATE",
        "FOR EACH STATEMENT EXECUTE FUNCTION audit_no_truncate()",
    ),
];

/// Puts back every guard when one is missing, in one transaction: a store
/// whose guards stand is not touched (no lock on the log's tables, no DDL
/// right needed). On PostgreSQL an advisory lock orders instances starting
/// together.
pub(in crate::store) async fn install(pool: &AnyPool, backend: Backend) -> Result<(), StoreError> {
    if missing(pool, backend).await?.is_empty() {
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock(7305411283617492)").execute(&mut *tx).await?;
        // Another instance put them back while this one waited.
        if missing(pool, backend).await?.is_empty() {
            return Ok(());
        }
        // The head before the entries, as every append takes them: a live
        // append waits, never deadlocks.
        sqlx::query("LOCK TABLE audit_head, audit_log IN ACCESS EXCLUSIVE MODE").execute(&mut *tx).await?;
    }
    match backend {
        Backend::Sqlite => {
            for (name, create) in SQLITE {
                sqlx::raw_sql(&format!("DROP TRIGGER IF EXISTS {name}")).execute(&mut *tx).await?;
                sqlx::raw_sql(create).execute(&mut *tx).await?;
            }
        }
        Backend::Postgres => {
            // The functions read the tables of the schema the store is in,
            // never a temporary table a session put before them.
            let schema: String =
                sqlx::query_scalar("SELECT current_schema()::text").fetch_one(&mut *tx).await?;
            let path = format!("\"{}\", pg_temp", schema.replace('"', "\"\""));
            for (name, body) in POSTGRES_FUNCTIONS {
                let create = format!(
                    "CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql SET search_path = {path} \
                     AS $guard$\n{body}\n$guard$"
                );
                sqlx::raw_sql(&create).execute(&mut *tx).await?;
            }
            for (name, table, when, call) in POSTGRES_TRIGGERS {
                sqlx::raw_sql(&format!("DROP TRIGGER IF EXISTS {name} ON {table}")).execute(&mut *tx).await?;
                sqlx::raw_sql(&format!("CREATE TRIGGER {name} {when} ON {table} {call}"))
                    .execute(&mut *tx)
                    .await?;
            }
        }
    }
    tx.commit().await?;
    Ok(())
}

/// The guards absent, disabled or not as installed, by name.
pub(in crate::store) async fn missing(pool: &AnyPool, backend: Backend) -> Result<Vec<String>, StoreError> {
    let mut missing = Vec::new();
    match backend {
        Backend::Sqlite => {
            for (name, create) in SQLITE {
                let kept: Option<String> =
                    sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = $1")
                        .bind(name)
                        .fetch_optional(pool)
                        .await?;
                if kept.as_deref().map(words) != Some(words(create)) {
                    missing.push(format!("trigger {name}"));
                }
            }
        }
        Backend::Postgres => {
            for (name, body) in POSTGRES_FUNCTIONS {
                let row = sqlx::query(
                    "SELECT p.prosrc, array_to_string(p.proconfig, ',') AS config FROM pg_proc p
                     WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace",
                )
                .bind(name)
                .fetch_optional(pool)
                .await?;
                let intact = row.is_some_and(|row| {
                    let source: String = row.try_get("prosrc").unwrap_or_default();
                    let config: Option<String> = row.try_get("config").unwrap_or_default();
                    words(&source) == words(body)
                        && config.is_some_and(|c| c.starts_with("search_path=") && c.ends_with("pg_temp"))
                });
                if !intact {
                    missing.push(format!("function {name}"));
                }
            }
            for (name, table, when, call) in POSTGRES_TRIGGERS {
                let row = sqlx::query(
                    "SELECT t.tgenabled::text AS enabled, t.tgtype::integer AS kind, pg_get_triggerdef(t.oid) AS def
                     FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                     WHERE t.tgname = $1 AND c.relname = $2 AND c.relnamespace = current_schema()::regnamespace",
                )
                .bind(name)
                .bind(table)
                .fetch_optional(pool)
                .await?;
                let kind = if when.contains("TRUNCATE") { 2 | 32 } else { 1 | 2 | 4 | 8 | 16 };
                let intact = row.is_some_and(|row| {
                    let enabled: String = row.try_get("enabled").unwrap_or_default();
                    let found: i32 = row.try_get("kind").unwrap_or_default();
                    let def: String = row.try_get("def").unwrap_or_default();
                    // `O` fires in every ordinary session, `A` always; `D`
                    // (disabled) and `R` (replicas only) do not.
                    matches!(enabled.as_str(), "O" | "A") && found == kind && def.ends_with(call)
                });
                if !intact {
                    missing.push(format!("trigger {name}"));
                }
            }
        }
    }
    Ok(missing)
}

/// `text`'s words, white space collapsed.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl crate::store::Store {
    /// The audit log's guards absent, disabled or changed (see [`missing`]).
    pub async fn audit_guards_missing(&self) -> Result<Vec<String>, StoreError> {
        missing(&self.pool, self.backend).await
    }
}
