"""Issue 12 (items 15, 16): the demo stops every child on SIGTERM and SIGINT, and a
demo killed with SIGKILL resumes storing when run again on the same data dir."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gateway.broker import free_port
from tests.test_demo import _health, _stored

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _start_demo(data: Path) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "demo", "--port", str(port), "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, port


def _wait_storing(
    proc: subprocess.Popen[str], db: Path, more_than: int, timeout: float = 45
) -> int:
    """Wait until the demo is healthy and has stored more than ``more_than`` readings."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        count = _stored(db)
        if count > more_than:
            return count
        time.sleep(0.5)
    pytest.fail(f"demo stored no more than {more_than} readings within {timeout:.0f}s")


def _children(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_demo_stops_the_broker_the_simulator_and_itself(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, port = _start_demo(tmp_path / "demo")
    try:
        _wait_storing(proc, tmp_path / "demo" / "sumpwatch.db", 0)
        children = _children(proc.pid)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "mosquitto" in names and "simulate" in names, names
        proc.send_signal(sig)  # to the demo process alone, as `kill` or systemd would
        out, _ = proc.communicate(timeout=60)  # each stage of the stop is bounded
    finally:
        if proc.poll() is None:
            proc.kill()
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        child.kill()
    assert alive == [], f"children survived {sig.name}: {alive}"
    assert "demo stopped" in out
    assert _health(port) is None


def test_a_demo_killed_with_sigkill_resumes_storing_when_rerun_on_its_data_dir(
    tmp_path: Path,
) -> None:
    data = tmp_path / "demo"
    db = data / "sumpwatch.db"
    # The session's own processes (Chromium, influxd, brokers of other fixtures) are
    # not this test's to stop.
    ours_already = {p.pid for p in psutil.Process().children(recursive=True)}
    first, _ = _start_demo(data)
    orphans: list[psutil.Process] = []
    try:
        _wait_storing(first, db, 0)
        orphans = _children(first.pid)
        first.kill()  # SIGKILL: no cleanup runs; the broker and simulator live on
        first.wait()
        assert any(p.is_running() for p in orphans)
        before = _stored(db)
        second, _ = _start_demo(data)
        try:
            # The rerun stops the orphans (one broker per persistence dir) and, with
            # fresh boot ids, stores new readings rather than refusing them as repeats.
            _wait_storing(second, db, before + 20)
            _, alive = psutil.wait_procs(orphans, timeout=10)
            assert alive == [], f"the killed demo's children still run: {alive}"
            brokers = [c for c in _children(second.pid) if "mosquitto" in " ".join(c.cmdline())]
            assert len(brokers) == 1
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=30)
    finally:
        # Whatever this test started, orphaned or not, does not outlive it.
        started = [
            p for p in psutil.Process().children(recursive=True) if p.pid not in ours_already
        ]
        for p in [*started, *orphans]:
            with contextlib.suppress(psutil.Error):
                p.kill()
