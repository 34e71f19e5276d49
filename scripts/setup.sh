#!/usr/bin/env bash
# Idempotent set-up shared by the demo and the test commands:
#   - system packages the suite needs (Mosquitto, InfluxDB 1.x, PostgreSQL, Chromium, poppler)
#     via apt-get;
#   - a virtual environment in .venv with the project and its dev extras.
#   - with --esphome, ESPHome in its own venv .venv-esphome (it pins paho-mqtt 1.x,
#     which the gateway's aiomqtt cannot share), for validating deploy/esphome/.
# Usage: scripts/setup.sh [--system] [--python] [--esphome]; with no flag, the first two.
set -euo pipefail
cd "$(dirname "$0")/.."

want_system=1
want_python=1
want_esphome=0
if [ $# -gt 0 ]; then
  want_system=0
  want_python=0
  for arg in "$@"; do
    case "$arg" in
      --system) want_system=1 ;;
      --python) want_python=1 ;;
      --esphome) want_esphome=1 ;;
      *) echo "unknown option $arg" >&2; exit 2 ;;
    esac
  done
fi

if [ "$want_system" = 1 ]; then
  need=()
  command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
  command -v mosquitto_pub >/dev/null 2>&1 || need+=(mosquitto-clients)
  [ -x /usr/bin/influxd ] || need+=(influxdb)
  # The state tests run their own cluster with initdb/pg_ctl (tests/pg_fixture.py).
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
    || need+=(postgresql)
  [ -x /usr/bin/chromium ] || need+=(chromium)
  command -v pdftoppm >/dev/null 2>&1 || need+=(poppler-utils)
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    # Debian's packages may start their own daemons; the tests never use them
    # (every test starts its own process on a free port).
  fi
fi

if [ "$want_python" = 1 ]; then
  python=${PYTHON:-python3}
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  stamp=.venv/.sumpwatch-installed
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$stamp"
  fi
fi

if [ "$want_esphome" = 1 ]; then
  python=${PYTHON:-python3}
  pins=deploy/esphome/requirements.txt
  stamp=.venv-esphome/.sumpwatch-installed
  if [ ! -f "$stamp" ] || [ "$pins" -nt "$stamp" ]; then
    [ -x .venv-esphome/bin/python ] || "$python" -m venv .venv-esphome
    .venv-esphome/bin/python -m pip install -q -r "$pins"
    touch "$stamp"
  fi
fi
