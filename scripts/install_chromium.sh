#!/usr/bin/env bash
# Headless Chromium for the report's browser tests (tests/report): Debian's chromium package, installed with apt-get
# where it is available. Idempotent and quiet; without it those tests skip and say why.
set -uo pipefail
for b in chromium chromium-browser google-chrome; do
  command -v "$b" >/dev/null 2>&1 && exit 0
done
command -v apt-get >/dev/null 2>&1 || { echo "chromium: no apt-get here; the browser tests will be skipped" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null 2>&1
