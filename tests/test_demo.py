"""Issue 2: the demo command starts everything, serves health, stores readings, stops on SIGINT;
issue 19: it announces its homes to Home Assistant (retained discovery configs)."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from gateway.broker import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _health(port: int) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]
    except OSError:
        return None


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return int(conn.execute("SELECT COUNT(*) FROM readings").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def _broker_port(data: Path) -> int:
    """The demo broker's port, from the config it wrote (Mosquitto) in its data dir."""
    conf = (data / "broker" / "mosquitto.conf").read_text()
    match = re.search(r"^listener (\d+) ", conf, re.M)
    assert match, conf
    return int(match.group(1))


def _retained_discovery(port: int, timeout: float = 30.0) -> set[str]:
    """Sites with a retained ``homeassistant/+/+/config`` on the broker (what a Home
    Assistant connecting now would read)."""
    sites: set[str] = set()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-ha")

    def on_message(_c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
        if msg.retain and msg.payload:
            sites.add(json.loads(msg.payload)["device"]["identifiers"][0])

    client.on_message = on_message
    client.on_connect = lambda c, *_: c.subscribe("homeassistant/+/+/config", qos=1)
    client.connect("127.0.0.1", port)
    client.loop_start()
    deadline = time.monotonic() + timeout
    while len(sites) < 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    client.disconnect()
    client.loop_stop()
    return sites


def test_demo_serves_health_stores_simulated_homes_and_stops_on_sigint(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "demo"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "demo", "--port", str(port), "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        healthy = stored = False
        while time.monotonic() < deadline and not (healthy and stored):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            health = _health(port)
            healthy = healthy or (health is not None and health["status"] == "ok")
            stored = _stored(data / "sumpwatch.db") > 0
            time.sleep(0.5)
        assert healthy, "demo never reported healthy"
        assert stored, "demo stored no readings within 30 s"
        with sqlite3.connect(data / "sumpwatch.db") as conn:
            sites = conn.execute("SELECT COUNT(DISTINCT site_id) FROM readings").fetchone()[0]
        assert sites >= 10  # about a dozen simulated homes report
        # Every home is announced to Home Assistant, retained for one that connects later.
        assert len(_retained_discovery(_broker_port(data))) >= 10
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            pytest.fail(f"demo did not stop on SIGINT:\n{out}")
    assert proc.returncode == 0, out
    assert "demo stopped" in out
    assert _health(port) is None
