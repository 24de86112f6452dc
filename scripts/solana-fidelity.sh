#!/usr/bin/env bash
# Runs the Solana tests against Agave's solana-test-validator (4.2.2) instead of
# the default surfpool network: the fidelity check. Builds the validator helper
# (tools/solana-validator, about 30 minutes and libclang-dev the first time),
# then runs the tests in a network namespace of their own, since the
# validator's RPC binds 0.0.0.0. PostgreSQL tests get a throwaway cluster
# inside the namespace. Needs root (unshare) and iproute2.
#
# Known difference: this validator answers getTransaction only once a slot is
# finalized, so the signatures strategy never sees a deposit as PENDING; the
# test that checks PENDING accepts CONFIRMED for it when
# CUSTODY_INDEXER_FIDELITY is set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE="${CUSTODY_INDEXER_CACHE:-$HOME/.cache/custody-indexer}"
if ! dpkg -s libclang-dev >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev
fi
CARGO_TARGET_DIR="$CACHE/solana-validator-target" \
  cargo build --quiet --locked --manifest-path "$root/tools/solana-validator/Cargo.toml"
validator="$CACHE/solana-validator-target/debug/custody-indexer-solana-validator"

exec unshare -n -- bash -c '
  set -euo pipefail
  ip link set lo up
  cd "$1"
  export SOLANA_NODE_BIN="$2" CUSTODY_INDEXER_FIDELITY=1 TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test
  source scripts/ensure-postgres.sh
  cargo test --locked --test deposits -- --test-threads 1 solana_watcher:: solana_cli::
' fidelity "$root" "$validator"
