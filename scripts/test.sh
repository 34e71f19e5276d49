#!/usr/bin/env bash
# The whole test suite, with its own set-up (system packages, venv). Extra
# arguments go to pytest, e.g. scripts/test.sh -k ingest -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --system --python --esphome
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
