"""The issue-17 drain: one backlog, several consumers, each in turn, measured in one run.

``--messages`` (default 200,000) QoS 1 telemetry messages from ``--sites`` (default
1,000) registered sites (one pit node each, ``mosquitto_pub -l``) are queued in each
consumer's persistent session while it is down; then it starts and drains them with
the machine to itself. Rate = messages / (process start -> last stored), so start-up
counts. Consumers:

* ``mosquitto_sub`` (C, QoS 1): the yardstick;
* ``sumpwatch gateway`` with the SQLite store (``bench/_gateway.py``: ``run_gateway``,
  detectors on for every registered site, acks after the commit), its peak RSS;
* the same with the InfluxDB store (a real ``influxd``);
* Node-RED (``--node-red``): installed from npm into a temp dir, a flow
  mqtt in (QoS 1, persistent session) -> json -> function -> join (500 messages or
  1 s) -> node-red-contrib-influxdb batch -> the same ``influxd``; its points counted.

Every rate is also printed as a ratio of ``mosquitto_sub``'s, with the load average.

Usage::

    python bench/drain.py [--messages 200000] [--sites 1000] [--node-red] [--no-influx]
        [--no-sqlite]

Besides the rate it prints, for each gateway, its peak RSS, its CPU a message, and the
most messages it held: received and not yet committed (``most in flight``), received
and not yet acknowledged (``most unacked``: the broker's view) and waiting in the batch
writer (``most pending``). ``BENCH_TRACE=1`` prints the gateway's counters and RSS four
times a second; ``BENCH_TRACEMALLOC=FILE`` writes its largest Python allocation sites at
the traced peak (slow: the InfluxDB server may time out under it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import _fleet
import httpx
from _fleet import Node, fleet

from gateway.broker import BrokerProcess, start_broker

TIMEOUT_S = 600.0
SUB_TOPIC = "sumpwatch/v1/+/+/telemetry"
#: Publishers started at once while queueing the backlog (the publish is not timed).
PUBLISH_CHUNK = 100


def queue_backlog(broker: BrokerProcess, nodes: list[Node], files: list[Path]) -> None:
    """Publish every node's file (QoS 1) while the consumer is down."""
    for i in range(0, len(nodes), PUBLISH_CHUNK):
        procs = _fleet.start_publishers(
            broker.port, nodes[i : i + PUBLISH_CHUNK], files[i : i + PUBLISH_CHUNK]
        )
        _fleet.wait_all(procs, TIMEOUT_S)


def _sub(broker: BrokerProcess, *extra: str) -> list[str]:
    return [
        _fleet.MOSQUITTO_SUB,
        *("-h", broker.host, "-p", str(broker.port), "-V", "5", "-q", "1", "-t", SUB_TOPIC),
        *("-i", "drain-sub", "-c", "-x", "3600"),
        *extra,
    ]


def mosquitto_sub(broker: BrokerProcess, backlog: Callable[[], None], n: int) -> dict[str, float]:
    """mosquitto_sub draining the backlog from its persistent session."""
    subprocess.run(_sub(broker, "-E"), check=True, timeout=30)  # the session exists
    backlog()
    t0 = time.perf_counter()
    subprocess.run(
        _sub(broker, "-C", str(n)), stdout=subprocess.DEVNULL, timeout=TIMEOUT_S, check=True
    )
    return {"rate": n / (time.perf_counter() - t0), "stored": n}


def _status(path: Path) -> dict[str, float]:
    try:
        loaded: dict[str, float] = json.loads(path.read_text())
        return loaded
    except (OSError, ValueError):
        return {}


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


#: The most messages the last gateway run held received and not yet committed.
IN_FLIGHT: dict[str, float] = {}

#: Set by --profile: the drain's gateway runs under pyinstrument, its profile printed.
PROFILE: dict[str, Path] = {}


def _gateway(
    broker: BrokerProcess, root: Path, sites: Path, env: dict[str, str], until: int
) -> tuple[float, float, float, float]:
    """Run bench/_gateway.py until ``until`` messages are committed (0: until it is
    connected); return (process start, last commit) as epoch seconds, peak RSS and the
    process CPU seconds (all threads) from its first message to its last commit."""
    status, go = root / "status.json", root / "go"
    status.unlink(missing_ok=True)
    go.touch()
    profile = PROFILE.get("out") if until else None
    runner = [sys.executable]
    if profile is not None:
        runner += ["-m", "pyinstrument", "--no-color", "-o", str(profile), "--"]
    cmd = [
        *runner,
        str(_fleet.HERE / "_gateway.py"),
        *("--port", str(broker.port), "--data-dir", str(root / "data")),
        *("--client-id", "drain-gw", "--status", str(status), "--go", str(go)),
        *("--sites", str(sites)),
    ]
    started = time.time()
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            s = _status(status)
            done = s.get("stored", 0) + s.get("duplicates", 0)
            if (until == 0 and s.get("connected")) or (until and done >= until):
                cpu = s.get("cpu_last_s", 0.0) - s.get("cpu_first_s", 0.0)
                IN_FLIGHT["max"] = s.get("in_flight_max", 0)
                IN_FLIGHT["unacked"] = s.get("unacked_max", 0)
                IN_FLIGHT["pending"] = s.get("pending_max", 0)
                return started, s.get("last_commit_at", 0.0), _peak_rss_mb(proc.pid), cpu
            time.sleep(0.01)
        raise SystemExit(f"gateway stored {_status(status)} of {until} in {TIMEOUT_S:.0f} s")
    finally:
        proc.terminate()
        proc.wait(60)


def gateway(
    broker: BrokerProcess,
    backlog: Callable[[], None],
    n: int,
    root: Path,
    sites: Path,
    env: dict[str, str],
    count: Callable[[], int],
) -> dict[str, float]:
    """The gateway draining the backlog from its persistent session."""
    root.mkdir(parents=True)
    env = {
        "SUMPWATCH_VALIDATION__RATE_LIMIT_FACTOR": "1e9",  # measure the pipeline, not the limit
        # A fresh data dir on the 1st of a month would also write last month's report of
        # every site (1,000 PDFs, matplotlib and ReportLab loaded) in the background: a
        # monthly batch job, not ingest, measured by bench/report_bench.py instead.
        "SUMPWATCH_REPORTS__SCHEDULE": "false",
        **env,
    }
    _gateway(broker, root, sites, env, 0)  # creates the persistent session
    backlog()
    started, last, rss, cpu = _gateway(broker, root, sites, env, n)
    return {
        "rate": n / (last - started),
        "rss_mb": rss,
        "stored": count(),
        "cpu_us": cpu / n * 1e6,
        "in_flight": IN_FLIGHT.get("max", 0),
        "unacked": IN_FLIGHT.get("unacked", 0),
        "pending": IN_FLIGHT.get("pending", 0),
    }


def sqlite_count(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM readings").fetchone()[0])


def influx_count(url: str, database: str, measurement: str, field_name: str) -> int:
    resp = httpx.post(
        f"{url}/query",
        params={"db": database, "q": f'SELECT count("{field_name}") FROM "{measurement}"'},
        timeout=30,
    )
    resp.raise_for_status()
    series = resp.json()["results"][0].get("series") or []
    return int(series[0]["values"][0][1]) if series else 0


# -- Node-RED -----------------------------------------------------------------------------

NODE_RED_PACKAGES = ("node-red", "node-red-contrib-influxdb")

#: The function node: a telemetry message -> one InfluxDB point, as a user would write it
#: (device time in microseconds: a node's samples here are 100 us apart).
_TO_POINT = """
const t = msg.payload;
const us = Date.parse(t.ts) * 1000 + parseInt(t.ts.slice(23, 26) || "0", 10);
msg.payload = {
    measurement: t.kind,
    fields: Object.assign({}, t.readings, {seq: t.seq}),
    tags: {site_id: t.site_id, node_id: t.node_id, boot: t.boot},
    timestamp: us,
};
return msg;
"""


def node_red_flow(port: int, influx_port: int, database: str) -> list[dict[str, object]]:
    """mqtt in -> json -> function -> join (500 or 1 s) -> influxdb batch.

    Ids are opaque on purpose: Node-RED takes any property value equal to a node id
    for a reference to it (a node ``json`` of type ``json`` refers to itself)."""
    return [
        {"id": "f0", "type": "tab", "label": "sumpwatch"},
        {
            "id": "b0",
            "type": "mqtt-broker",
            "broker": "127.0.0.1",
            "port": str(port),
            "clientid": "drain-node-red",
            "protocolVersion": "5",
            "cleansession": False,
            # Else it unsubscribes when stopped and the broker queues nothing for it.
            "autoUnsubscribe": False,
            "sessionExpiry": "3600",
            "keepalive": "60",
        },
        {
            "id": "i0",
            "type": "influxdb",
            "hostname": "127.0.0.1",
            "port": str(influx_port),
            "protocol": "http",
            "database": database,
            "influxdbVersion": "1.x",
        },
        {
            "id": "n1",
            "type": "mqtt in",
            "z": "f0",
            "topic": SUB_TOPIC,
            "qos": "1",
            "datatype": "utf8",
            "broker": "b0",
            "wires": [["n2"]],
        },
        {"id": "n2", "type": "json", "z": "f0", "action": "obj", "wires": [["n3"]]},
        {"id": "n3", "type": "function", "z": "f0", "func": _TO_POINT, "wires": [["n4"]]},
        {
            "id": "n4",
            "type": "join",
            "z": "f0",
            "mode": "custom",
            "build": "array",
            "count": "500",
            "timeout": "1",
            "wires": [["n5"]],
        },
        {
            "id": "n5",
            "type": "influxdb batch",
            "z": "f0",
            "influxdb": "i0",
            "precision": "u",
            "retentionPolicy": "",
            "wires": [],
        },
    ]


def install_node_red(folder: Path) -> Path:
    """npm install Node-RED and the InfluxDB nodes into ``folder``; the red.js path."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", *NODE_RED_PACKAGES],
        cwd=folder,
        check=True,
        timeout=900,
    )
    return folder / "node_modules" / "node-red" / "red.js"


def node_red(
    broker: BrokerProcess,
    backlog: Callable[[], None],
    n: int,
    root: Path,
    red_js: Path,
    influx: tuple[str, int],
) -> dict[str, float]:
    """Node-RED draining the backlog from its persistent session into InfluxDB."""
    url, influx_port = influx
    database = f"nodered_{uuid.uuid4().hex[:8]}"
    httpx.post(f"{url}/query", params={"q": f'CREATE DATABASE "{database}"'}, timeout=30)
    user_dir = root / "node-red"
    user_dir.mkdir(parents=True)
    flows = user_dir / "flows.json"
    flows.write_text(json.dumps(node_red_flow(broker.port, influx_port, database)))
    settings = user_dir / "settings.js"
    settings.write_text("module.exports = { uiPort: 0, logging: { console: { level: 'warn' } } };")

    def run(until: int) -> tuple[float, float, float]:
        cmd = ["node", str(red_js), "-u", str(user_dir), "-s", str(settings), str(flows)]
        started = time.time()
        log = (user_dir / "node-red.log").open("ab")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + TIMEOUT_S
        try:
            if until == 0:
                _wait_subscribed(broker, "drain-node-red", deadline)
                return started, 0.0, 0.0
            while time.monotonic() < deadline:
                if influx_count(url, database, "pit", "seq") >= until:
                    return started, time.time(), _peak_rss_mb(proc.pid)
                if proc.poll() is not None:
                    tail = (user_dir / "node-red.log").read_text()[-2000:]
                    raise SystemExit(f"Node-RED exited: {tail}")
                time.sleep(0.1)
            raise SystemExit(f"Node-RED stored {influx_count(url, database, 'pit', 'seq')}/{until}")
        finally:
            proc.terminate()
            proc.wait(60)
            log.close()

    run(0)
    backlog()
    started, last, rss = run(n)
    return {
        "rate": n / (last - started),
        "rss_mb": rss,
        "stored": influx_count(url, database, "pit", "seq"),
    }


def _wait_subscribed(broker: BrokerProcess, client_id: str, deadline: float) -> None:
    """Give a consumer that reports nothing time to connect and subscribe (its session
    then exists): Node-RED is up and subscribed well within 5 s on this machine."""
    time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))


def print_results(results: dict[str, dict[str, float]], loads: dict[str, float], n: int) -> None:
    """The table of one run: rates, ratios to mosquitto_sub, stored counts, RSS, load."""
    sub = results["mosquitto_sub"]["rate"]
    print(
        f"\n| consumer | msg/s | / mosquitto_sub | stored (of {n:,}) | peak RSS "
        "| CPU a message | most in flight | most unacked | most pending | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        rss = f"{r['rss_mb']:.0f} MB" if "rss_mb" in r else "-"
        cpu = f"{r['cpu_us']:.1f} us" if "cpu_us" in r else "-"
        flight = f"{r['in_flight']:,.0f}" if "in_flight" in r else "-"
        unacked = f"{r['unacked']:,.0f}" if "unacked" in r else "-"
        pending = f"{r['pending']:,.0f}" if "pending" in r else "-"
        print(
            f"| {name} | {r['rate']:,.0f} | {r['rate'] / sub:.2f} | {int(r['stored']):,} "
            f"| {rss} | {cpu} | {flight} | {unacked} | {pending} | {loads[name]:.2f} |"
        )
    if "Node-RED" in results:
        red = results["Node-RED"]["rate"]
        for name in ("gateway, SQLite", "gateway, InfluxDB"):
            if name in results:
                print(f"{name} / Node-RED: {results[name]['rate'] / red:.2f}")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--node-red", action="store_true", help="also Node-RED (npm install)")
    parser.add_argument("--no-influx", action="store_true", help="skip the InfluxDB consumers")
    parser.add_argument(
        "--no-sqlite", action="store_true", help="skip the SQLite gateway (mosquitto_sub stays)"
    )
    parser.add_argument("--profile", type=Path, help="pyinstrument the SQLite drain into this")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    if args.profile:
        PROFILE["out"] = args.profile
    per_node = args.messages // args.sites
    n = per_node * args.sites
    root = Path(tempfile.mkdtemp(prefix="drain-bench-"))
    nodes = fleet(args.sites)
    files = _fleet.write_line_files(nodes, per_node, root / "lines")
    sites = _fleet.write_registry(nodes, root / "sites.toml")
    red_js = install_node_red(root / "npm") if args.node_red else None
    influx = None
    if not args.no_influx or args.node_red:
        sys.path.insert(0, str(_fleet.REPO))
        from tests.influx_fixture import InfluxServer

        influx = InfluxServer(root / "influxd")
        influx.start()
    broker = start_broker(root / "broker")

    def backlog() -> None:
        queue_backlog(broker, nodes, files)

    results: dict[str, dict[str, float]] = {}
    loads: dict[str, float] = {}

    def measure(name: str, fn: Callable[[], dict[str, float]]) -> None:
        loads[name] = os.getloadavg()[0]
        results[name] = fn()
        r = results[name]
        cpu = f", {r['cpu_us']:.1f} us CPU a message" if "cpu_us" in r else ""
        print(f"  {name}: {r['rate']:,.0f} msg/s{cpu} (load {loads[name]:.2f})", flush=True)

    print(f"{n:,} QoS 1 messages from {args.sites} registered sites, drained by each in turn:")
    try:
        measure("mosquitto_sub", lambda: mosquitto_sub(broker, backlog, n))
        if not args.no_sqlite:
            measure(
                "gateway, SQLite",
                lambda: gateway(
                    broker,
                    backlog,
                    n,
                    root / "gw-sqlite",
                    sites,
                    {},
                    lambda: sqlite_count(root / "gw-sqlite" / "data" / "sumpwatch.db"),
                ),
            )
        if influx is not None and not args.no_influx:
            db = f"gw_{uuid.uuid4().hex[:8]}"
            env = {
                "SUMPWATCH_STORE__BACKEND": "influxdb",
                "SUMPWATCH_INFLUX__URL": influx.url,
                "SUMPWATCH_INFLUX__DATABASE": db,
            }
            measure(
                "gateway, InfluxDB",
                lambda: gateway(
                    broker,
                    backlog,
                    n,
                    root / "gw-influx",
                    sites,
                    env,
                    lambda: influx_count(influx.url, db, "pit", "seq"),
                ),
            )
        if red_js is not None and influx is not None:
            measure(
                "Node-RED",
                lambda: node_red(broker, backlog, n, root, red_js, (influx.url, influx.http_port)),
            )
    finally:
        broker.stop()
        if influx is not None:
            influx.stop()
    print_results(results, loads, n)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
