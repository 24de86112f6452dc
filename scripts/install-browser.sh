#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver when missing (the console's
# browser tests drive them through WebDriver) and prints chromedriver's path.
# Safe to run repeatedly.
set -euo pipefail

BIN="${CHROMEDRIVER_BIN:-/usr/bin/chromedriver}"
if [ ! -x "$BIN" ] || ! command -v chromium >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  command -v apt-get >/dev/null || { echo "install-browser: apt-get is required (or set CHROMEDRIVER_BIN)" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2; then
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
  fi
fi
[ -x "$BIN" ] || { echo "install-browser: no chromedriver at $BIN" >&2; exit 1; }
echo "$BIN"
