#!/usr/bin/env bash
# Installs the pinned anvil (Foundry's local EVM node) from the npm registry into a
# cache outside the clone and prints the binary's path. Safe to run repeatedly.
set -euo pipefail

ANVIL_VERSION="${ANVIL_VERSION:-1.7.1}"
CACHE="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}"
PREFIX="$CACHE/anvil-$ANVIL_VERSION"
BIN="$PREFIX/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"

if [ ! -x "$BIN" ]; then
  command -v npm >/dev/null || { echo "install-anvil: npm is required (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$PREFIX"
  npm install --silent --no-audit --no-fund --prefix "$PREFIX" \
    "@foundry-rs/anvil-linux-amd64@$ANVIL_VERSION" >&2
fi
if [ ! -x "$BIN" ]; then
  BIN=$(find "$PREFIX/node_modules" -type f -name anvil -perm -u+x | head -n 1)
fi
[ -x "$BIN" ] || { echo "install-anvil: no anvil binary under $PREFIX" >&2; exit 1; }
echo "$BIN"
