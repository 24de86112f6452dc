//! anvil's state file, mended before anvil loads it.
//!
//! anvil (1.7) makes a new genesis block at each start, adds it to the
//! blocks it loads, and dumps them all: a chain stopped and started twice
//! holds several blocks numbered 0, kept in a map without order, and the
//! next load takes any of them for block 0. The chain then answers another
//! genesis hash than the one the store indexed. Before each start, dev keeps
//! the one genesis block 1 descends from.

use std::path::Path;

use alloy::{consensus::Header, primitives::B256};
use anyhow::Context;
use serde_json::Value;

/// Rewrites the state file at `path` with a single block 0, when it holds
/// more; a file that does not exist is left alone.
pub fn mend(path: &Path) -> anyhow::Result<()> {
    let Ok(bytes) = std::fs::read(path) else { return Ok(()) };
    let mut state: Value =
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not anvil's state", path.display()))?;
    if !keep_one_genesis(&mut state).with_context(|| format!("{} is not anvil's state", path.display()))? {
        return Ok(());
    }
    let mended = path.with_extension("mended.json");
    std::fs::write(&mended, serde_json::to_vec(&state)?)
        .and_then(|()| std::fs::rename(&mended, path))
        .with_context(|| format!("cannot rewrite {}", path.display()))
}

/// Drops every block numbered 0 but the chain's own genesis: the one block
/// 1 names as its parent, or the earliest when there is no block 1. Returns
/// whether a block was dropped.
pub fn keep_one_genesis(state: &mut Value) -> anyhow::Result<bool> {
    let Some(blocks) = state.get_mut("blocks").and_then(Value::as_array_mut) else { return Ok(false) };
    let headers = blocks
        .iter()
        .map(|block| serde_json::from_value::<Header>(block["header"].clone()))
        .collect::<Result<Vec<_>, _>>()
        .context("a block header does not read")?;
    let geneses: Vec<(usize, &Header)> = headers.iter().enumerate().filter(|(_, h)| h.number == 0).collect();
    if geneses.len() < 2 {
        return Ok(false);
    }
    let parent: Option<B256> = headers.iter().find(|h| h.number == 1).map(|h| h.parent_hash);
    let keep = match parent {
        Some(parent) => geneses.iter().find(|(_, h)| h.hash_slow() == parent).map(|(i, _)| *i),
        None => geneses.iter().min_by_key(|(_, h)| h.timestamp).map(|(i, _)| *i),
    }
    .context("no block 0 is the parent of block 1")?;
    let drop: Vec<usize> = geneses.iter().map(|(i, _)| *i).filter(|i| *i != keep).collect();
    let mut index = 0;
    blocks.retain(|_| {
        index += 1;
        !drop.contains(&(index - 1))
    });
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state anvil 1.7.1 dumped after its third start (`--block-time 1`):
    /// three blocks numbered 0.
    fn three_starts() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/anvil/state-three-starts.json");
        serde_json::from_slice(&std::fs::read(path).expect("the fixture is in the repository")).unwrap()
    }

    fn geneses(state: &Value) -> Vec<B256> {
        state["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| serde_json::from_value::<Header>(b["header"].clone()).unwrap())
            .filter(|h| h.number == 0)
            .map(|h| h.hash_slow())
            .collect()
    }

    #[test]
    fn only_the_genesis_block_one_descends_from_is_kept() {
        let mut state = three_starts();
        let before = state["blocks"].as_array().unwrap().len();
        assert_eq!(geneses(&state).len(), 3);
        let block_one = state["blocks"].as_array().unwrap().iter().find(|b| b["header"]["number"] == "0x1");
        let parent: B256 = block_one.unwrap()["header"]["parentHash"].as_str().unwrap().parse().unwrap();

        assert!(keep_one_genesis(&mut state).unwrap());
        assert_eq!(geneses(&state), vec![parent]);
        assert_eq!(state["blocks"].as_array().unwrap().len(), before - 2, "only blocks 0 dropped");
        assert!(!keep_one_genesis(&mut state).unwrap(), "a mended state is left as it is");
    }

    #[test]
    fn without_block_one_the_earliest_genesis_is_kept() {
        let mut state = three_starts();
        let blocks = state["blocks"].as_array_mut().unwrap();
        blocks.retain(|b| b["header"]["number"] == "0x0");
        let earliest =
            blocks.iter().min_by_key(|b| b["header"]["timestamp"].as_str().unwrap().to_owned()).cloned();
        assert!(keep_one_genesis(&mut state).unwrap());
        assert_eq!(state["blocks"].as_array().unwrap(), &vec![earliest.unwrap()]);
    }

    #[test]
    fn a_state_with_one_genesis_or_no_blocks_is_left_alone() {
        let mut empty = serde_json::json!({ "accounts": {} });
        assert!(!keep_one_genesis(&mut empty).unwrap());
        let mut broken = serde_json::json!({ "blocks": [{ "header": { "number": "zero" } }] });
        assert!(keep_one_genesis(&mut broken).is_err(), "a header that does not read is an error");
    }
}
