#!/usr/bin/env bash
# Builds the pinned local Solana network used by the tests (tools/solana-node,
# surfpool-core 1.6.1) into a cache outside the clone and prints the binary's
# path. The first build takes about 6 minutes; later runs reuse it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}"
export CARGO_TARGET_DIR="$CACHE/solana-node-target"
cargo build --quiet --locked --manifest-path "$root/tools/solana-node/Cargo.toml" >&2
echo "$CARGO_TARGET_DIR/debug/custody-indexer-solana-node"
