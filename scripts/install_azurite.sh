#!/usr/bin/env bash
# Optional: Azurite (the Azure Storage emulator, an npm package) for the az:// tests, which skip without it.
# Installs only when npm is present and azurite-blob is not; takes about a minute. Called by scripts/test.sh.
set -euo pipefail
if command -v azurite-blob >/dev/null; then
  echo "azurite already installed: $(command -v azurite-blob)"
elif command -v npm >/dev/null; then
  npm install -g --no-fund --no-audit azurite >/dev/null
  echo "azurite installed: $(command -v azurite-blob)"
else
  echo "npm not found: the az:// tests will be skipped (install Node.js and npm, then rerun)" >&2
fi
