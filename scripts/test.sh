#!/usr/bin/env bash
# The whole test suite, as on a fresh machine: installs the pinned anvil,
# nats-server and axe-core, Debian's chromium and chromium-driver, softhsm2
# and opensc (the PKCS#11 signer's token), OpenBao (the Transit signer),
# builds the pinned local Solana
# network (all cached outside the clone), makes sure a PostgreSQL answers (or
# starts a throwaway one), then runs every test
# against real nodes, both store backends and a real browser, with the
# optional AWS KMS signer built in (its tests talk to a KMS stand-in). Every
# test binary runs even when one fails.
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
# shellcheck source=scripts/ensure-postgres.sh
source scripts/ensure-postgres.sh

cargo test --locked --no-fail-fast --features aws-kms "$@"
