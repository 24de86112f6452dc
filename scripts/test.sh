#!/usr/bin/env bash
# The whole test suite, as on a fresh machine: installs the pinned anvil,
# nats-server and axe-core, Debian's chromium and chromium-driver, softhsm2
# and opensc (the PKCS#11 signer's token), OpenBao (the Transit signer),
# a Java runtime (OpenAPI Generator's), builds the pinned local Solana
# network (all cached outside the clone), makes sure a PostgreSQL answers (or
# starts a throwaway one), then runs every test
# against real nodes, both store backends and a real browser, with the
# optional AWS KMS signer built in (its tests talk to a KMS stand-in). Every
# test binary runs even when one fails, and each binary's time is printed
# at the end, slowest first.
set -euo pipefail
cd "$(dirname "$0")/.."

ANVIL_BIN=$(scripts/install-anvil.sh)
export ANVIL_BIN
SOLANA_NODE_BIN=$(scripts/install-solana-node.sh)
export SOLANA_NODE_BIN
NATS_SERVER_BIN=$(scripts/install-nats.sh)
export NATS_SERVER_BIN
CHROMEDRIVER_BIN=$(scripts/install-browser.sh)
export CHROMEDRIVER_BIN
AXE_CORE_JS=$(scripts/install-axe.sh)
export AXE_CORE_JS
SOFTHSM2_MODULE=$(scripts/install-softhsm.sh)
export SOFTHSM2_MODULE
OPENBAO_BIN=$(scripts/install-openbao.sh)
export OPENBAO_BIN
JAVA_BIN=$(scripts/install-java.sh)
export JAVA_BIN
# shellcheck source=scripts/ensure-postgres.sh
source scripts/ensure-postgres.sh

# (No trap here: ensure-postgres.sh's stops a throwaway PostgreSQL.)
log=$(mktemp)
status=0
cargo test --locked --no-fail-fast --features aws-kms "$@" 2>&1 | tee "$log" || status=$?
echo "test binaries, slowest first:"
awk '
  /^ +Running / { sub(/^ +Running /, ""); sub(/ \(.*/, ""); binary = $0 }
  /^ +Doc-tests / { sub(/^ +/, ""); binary = $0 }
  /^test result:/ { n = split($0, words, " "); printf "%10s  %s  (%s)\n", words[n], binary, $3 }
' "$log" | sort -k1,1 -rn
rm -f "$log"
exit "$status"
