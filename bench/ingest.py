"""Ingest benchmark: simulated fleet -> real Mosquitto -> gateway -> SQLite.

Prints, from ONE run on this machine (figures are only comparable inside a run;
the machine is shared):

1. ``mosquitto_sub`` (C, QoS 1) consuming N messages that ``mosquitto_pub -l``
   publishers blast at full speed: the raw rate this machine can move the stream.
2. The gateway (``run_gateway``, the real composition root, in this process)
   consuming the same N messages, QoS 1, committed to SQLite: its rate, as a ratio of
   (1), its CPU (cores) and peak RSS.
3. The gateway at a controlled rate (default 5,000 msg/s) fed by a separate paced
   feeder process: p50/p99/max latency from publish to stored (commit) and, when a
   rules engine is wired into the pipeline, from publish to finding.

Usage::

    python bench/ingest.py            # 100,000 messages, 15 s at 5,000 msg/s
    python bench/ingest.py --quick    # 20,000 messages, 5 s at 5,000 msg/s
    python bench/ingest.py --profile  # also print a pyinstrument profile of (2)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

import _fleet
from _fleet import REPO, fleet, percentile, print_facts, print_table

from gateway.broker import BrokerProcess, start_broker
from gateway.domain import Reading
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings

TIMEOUT_S = 120.0
OVERRIDES: dict[str, Any] = {}


def broker_cpu(broker: BrokerProcess) -> float:
    """CPU seconds the broker process has used so far."""
    t = psutil.Process(broker.process.pid).cpu_times()
    return float(t.user + t.system)


@dataclass
class Probe:
    """Records, for each committed reading, seconds from its device time (stamped at
    publish by the feeder) to the end of its commit."""

    latencies: list[float] = field(default_factory=list)
    enabled: bool = False

    def install(self, runtime: Runtime) -> None:
        store = runtime.store
        inner = store.write

        async def write(readings: Sequence[Reading]) -> int:
            n = await inner(readings)
            if self.enabled:
                now = time.time()
                self.latencies.extend(now - r.ts.timestamp() for r in readings)
            return n

        store.write = write  # type: ignore[method-assign]


def settings_for(broker: BrokerProcess, data_dir: Path, **overrides: Any) -> Settings:
    """Gateway settings on the bench broker with defaults otherwise."""
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        data_dir=data_dir,
        mqtt_host=broker.host,
        mqtt_port=broker.port,
        mqtt_client_id=f"bench-gw-{uuid.uuid4().hex[:6]}",
        **overrides,
    )


def raw_sub_rate(broker: BrokerProcess, nodes: list[_fleet.Node], files: list[Path], n: int) -> float:
    """mosquitto_sub's rate on the stream: first publish to last message received."""
    sub = subprocess.Popen(
        [
            _fleet.MOSQUITTO_SUB,
            "-h",
            broker.host,
            "-p",
            str(broker.port),
            "-V",
            "5",
            "-q",
            "1",
            "-i",
            "bench-raw-sub",
            "-t",
            "sumpwatch/v1/+/+/telemetry",
            "-C",
            str(n),
        ],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # subscribed
    t0 = time.perf_counter()
    pubs = _fleet.start_publishers(broker.port, nodes, files)
    try:
        sub.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        sub.kill()
        raise SystemExit("mosquitto_sub did not receive every message in time") from None
    elapsed = time.perf_counter() - t0
    _fleet.wait_all(pubs, 10)
    return n / elapsed


async def _wait_stored(runtime: Runtime, n: int, timeout: float) -> float:
    """Wait until ``n`` readings are committed; return when (perf_counter)."""
    deadline = time.perf_counter() + timeout
    m = runtime.metrics
    while m.stored + m.duplicates < n:
        if time.perf_counter() > deadline:
            raise SystemExit(f"gateway stored {m.stored}/{n} within {timeout:.0f}s")
        await asyncio.sleep(0.005)
    return time.perf_counter()


async def gateway_max_rate(
    broker: BrokerProcess,
    nodes: list[_fleet.Node],
    files: list[Path],
    n: int,
    data_dir: Path,
    profile: bool,
) -> dict[str, float]:
    """The gateway consuming the same blasted stream; rate, CPU and the db row count."""
    settings = settings_for(broker, data_dir, **OVERRIDES)
    async with run_gateway(settings) as runtime:
        while not runtime.source.connected:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        bcpu0 = broker_cpu(broker)
        profiler = None
        if profile:
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="disabled")
            profiler.start()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        pubs = await asyncio.to_thread(_fleet.start_publishers, broker.port, nodes, files)
        t1 = await _wait_stored(runtime, n, TIMEOUT_S)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        bcpu = broker_cpu(broker) - bcpu0
        if profiler is not None:
            profiler.stop()
        await asyncio.to_thread(_fleet.wait_all, pubs, 10)
        stored = await runtime.store.count()
    if profiler is not None:
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "rate": n / (t1 - t0),
        "cpu_cores": cpu / (t1 - t0),
        "broker_cores": bcpu / (t1 - t0),
        "rows": stored,
    }


async def gateway_paced(
    broker: BrokerProcess, rate: float, seconds: float, nodes: int, data_dir: Path
) -> dict[str, float]:
    """The gateway at a controlled rate: publish-to-stored latency percentiles."""
    settings = settings_for(broker, data_dir)
    probe = Probe()
    async with run_gateway(settings) as runtime:
        probe.install(runtime)
        while not runtime.source.connected:
            await asyncio.sleep(0.02)
        probe.enabled = True
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        feeder = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(_fleet.__file__)),
            "--port",
            str(broker.port),
            "--nodes",
            str(nodes),
            "--prefix",
            "paced",
            "--rate",
            str(rate),
            "--seconds",
            str(seconds),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(feeder.communicate(), seconds + 60)
        sent = int(json.loads(out)["sent"])
        await _wait_stored(runtime, sent, 60)
        elapsed = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        detectors = runtime.pipeline.detectors is not None
    lat = probe.latencies
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "sent": sent,
        "achieved": sent / seconds,
        "p50_ms": percentile(lat, 50) * 1000,
        "p99_ms": percentile(lat, 99) * 1000,
        "max_ms": max(lat) * 1000 if lat else float("nan"),
        "cpu_cores": cpu / elapsed,
        "detectors": float(detectors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller run (about 30 s)")
    parser.add_argument("--messages", type=int, help="messages for the max-rate phases")
    parser.add_argument("--nodes", type=int, default=8, help="publisher processes (nodes)")
    parser.add_argument("--rate", type=float, default=5000.0, help="paced phase, messages/s")
    parser.add_argument("--seconds", type=float, help="paced phase duration")
    parser.add_argument("--profile", action="store_true", help="pyinstrument the gateway phase")
    parser.add_argument("--receive-max", type=int, help="gateway's MQTT Receive Maximum")
    args = parser.parse_args()
    if args.receive_max:
        OVERRIDES["mqtt_receive_maximum"] = args.receive_max
    n = args.messages or (20_000 if args.quick else 100_000)
    seconds = args.seconds or (5.0 if args.quick else 15.0)
    per_node = n // args.nodes
    n = per_node * args.nodes

    facts = _fleet.machine_facts()
    print_facts(facts)
    with tempfile.TemporaryDirectory(prefix="sumpwatch-bench-") as tmp:
        root = Path(tmp)
        nodes = fleet(args.nodes)
        files = _fleet.write_line_files(nodes, per_node, root / "lines")
        broker = start_broker(root / "broker")
        try:
            raw = raw_sub_rate(broker, nodes, files, n)
            gw = asyncio.run(gateway_max_rate(broker, nodes, files, n, root / "gw1", args.profile))
            paced = asyncio.run(gateway_paced(broker, args.rate, seconds, args.nodes, root / "gw2"))
        finally:
            broker.stop()
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cmd = "python bench/ingest.py" + (" --quick" if args.quick else "")
    print_table(
        f"Ingest, QoS 1, SQLite, one gateway process ({cmd})",
        ["measure", "value"],
        [
            ["messages (max-rate phases)", f"{n:,} from {args.nodes} mosquitto_pub -l"],
            ["mosquitto_sub rate", f"{raw:,.0f} msg/s"],
            ["gateway rate (publish -> committed)", f"{gw['rate']:,.0f} msg/s"],
            ["gateway / mosquitto_sub", f"{gw['rate'] / raw:.2f}"],
            ["rows stored (expected)", f"{int(gw['rows']):,} ({n:,})"],
            ["gateway CPU at max rate", f"{gw['cpu_cores']:.2f} cores"],
            ["broker CPU at max rate", f"{gw['broker_cores']:.2f} cores"],
            ["gateway peak RSS (whole run)", f"{peak_rss_mb:.0f} MB"],
            [f"paced rate (target {args.rate:,.0f})", f"{paced['achieved']:,.0f} msg/s for {seconds:.0f} s"],
            ["publish -> stored p50", f"{paced['p50_ms']:.1f} ms"],
            ["publish -> stored p99", f"{paced['p99_ms']:.1f} ms"],
            ["publish -> stored max", f"{paced['max_ms']:.1f} ms"],
            ["gateway CPU at paced rate", f"{paced['cpu_cores']:.2f} cores"],
            [
                "publish -> finding",
                "measured" if paced["detectors"] else "not measured: no rules engine wired in run_gateway",
            ],
        ],
    )
    ok_rate = gw["rate"] >= 20_000
    ok_p99 = paced["p99_ms"] < 250
    print(
        f"\ntargets: >= 20,000 msg/s {'MET' if ok_rate else 'NOT MET'}; "
        f"p99 < 250 ms at {args.rate:,.0f} msg/s {'MET' if ok_p99 else 'NOT MET'}"
    )
    _ = REPO


if __name__ == "__main__":
    main()
