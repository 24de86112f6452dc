#!/usr/bin/env bash
# The whole test suite, as on a fresh machine: installs the pinned anvil, makes
# sure a PostgreSQL answers (or starts a throwaway one), then runs every test
# against real nodes and both store backends.
set -euo pipefail
cd "$(dirname "$0")/.."

ANVIL_BIN=$(scripts/install-anvil.sh)
export ANVIL_BIN
# shellcheck source=scripts/ensure-postgres.sh
source scripts/ensure-postgres.sh

cargo test --locked "$@"
