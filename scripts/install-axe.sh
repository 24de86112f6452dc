#!/usr/bin/env bash
# Installs the pinned axe-core (the accessibility checker the console's
# browser tests inject into each page) from the npm registry into a cache
# outside the clone and prints the path of axe.min.js. Safe to run repeatedly.
set -euo pipefail

AXE_VERSION="${AXE_VERSION:-4.14.1}"
CACHE="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}"
PREFIX="$CACHE/axe-core-$AXE_VERSION"
FILE="$PREFIX/node_modules/axe-core/axe.min.js"

if [ ! -f "$FILE" ]; then
  command -v npm >/dev/null || { echo "install-axe: npm is required (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$PREFIX"
  npm install --silent --no-audit --no-fund --prefix "$PREFIX" "axe-core@$AXE_VERSION" >&2
fi
[ -f "$FILE" ] || { echo "install-axe: no axe.min.js under $PREFIX" >&2; exit 1; }
echo "$FILE"
