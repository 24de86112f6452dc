#!/usr/bin/env bash
# Installs Debian's softhsm2 (a PKCS#11 token in software, for the signer's
# tests) and opensc (pkcs11-tool) when missing, and prints the PKCS#11
# module's path. Safe to run repeatedly.
set -euo pipefail

MODULE="${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}"
if [ ! -f "$MODULE" ] || ! command -v softhsm2-util >/dev/null || ! command -v pkcs11-tool >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  command -v apt-get >/dev/null || { echo "install-softhsm: apt-get is required (or set SOFTHSM2_MODULE)" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y -qq --no-install-recommends softhsm2 opensc >&2; then
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends softhsm2 opensc >&2
  fi
fi
[ -f "$MODULE" ] || { echo "install-softhsm: no PKCS#11 module at $MODULE" >&2; exit 1; }
echo "$MODULE"
