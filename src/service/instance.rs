//! The SQLite store's lock file: one `run` per SQLite store.

use std::fs::File;

use anyhow::{Context, bail};

/// For a SQLite store, an exclusive lock on the file `<database>.lock`
/// beside it, held (the returned file kept open) while `run` runs: SQLite
/// serves one instance, and a second `run` on the same file fails here with
/// a clear error instead of sharing chains it cannot fence. `None` for
/// PostgreSQL, which leases chains to any number of instances.
pub fn sqlite_lock(url: &str) -> anyhow::Result<Option<File>> {
    let Some(rest) = url.strip_prefix("sqlite:") else { return Ok(None) };
    let path = rest.trim_start_matches("//");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path.contains(":memory:") {
        return Ok(None);
    }
    let lock_path = format!("{path}.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open the lock file {lock_path}"))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another `custody-indexer run` already uses the SQLite store {path} (it holds {lock_path}): \
             SQLite serves one instance; use PostgreSQL to run several"
        ),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("cannot lock {lock_path}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_sqlite_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("store.db").display());
        let first = sqlite_lock(&url).unwrap();
        assert!(first.is_some());
        let second = sqlite_lock(&url).unwrap_err().to_string();
        assert!(second.contains("SQLite serves one instance"), "{second}");
        drop(first);
        assert!(sqlite_lock(&url).unwrap().is_some(), "free again once the first process ends");
        assert!(sqlite_lock("postgres://localhost/db").unwrap().is_none());
    }
}
