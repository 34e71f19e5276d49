"""Start-up benchmark: how long after its process starts a gateway with 1,000 registered
sites is subscribed and storing (issue 17 item 6: < 1.5 s).

A Mosquitto on a free port, a registry of ``--sites`` sites (copies of the demo's first
site), and a paced feeder publishing telemetry of the first 8 sites the whole time.
Then, ``--runs`` times, a fresh ``bench/_gateway.py`` process (``run_gateway``, the
composition root the CLI runs, detectors on) on a new data dir (``cold``: the database
is created and migrated), then again on the same data dir (``warm``: a restart). Each
run prints, from the process start: its imports done (``ready``), subscribed
(``connected``) and the first message committed to the store (``storing``), with the
load average.

Usage::

    python bench/startup.py [--sites 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _fleet
from _fleet import fleet

from gateway.broker import start_broker

TARGET_S = 1.5


def _status(path: Path) -> dict[str, object]:
    try:
        loaded: dict[str, object] = json.loads(path.read_text())
        return loaded
    except (OSError, ValueError):
        return {}


def start_once(
    port: int, data_dir: Path, sites: Path, run: Path, timeout: float
) -> dict[str, float]:
    """One gateway process from start to its first commit; seconds to each milestone."""
    status, go = run / "status.json", run / "go"
    status.unlink(missing_ok=True)
    go.touch()  # start at once
    cmd = [
        sys.executable,
        str(_fleet.HERE / "_gateway.py"),
        *("--port", str(port), "--data-dir", str(data_dir), "--client-id", "startup-gw"),
        *("--status", str(status), "--go", str(go), "--sites", str(sites)),
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    seen: dict[str, float] = {}
    try:
        while time.perf_counter() - t0 < timeout and "storing" not in seen:
            s = _status(status)
            now = time.perf_counter() - t0
            if s.get("ready"):
                seen.setdefault("ready", now)
            if s.get("connected"):
                seen.setdefault("connected", now)
            if isinstance(s.get("stored"), int) and int(str(s["stored"])) > 0:
                seen["storing"] = now
            time.sleep(0.005)
    finally:
        proc.terminate()
        proc.wait(30)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    broker = start_broker(tmp / "broker")
    registry = _fleet.write_registry(fleet(args.sites), tmp / "sites.toml")
    feeder = subprocess.Popen(
        [
            sys.executable,
            str(_fleet.HERE / "_fleet.py"),
            *("--port", str(broker.port), "--nodes", "8", "--rate", "200", "--seconds", "600"),
        ],
        stdout=subprocess.DEVNULL,
    )
    print(f"{args.sites} registered sites; feeder: 200 msg/s from 8 of them")
    results: dict[str, list[float]] = {"cold": [], "warm": []}
    try:
        time.sleep(1.0)  # the feeder's publishers are connected
        for i in range(args.runs):
            data_dir = tmp / f"data{i}"
            for mode in ("cold", "warm"):
                seen = start_once(broker.port, data_dir, registry, tmp, 60)
                load = os.getloadavg()[0]
                results[mode].append(seen.get("storing", float("inf")))
                marks = ", ".join(f"{k} {v:.2f} s" for k, v in seen.items())
                print(f"  run {i + 1} {mode}: {marks}  (load {load:.2f})")
    finally:
        feeder.terminate()
        feeder.wait(30)
        broker.stop()
    for mode, values in results.items():
        median = statistics.median(values)
        print(
            f"{mode}: start -> storing median {median:.2f} s "
            f"(target {TARGET_S} s: ratio {median / TARGET_S:.2f})"
        )


if __name__ == "__main__":
    main()
