#!/usr/bin/env bash
# The whole test suite, with its own set-up (system packages, venv): first the
# static checks (import layers, lint, format, strict types), then pytest. Extra
# arguments go to pytest, e.g. scripts/test.sh -k ingest -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --system --python --esphome
.venv/bin/lint-imports --no-cache
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# Two worker processes, one test module each at a time (module fixtures stay shared):
# most integration tests wait on a broker, a browser or a demo, so two overlap on two
# cores. SUMPWATCH_TEST_WORKERS=0 runs in one process.
exec .venv/bin/python -m pytest -q -p no:cacheprovider \
    -n "${SUMPWATCH_TEST_WORKERS:-2}" --dist loadfile --durations=25 "$@"
