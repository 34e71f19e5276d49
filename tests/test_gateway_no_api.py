"""``sumpwatch gateway --no-api`` as a process: ingestion with its state in
PostgreSQL, no HTTP listener, and a clean stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from gateway.broker import BrokerProcess, free_port
from tests.conftest import DEMO_SITES
from tests.mqtt_helpers import pit_messages, publish

pytestmark = pytest.mark.integration


def _stored(data_dir: Path) -> int:
    import sqlite3

    path = data_dir / "sumpwatch.db"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        try:
            return int(conn.execute("SELECT COUNT(*) FROM readings").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def _dead_letters(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT COUNT(*) FROM deadletters").fetchone()
    return 0 if row is None else int(row[0])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_gateway_without_api_ingests_keeps_state_in_postgresql_and_serves_no_http(
    tmp_path: Path, mosquitto: BrokerProcess, pg_url: str
) -> None:
    data, port = tmp_path / "data", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUMPWATCH_")}
    env.update(
        SUMPWATCH_DATA_DIR=str(data),
        SUMPWATCH_SITES_FILE=str(DEMO_SITES),
        SUMPWATCH_MQTT__HOST=mosquitto.host,
        SUMPWATCH_MQTT__PORT=str(mosquitto.port),
        SUMPWATCH_MQTT__CLIENT_ID="gw-no-api",
        SUMPWATCH_API__PORT=str(port),
        SUMPWATCH_STORE__STATE_URL=pg_url,
        SUMPWATCH_REPORTS__SCHEDULE="false",
    )
    log = (tmp_path / "gateway.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "gateway", "--no-api"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        # Its persistent session exists once it has subscribed: until then the broker
        # would drop what is published.
        while "subscribed" not in (tmp_path / "gateway.log").read_text().lower():
            assert proc.poll() is None, (tmp_path / "gateway.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "gateway.log").read_text()
            time.sleep(0.1)
        messages = [*pit_messages(5), (pit_messages(1)[0][0], b"not json")]
        publish(mosquitto.host, mosquitto.port, messages)
        while (_stored(data), _dead_letters(pg_url)) != (5, 1):
            assert time.monotonic() < deadline, (tmp_path / "gateway.log").read_text()
            time.sleep(0.1)
        assert not _listening(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        log.close()
    assert code == 0, (tmp_path / "gateway.log").read_text()
