"""Issue 2: the demo command starts everything, serves health, stores readings, stops on SIGINT."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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
