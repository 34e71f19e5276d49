"""Ingest benchmark: simulated fleet -> real Mosquitto -> gateway -> SQLite.

Prints, from ONE run on this machine (figures are only comparable inside a run;
the machine is shared), with ``mosquitto_sub`` (C, QoS 1) on the same stream as
the yardstick:

* live: N messages blasted by ``mosquitto_pub -l`` publishers (one per node) while
  the consumer runs; the publishers and the broker compete with it for the cores.
* drain: N messages queued in the consumer's persistent session while it is
  offline, then drained; the consumer has the machine to itself. This is the
  sustained rate of the consumer alone.
* paced: the gateway at a controlled rate (default 5,000 msg/s) fed by a separate
  feeder process; p50/p99/max from publish to stored (commit) and, when a rules
  engine is wired into the pipeline, from publish to finding.

The gateway is ``run_gateway`` (the real composition root) in this process; its
rate is measured from the first publish (live) or from start-up (drain) until the
last message is committed to SQLite, so it includes everything.

Usage::

    python bench/ingest.py            # 100,000 messages, 15 s paced
    python bench/ingest.py --quick    # 20,000 messages, 5 s paced
    python bench/ingest.py --profile  # also print a pyinstrument profile of the drain
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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

import _fleet
import psutil
from _fleet import Node, fleet, percentile, print_facts, print_table

from gateway.broker import BrokerProcess, start_broker
from gateway.domain import FindingChange, FindingEvent, Reading
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings, merge_overrides

TIMEOUT_S = 120.0
OVERRIDES: dict[str, Any] = {}
SITES: dict[str, Path] = {}  # "file": the generated registry of the fleet's sites
SUB_TOPIC = "sumpwatch/v1/+/+/telemetry"


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) used so far by a process (default: this one)."""
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


@dataclass
class Probe:
    """Seconds from each committed reading's device time (stamped at publish by the
    feeder) to the end of its commit, and from the device time of the sample that
    opened a finding to the finding reaching the sinks (alerts)."""

    latencies: list[float] = field(default_factory=list)
    finding_latencies: list[float] = field(default_factory=list)

    def install(self, runtime: Runtime) -> None:
        """Wrap the runtime's store and add a finding sink that times events."""

        async def on_events(events: list[FindingEvent]) -> None:
            now = time.time()
            self.finding_latencies.extend(
                now - e.finding.opened_at.timestamp()
                for e in events
                if e.change is FindingChange.OPENED and e.finding.rule_id == "high_water"
            )

        runtime.pipeline.sinks.append(on_events)
        store = runtime.store
        inner = store.write

        async def write(readings: Sequence[Reading]) -> int:
            n = await inner(readings)
            now = time.time()
            self.latencies.extend(now - r.ts.timestamp() for r in readings)
            return n

        store.write = write  # type: ignore[method-assign]


def settings_for(broker: BrokerProcess, data_dir: Path, **overrides: Any) -> Settings:
    """Gateway settings on the bench broker, defaults otherwise."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "mqtt": {
            "host": broker.host,
            "port": broker.port,
            "client_id": f"bench-gw-{uuid.uuid4().hex[:6]}",
        },
        "sites_file": SITES["file"],
        # The fleet stamps readings 100 us apart: a flood by the per-node rate limit.
        # A huge factor keeps its token bucket running (its cost is measured) while
        # it never refuses, so the bench measures the pipeline, not the limit.
        "validation": {"rate_limit_factor": 1e9},
    }
    return Settings(
        _env_file=None, **merge_overrides(merge_overrides(values, OVERRIDES), overrides)
    )


def _sub_cmd(broker: BrokerProcess, *extra: str) -> list[str]:
    return [
        _fleet.MOSQUITTO_SUB,
        "-h",
        broker.host,
        "-p",
        str(broker.port),
        "-V",
        "5",
        "-q",
        "1",
        "-t",
        SUB_TOPIC,
        *extra,
    ]


def _publish_all(broker: BrokerProcess, nodes: list[Node], files: list[Path]) -> None:
    _fleet.wait_all(_fleet.start_publishers(broker.port, nodes, files), TIMEOUT_S)


def raw_live(broker: BrokerProcess, nodes: list[Node], files: list[Path], n: int) -> float:
    """mosquitto_sub while the publishers blast: first publish to last received."""
    sub = subprocess.Popen(
        _sub_cmd(broker, "-i", "bench-raw-live", "-C", str(n)), stdout=subprocess.DEVNULL
    )
    time.sleep(0.5)  # connected and subscribed
    t0 = time.perf_counter()
    pubs = _fleet.start_publishers(broker.port, nodes, files)
    _fleet.wait_all([sub], TIMEOUT_S)
    elapsed = time.perf_counter() - t0
    _fleet.wait_all(pubs, 10)
    return n / elapsed


def raw_drain(broker: BrokerProcess, nodes: list[Node], files: list[Path], n: int) -> float:
    """mosquitto_sub draining a backlog queued in its persistent session."""
    session = ["-i", "bench-raw-drain", "-c", "-x", "3600"]
    subprocess.run(_sub_cmd(broker, *session, "-E"), check=True, timeout=30)
    _publish_all(broker, nodes, files)
    t0 = time.perf_counter()
    sub = subprocess.Popen(_sub_cmd(broker, *session, "-C", str(n)), stdout=subprocess.DEVNULL)
    _fleet.wait_all([sub], TIMEOUT_S)
    return n / (time.perf_counter() - t0)


async def until_stored(runtime: Runtime, n: int, timeout: float) -> float:
    """Wait until ``n`` readings are committed; return when (perf_counter)."""
    deadline = time.perf_counter() + timeout
    m = runtime.metrics
    while m.stored + m.duplicates < n:
        if time.perf_counter() > deadline:
            raise SystemExit(f"gateway committed {m.stored}/{n} within {timeout:.0f}s")
        await asyncio.sleep(0.005)
    return time.perf_counter()


async def connected(runtime: Runtime) -> None:
    while not runtime.source.connected:  # noqa: ASYNC110 - a flag, not an event
        await asyncio.sleep(0.01)


async def gateway_live(
    broker: BrokerProcess, nodes: list[Node], files: list[Path], n: int, data_dir: Path
) -> dict[str, float]:
    """The gateway while the publishers blast."""
    async with run_gateway(settings_for(broker, data_dir)) as runtime:
        await connected(runtime)
        await asyncio.sleep(0.3)
        cpu0 = cpu_seconds()
        t0 = time.perf_counter()
        pubs = await asyncio.to_thread(_fleet.start_publishers, broker.port, nodes, files)
        t1 = await until_stored(runtime, n, TIMEOUT_S)
        cpu = cpu_seconds() - cpu0
        await asyncio.to_thread(_fleet.wait_all, pubs, 10)
    return {"rate": n / (t1 - t0), "cpu_cores": cpu / (t1 - t0)}


async def gateway_drain(
    broker: BrokerProcess,
    nodes: list[Node],
    files: list[Path],
    n: int,
    data_dir: Path,
    profile: bool,
) -> dict[str, float]:
    """The gateway starting up to a backlog of ``n`` messages in its session."""
    settings = settings_for(broker, data_dir)
    async with run_gateway(settings) as runtime:  # creates the persistent session
        await connected(runtime)
    await asyncio.to_thread(_publish_all, broker, nodes, files)
    profiler = None
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled")
        profiler.start()
    cpu0 = cpu_seconds()
    bcpu0 = cpu_seconds(broker.process.pid)
    t0 = time.perf_counter()
    async with run_gateway(settings) as runtime:
        t1 = await until_stored(runtime, n, TIMEOUT_S)
        cpu = cpu_seconds() - cpu0
        bcpu = cpu_seconds(broker.process.pid) - bcpu0
        if profiler is not None:
            profiler.stop()
        rows = await runtime.store.count()
    if profiler is not None:
        print(profiler.output_text(unicode=False, color=False))
    return {
        "rate": n / (t1 - t0),
        "cpu_cores": cpu / (t1 - t0),
        "broker_cores": bcpu / (t1 - t0),
        "rows": rows,
    }


async def gateway_paced(
    broker: BrokerProcess, rate: float, seconds: float, nodes: int, data_dir: Path
) -> dict[str, float]:
    """The gateway at a controlled rate: publish-to-stored latency percentiles."""
    probe = Probe()
    async with run_gateway(settings_for(broker, data_dir)) as runtime:
        probe.install(runtime)
        await connected(runtime)
        cpu0 = cpu_seconds()
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
        await until_stored(runtime, sent, 60)
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds() - cpu0
        await asyncio.sleep(0.5)  # let the sinks take the last events
    lat = probe.latencies
    flat = probe.finding_latencies
    return {
        "findings": len(flat),
        "f50_ms": percentile(flat, 50) * 1000,
        "f99_ms": percentile(flat, 99) * 1000,
        "achieved": sent / seconds,
        "p50_ms": percentile(lat, 50) * 1000,
        "p99_ms": percentile(lat, 99) * 1000,
        "max_ms": max(lat) * 1000 if lat else float("nan"),
        "cpu_cores": cpu / elapsed,
    }


def paced_only(rate: float, seconds: float, sites: int) -> None:
    """The paced phase alone, from ``sites`` registered sites (one pit node each)."""
    print_facts(_fleet.machine_facts())
    with tempfile.TemporaryDirectory(prefix="sumpwatch-bench-") as tmp:
        root = Path(tmp)
        SITES["file"] = _fleet.write_registry(fleet(sites, "paced"), root / "sites.toml")
        broker = start_broker(root / "broker")
        try:
            load = os.getloadavg()[0]
            paced = asyncio.run(gateway_paced(broker, rate, seconds, sites, root / "p"))
        finally:
            broker.stop()
    print_table(
        f"Paced ingest, QoS 1, SQLite, {sites} sites (python bench/ingest.py --paced-only)",
        ["measure", "value"],
        [
            [f"rate (target {rate:,.0f})", f"{paced['achieved']:,.0f} msg/s for {seconds:.0f} s"],
            [
                "publish -> stored p50 / p99 / max",
                f"{paced['p50_ms']:.0f} / {paced['p99_ms']:.0f} / {paced['max_ms']:.0f} ms",
            ],
            [
                "publish -> high-water finding at the sinks p50 / p99",
                f"{paced['f50_ms']:.0f} / {paced['f99_ms']:.0f} ms ({paced['findings']:.0f})",
            ],
            ["gateway CPU", f"{paced['cpu_cores']:.2f} cores"],
            ["load average at the start / the end", f"{load:.2f} / {os.getloadavg()[0]:.2f}"],
        ],
    )


def main() -> None:
    """Run the phases and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller run (about 30 s)")
    parser.add_argument("--messages", type=int, help="messages for the live and drain phases")
    parser.add_argument("--nodes", type=int, default=8, help="publishers (nodes), live/drain")
    parser.add_argument("--paced-nodes", type=int, default=40, help="publishers (nodes), paced")
    parser.add_argument("--rate", type=float, default=5000.0, help="paced phase, messages/s")
    parser.add_argument("--seconds", type=float, help="paced phase duration")
    parser.add_argument("--receive-max", type=int, help="gateway's MQTT Receive Maximum")
    parser.add_argument("--batch-max", type=int, help="gateway's batch size")
    parser.add_argument("--profile", action="store_true", help="pyinstrument the drain phase")
    parser.add_argument(
        "--paced-only",
        action="store_true",
        help="only the paced phase (issue 17 item 3: --paced-nodes 1000 --rate 5000)",
    )
    args = parser.parse_args()
    if args.paced_only:
        paced_only(args.rate, args.seconds or 15.0, args.paced_nodes)
        return
    if args.receive_max:
        OVERRIDES["mqtt"] = {"receive_maximum": args.receive_max}
    if args.batch_max:
        OVERRIDES["store"] = {"batch_max": args.batch_max}
    n = args.messages or (20_000 if args.quick else 100_000)
    seconds = args.seconds or (5.0 if args.quick else 15.0)
    per_node = n // args.nodes
    n = per_node * args.nodes

    print_facts(_fleet.machine_facts())
    with tempfile.TemporaryDirectory(prefix="sumpwatch-bench-") as tmp:
        root = Path(tmp)
        nodes = fleet(args.nodes)
        files = _fleet.write_line_files(nodes, per_node, root / "lines")
        registry = fleet(args.nodes) + fleet(args.paced_nodes, "paced")
        SITES["file"] = _fleet.write_registry(registry, root / "sites.toml")
        broker = start_broker(root / "broker")
        try:
            raw_l = raw_live(broker, nodes, files, n)
            gw_l = asyncio.run(gateway_live(broker, nodes, files, n, root / "gw-live"))
            raw_d = raw_drain(broker, nodes, files, n)
            gw_d = asyncio.run(
                gateway_drain(broker, nodes, files, n, root / "gw-drain", args.profile)
            )
            paced = asyncio.run(
                gateway_paced(broker, args.rate, seconds, args.paced_nodes, root / "p")
            )
        finally:
            broker.stop()
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cmd = "python bench/ingest.py" + (" --quick" if args.quick else "")
    finding = (
        f"{paced['f50_ms']:.0f} / {paced['f99_ms']:.0f} ms ({paced['findings']:.0f} findings)"
        if paced["findings"]
        else "no finding opened"
    )
    print_table(
        f"Ingest, QoS 1, SQLite, one gateway process ({cmd})",
        ["measure", "value"],
        [
            ["messages per phase", f"{n:,} from {args.nodes} mosquitto_pub -l (one per node)"],
            [
                "sites (in the registry, detectors on)",
                f"{args.nodes} live/drain, {args.paced_nodes} paced",
            ],
            ["live: mosquitto_sub", f"{raw_l:,.0f} msg/s"],
            ["live: gateway, publish -> committed", f"{gw_l['rate']:,.0f} msg/s"],
            ["live: gateway / mosquitto_sub", f"{gw_l['rate'] / raw_l:.2f}"],
            ["live: gateway CPU", f"{gw_l['cpu_cores']:.2f} cores"],
            ["drain: mosquitto_sub", f"{raw_d:,.0f} msg/s"],
            ["drain: gateway, start -> all committed", f"{gw_d['rate']:,.0f} msg/s"],
            ["drain: gateway / mosquitto_sub", f"{gw_d['rate'] / raw_d:.2f}"],
            [
                "drain: gateway CPU / broker CPU",
                f"{gw_d['cpu_cores']:.2f} / {gw_d['broker_cores']:.2f} cores",
            ],
            ["drain: rows stored (expected)", f"{int(gw_d['rows']):,} ({n:,})"],
            ["gateway peak RSS (whole run)", f"{peak_rss_mb:.0f} MB"],
            [
                f"paced: rate (target {args.rate:,.0f})",
                f"{paced['achieved']:,.0f} msg/s for {seconds:.0f} s",
            ],
            [
                "paced: publish -> stored p50 / p99 / max",
                f"{paced['p50_ms']:.0f} / {paced['p99_ms']:.0f} / {paced['max_ms']:.0f} ms",
            ],
            ["paced: gateway CPU", f"{paced['cpu_cores']:.2f} cores"],
            ["paced: publish -> high-water finding at the sinks p50 / p99", finding],
        ],
    )
    ok_rate = gw_d["rate"] >= 20_000
    ok_p99 = paced["p99_ms"] < 250
    print(
        f"\ntargets: >= 20,000 msg/s sustained (drain) {'MET' if ok_rate else 'NOT MET'}; "
        f"p99 < 250 ms at {args.rate:,.0f} msg/s {'MET' if ok_p99 else 'NOT MET'}"
    )


if __name__ == "__main__":
    main()
