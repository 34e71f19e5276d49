"""Scale-out benchmark: 1, 2 and 4 gateway processes sharing one stream.

Two ways of sharing, measured in the same run on the same broker:

* ``$share``: an MQTT v5 shared subscription; Mosquitto deals messages to the
  members round-robin. Cheapest, but a site's readings are scattered over the
  gateways, so no detector sees a whole site (tests/test_faults_sharding.py).
* partition (gateway.ingest.mqtt.SitePartition): each site belongs to the gateway
  with ``crc32(site) % shards == shard``, so its readings reach one detector.
  "site subscriptions": each gateway subscribes to its registry sites' topics only.
  "all topics": each gateway reads the whole stream and acks the others' unparsed.

For each row, N messages from ``mosquitto_pub -l`` publishers (one per node and
site) are queued in the gateways' persistent sessions while they are down; then all
gateways start at once (already imported, waiting for a go file) and the combined
rate is N / (first message received by any -> last commit in any gateway), also as
a ratio of mosquitto_sub draining the same backlog and of the single gateway's
rate. Each gateway has its own SQLite file (SQLite has one writer; a shared file
would serialise them).

    python bench/scaleout.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _fleet
import psutil
from _fleet import fleet, print_facts, print_table

from gateway.broker import BrokerProcess, start_broker

RUNNER = Path(__file__).resolve().parent / "_gateway.py"
TIMEOUT_S = 180.0


@dataclass
class Gateway:
    """A gateway child process and its status file."""

    proc: subprocess.Popen[bytes]
    status: Path

    def read(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.status.read_text()))
        except (OSError, ValueError):
            return {}

    def cpu(self) -> float:
        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)


def spawn_gateways(
    broker: BrokerProcess, root: Path, count: int, mode: str, sites: Path, tag: str
) -> tuple[list[Gateway], Path]:
    """Start ``count`` gateway processes, imported and waiting for the go file."""
    go = root / f"go-{tag}"
    gws = []
    for i in range(count):
        status = root / f"status-{tag}-{i}.json"
        cmd = [
            sys.executable,
            str(RUNNER),
            "--port",
            str(broker.port),
            "--data-dir",
            str(root / f"gw{i}"),
            "--client-id",
            f"{root.name}-gw{i}",
            "--status",
            str(status),
            "--go",
            str(go),
            "--sites",
            str(sites),
        ]
        if mode == "share":
            cmd += ["--group", root.name]
        elif count > 1:
            cmd += ["--shard", str(i), "--shards", str(count)]
            if mode == "partition-all":
                cmd.append("--all-topics")
        gws.append(Gateway(subprocess.Popen(cmd, stdin=subprocess.DEVNULL), status))
    wait_for(gws, "ready")
    return gws, go


def wait_for(gws: list[Gateway], key: str) -> None:
    deadline = time.monotonic() + 60
    while not all(g.read().get(key) for g in gws):
        if time.monotonic() > deadline or any(g.proc.poll() is not None for g in gws):
            stop_gateways(gws)
            raise SystemExit(f"gateways not {key}")
        time.sleep(0.01)


def stop_gateways(gws: list[Gateway]) -> None:
    for g in gws:
        if g.proc.poll() is None:
            g.proc.terminate()
    for g in gws:
        try:
            g.proc.wait(20)
        except subprocess.TimeoutExpired:
            g.proc.kill()
            g.proc.wait()


def run_row(
    broker: BrokerProcess,
    root: Path,
    count: int,
    mode: str,
    nodes: list[_fleet.Node],
    files: list[Path],
    n: int,
    sites: Path,
) -> dict[str, Any]:
    """Drain: the gateways' sessions get N messages while they are down; then all
    start at once; the clock runs from the first message any of them receives to the
    last commit (start-up, the same for every row, is left out)."""
    gws, go = spawn_gateways(broker, root, count, mode, sites, "session")
    go.touch()
    wait_for(gws, "connected")  # sessions (and subscriptions) exist now
    stop_gateways(gws)
    _fleet.wait_all(_fleet.start_publishers(broker.port, nodes, files), TIMEOUT_S)
    gws, go = spawn_gateways(broker, root, count, mode, sites, "drain")
    try:
        cpu0 = [g.cpu() for g in gws]
        bcpu0 = broker_cpu(broker)
        go.touch()
        deadline = time.time() + TIMEOUT_S
        while True:
            states = [g.read() for g in gws]
            done = sum(s.get("stored", 0) + s.get("duplicates", 0) for s in states)
            if done >= n:
                break
            if time.time() > deadline:
                raise SystemExit(f"{mode} x{count}: {done}/{n} committed in {TIMEOUT_S:.0f}s")
            time.sleep(0.01)
        cpu = sum(g.cpu() - c for g, c in zip(gws, cpu0, strict=True))
        bcpu = broker_cpu(broker) - bcpu0
        first = min(float(s["first_at"]) for s in states if s.get("first_at"))
        elapsed = max(float(s["last_commit_at"]) for s in states) - first
        shares = [int(s.get("stored", 0)) for s in states]
        skipped = sum(int(s.get("skipped", 0)) for s in states)
    finally:
        stop_gateways(gws)
    wall = time.time() - go.stat().st_mtime
    return {
        "rate": n / elapsed,
        "cpu": cpu / wall,
        "broker_cpu": bcpu / wall,
        "shares": shares,
        "skipped": skipped,
    }


def broker_cpu(broker: BrokerProcess) -> float:
    """CPU seconds the broker has used so far."""
    t = psutil.Process(broker.process.pid).cpu_times()
    return float(t.user + t.system)


def raw_rate(broker: BrokerProcess, nodes: list[_fleet.Node], files: list[Path], n: int) -> float:
    """mosquitto_sub draining the same backlog from its persistent session."""
    sub = [_fleet.MOSQUITTO_SUB, "-p", str(broker.port), "-V", "5", "-q", "1"]
    sub += ["-t", "sumpwatch/v1/+/+/telemetry", "-i", "scale-raw", "-c", "-x", "3600"]
    subprocess.run([*sub, "-E"], check=True, timeout=30)
    _fleet.wait_all(_fleet.start_publishers(broker.port, nodes, files), TIMEOUT_S)
    t0 = time.perf_counter()
    _fleet.wait_all([subprocess.Popen([*sub, "-C", str(n)], stdout=subprocess.DEVNULL)], TIMEOUT_S)
    return n / (time.perf_counter() - t0)


def main() -> None:
    """Run every row and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="30,000 messages per row")
    parser.add_argument("--messages", type=int)
    parser.add_argument("--nodes", type=int, default=16, help="publishers = sites")
    parser.add_argument("--counts", default="1,2,4", help="gateway counts to run")
    args = parser.parse_args()
    n = args.messages or (30_000 if args.quick else 100_000)
    per_node = n // args.nodes
    n = per_node * args.nodes
    counts = [int(c) for c in args.counts.split(",")]

    print_facts(_fleet.machine_facts())
    rows = []
    with tempfile.TemporaryDirectory(prefix="sumpwatch-scaleout-") as tmp:
        root = Path(tmp)
        nodes = fleet(args.nodes, "scale")
        sites = _fleet.write_registry(nodes, root / "sites.toml")
        broker = start_broker(root / "broker")
        try:
            raw = raw_rate(broker, nodes, _fleet.write_line_files(nodes, per_node, root / "l0"), n)
            single = 0.0
            for mode in ("share", "partition", "partition-all"):
                for count in counts:
                    if mode != "share" and count == 1:
                        continue  # the same as share x1: one gateway, whole stream
                    # Fresh device times per row, so nothing is refused as too old.
                    files = _fleet.write_line_files(nodes, per_node, root / f"l-{mode}{count}")
                    row_root = root / f"{mode}{count}"
                    row_root.mkdir()
                    r = run_row(broker, row_root, count, mode, nodes, files, n, sites)
                    if count == 1:
                        single = r["rate"]
                    label = {
                        "share": "$share",
                        "partition": "partition, site subscriptions",
                        "partition-all": "partition, all topics",
                    }[mode]
                    rows.append(
                        [
                            "1 (no sharing)" if count == 1 else f"{count}, {label}",
                            f"{r['rate']:,.0f}",
                            f"{r['rate'] / raw:.2f}",
                            f"{r['rate'] / single:.2f}" if single else "-",
                            f"{r['cpu']:.2f} / {r['broker_cpu']:.2f}",
                            " / ".join(f"{x:,}" for x in r["shares"]),
                            f"{r['skipped']:,.0f}",
                        ]
                    )
                    print(rows[-1], flush=True)
        finally:
            broker.stop()
    cmd = "python bench/scaleout.py" + (" --quick" if args.quick else "")
    print_table(
        f"Scale-out, QoS 1, SQLite per gateway, {n:,} messages, {args.nodes} sites ({cmd}); "
        f"mosquitto_sub on the same stream: {raw:,.0f} msg/s",
        [
            "gateways",
            "combined msg/s",
            "/ mosquitto_sub",
            "/ one gateway",
            "CPU cores: gateways / broker",
            "stored by each",
            "acked unprocessed",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
