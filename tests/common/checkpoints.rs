//! Signed audit checkpoints as an instance writes them to its directory.

use std::{path::Path, time::Duration};

use custody_indexer::audit::checkpoint::Checkpoint;

/// The checkpoints in `dir`, oldest first.
pub fn files(dir: &Path) -> Vec<Checkpoint> {
    let mut found: Vec<Checkpoint> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|f| std::fs::read_to_string(f.unwrap().path()).ok())
        .filter_map(|text| Checkpoint::parse(&text, "file").ok())
        .collect();
    found.sort_by_key(|c| c.at);
    found
}

/// Waits (polling, with a deadline) for the `n`th checkpoint in `dir`.
pub async fn nth(dir: &Path, n: usize, within: Duration) -> Checkpoint {
    let what = format!("checkpoint {n} in {}", dir.display());
    super::eventually(within, &what, || async { files(dir).get(n - 1).cloned() }).await
}
