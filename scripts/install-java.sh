#!/usr/bin/env bash
# Installs Debian's default-jre-headless (the Java runtime OpenAPI
# Generator's jar runs on, for the generated-clients test) when no `java`
# answers, and prints the `java` binary's path. Safe to run repeatedly.
set -euo pipefail

if [ -n "${JAVA_BIN:-}" ] && "$JAVA_BIN" -version >/dev/null 2>&1; then
  echo "$JAVA_BIN"
  exit 0
fi
if ! command -v java >/dev/null || ! java -version >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  command -v apt-get >/dev/null || { echo "install-java: apt-get is required (or set JAVA_BIN)" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y -qq --no-install-recommends default-jre-headless >&2; then
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends default-jre-headless >&2
  fi
fi
JAVA=$(command -v java) || { echo "install-java: no java after installing default-jre-headless" >&2; exit 1; }
readlink -f "$JAVA"
