#!/usr/bin/env bash
# The test command of the README: set up (idempotent), then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the az:// tests need Azurite (an npm package): installed when npm is there, else those tests skip
bash scripts/install_azurite.sh || echo "azurite: install failed; the az:// tests will be skipped" >&2
# the report's browser tests need a headless Chromium: installed with apt-get where it can be, else those tests skip
bash scripts/install_chromium.sh || echo "chromium: install failed; the report's browser tests will be skipped" >&2
.venv/bin/python -m ruff check consumer tests benchmarks examples
.venv/bin/python -m mypy
.venv/bin/python -m pytest -q "$@"
