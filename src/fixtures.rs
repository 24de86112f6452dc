//! Recorded mainnet JSON-RPC responses for the decoding unit tests, in
//! `tests/fixtures/mainnet/{evm,solana}` (provenance in its SOURCES.md), or
//! under `MAINNET_FIXTURES` when set. A missing fixture fails the test: a test
//! that passes without its data proves nothing.

use std::path::PathBuf;

/// The `result` of the recorded response `family/name` (envelopes
/// `{"jsonrpc", "id", "result"}` and bare results both occur).
pub fn mainnet(family: &str, name: &str) -> serde_json::Value {
    let root = std::env::var_os("MAINNET_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mainnet"));
    let path = root.join(family).join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("mainnet fixture {} is missing: {e}", path.display()));
    let value: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    value.get("result").cloned().unwrap_or(value)
}
