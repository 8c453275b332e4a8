#!/usr/bin/env bash
# The demo command of the README: set up (idempotent), then `consumer demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/consumer demo "$@"
