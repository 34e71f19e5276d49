#!/usr/bin/env bash
# The demo: broker, a dozen simulated homes, the gateway and its dashboard.
# Needs only Python 3.11+; uses Mosquitto when installed, else the embedded amqtt broker.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --python
exec .venv/bin/sumpwatch demo "$@"
