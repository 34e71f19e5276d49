"""Latency at 5,000 msg/s from 1,000 sites (issue 17 target 3), from one run.

A light feeder (a child process: a few raw-socket MQTT 3.1.1 QoS 1 connections, every
packet encoded before the run, only its publish time written in at the send) paces
``--rate`` messages/s of pit telemetry from ``--sites`` registered sites into a
Mosquitto started here (free port, temp dir). The gateway is ``run_gateway`` (the real
composition root: detectors on for every site, acks after the commit, findings into
the findings store and the alert manager) in this process, with the probe of
``bench/ingest.py``. Each message's ``ts`` is its publish time, so:

* publish -> stored: the end of the commit of the reading's batch, minus its ``ts``;
* publish -> finding: ``--episode-sites`` sites run high water (level over the alarm
  mark) for a second: once each, the episodes spread evenly over the run (or, with
  ``--episode-every N``, every N of their messages from a few seconds in). The
  detector opens a ``high_water`` finding on the second high sample, whose ``ts`` is
  the finding's ``opened_at``. Timed when the event reaches the first sink and when
  it leaves the last (stored in the findings store, given to the
  alert manager, the cases and the time-series store).

Printed: p50/p95/p99/max of both, the rate achieved, the gateway's CPU (cores, this
process: the gateway and the probe), the feeder's and the broker's, publish -> PUBACK
from the broker, and the load average sampled during the run.

Usage::

    python bench/latency.py [--sites 1000] [--rate 5000] [--seconds 30]
        [--connections 4] [--episode-sites 100] [--episode-every N]
        [--batch-interval S] [--batch-max N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import _fleet
import ingest
from _fleet import Node, fleet, percentile, print_facts, print_table

from gateway.broker import BrokerProcess, start_broker
from gateway.domain import FindingChange, FindingEvent
from gateway.runtime import run_gateway

#: An episode runs high for EPISODE_SAMPLES messages (1 s at 5 msg/s a site): the
#: finding opens on the second, clears after the episode.
EPISODE_SAMPLES = 5
#: No episode starts before a site's EPISODE_FIRST-th message (2 s at 5 msg/s), nor
#: (spread once over the run) after its EPISODE_FIRST-th last.
EPISODE_FIRST = 10
#: A publish time's place in the payload, written in at the send (27 bytes).
_PLACEHOLDER = "2000-01-01T00:00:00.000000Z"
#: The feeder writes what is due this often.
TICK_S = 0.004


# --- the feeder (a child process) ----------------------------------------------------


@dataclass(frozen=True)
class Episodes:
    """Which messages run high water: those of ``sites`` of the ``fleet``'s sites
    (spread over it), for EPISODE_SAMPLES messages, once a site with the starts spread
    over its ``per_site`` messages, or every ``every`` messages from a few seconds in."""

    sites: int
    fleet: int
    per_site: int
    every: int = 0

    def high(self, site: int, seq: int) -> bool:
        """Whether site number ``site`` sends its ``seq``-th message in an episode."""
        step = max(1, self.fleet // self.sites) if self.sites else 0
        if not step or site % step or site // step >= self.sites:
            return False
        n = site // step
        if self.every:
            start = EPISODE_FIRST + n % 40
            return seq >= start and (seq - start) % self.every < EPISODE_SAMPLES
        span = max(1, self.per_site - 2 * EPISODE_FIRST)
        start = EPISODE_FIRST + n * span // self.sites
        return start <= seq < start + EPISODE_SAMPLES

    def starts(self, total: int) -> int:
        """Episodes begun in the first ``total`` messages of the run."""
        return sum(
            1
            for k in range(total)
            if self.high(k % self.fleet, k // self.fleet)
            and not self.high(k % self.fleet, k // self.fleet - 1)
        )


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _utf8(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def publish_packet(topic: str, packet_id: int, payload: bytes) -> bytearray:
    """An MQTT PUBLISH, QoS 1."""
    body = _utf8(topic) + packet_id.to_bytes(2, "big") + payload
    return bytearray(b"\x32" + _remaining_length(len(body)) + body)


def connect_packet(client_id: str) -> bytes:
    """An MQTT 3.1.1 CONNECT: clean session, no keep-alive (the run is short)."""
    body = _utf8("MQTT") + b"\x04\x02\x00\x00" + _utf8(client_id)
    return b"\x10" + _remaining_length(len(body)) + body


@dataclass(frozen=True)
class Plan:
    """Every packet of the run in send order, its connection, packet id and where its
    publish time goes."""

    packets: list[bytearray]
    connection: list[int]
    packet_id: list[int]
    ts_at: int


def plan(nodes: Sequence[Node], total: int, connections: int, episodes: Episodes) -> Plan:
    """Message k is site k mod n's (k div n)-th: each site at rate/n messages/s."""
    packets, conn_of, ids = [], [], []
    next_id = [0] * connections
    ts_at = -1
    for k in range(total):
        site, seq = k % len(nodes), k // len(nodes)
        node = nodes[site]
        high = episodes.high(site, seq)
        text = _fleet.line(node, seq, _PLACEHOLDER, "lat1", high=high).rstrip("\n")
        c = site % connections
        next_id[c] = next_id[c] % 65535 + 1
        packet = publish_packet(node.topic, next_id[c], text.encode())
        at = packet.find(_PLACEHOLDER.encode())
        if ts_at == -1:
            ts_at = at
        if at != ts_at:
            raise SystemExit("the publish time is not at one place in every packet")
        packets.append(packet)
        conn_of.append(c)
        ids.append(next_id[c])
    return Plan(packets, conn_of, ids, ts_at)


@dataclass
class Acks:
    """One connection's packets awaiting their PUBACK, and the broker's ack times."""

    sent_at: dict[int, float] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    most_unacked: int = 0


async def read_acks(reader: asyncio.StreamReader, acks: Acks) -> None:
    """Count PUBACKs (the only packet the broker sends a publisher after CONNACK)."""
    buf = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        buf += chunk
        now = time.perf_counter()
        while len(buf) >= 4:
            if buf[0] >> 4 != 4 or buf[1] != 2:
                raise SystemExit(f"unexpected packet from the broker: {buf[:8]!r}")
            sent = acks.sent_at.pop(int.from_bytes(buf[2:4], "big"), None)
            if sent is not None:
                acks.seconds.append(now - sent)
            buf = buf[4:]


async def open_connection(port: int, client_id: str) -> tuple[asyncio.StreamWriter, Acks]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(connect_packet(client_id))
    connack = await reader.readexactly(4)
    if connack[0] != 0x20 or connack[3] != 0:
        raise SystemExit(f"broker refused the feeder: {connack!r}")
    acks = Acks()
    asyncio.get_running_loop().create_task(read_acks(reader, acks))
    return writer, acks


async def feed(
    port: int, rate: float, seconds: float, connections: int, episodes: Episodes
) -> dict[str, float]:
    """Publish the plan at ``rate``, each packet stamped with the time it is written."""
    nodes = fleet(episodes.fleet, "lat")
    the_plan = plan(nodes, int(rate * seconds), connections, episodes)
    links = [await open_connection(port, f"lat-feed-{i}") for i in range(connections)]
    print("ready", flush=True)  # planned and connected: the measurement starts
    cpu0 = time.process_time()
    start = time.perf_counter()
    sent, total, most_behind = 0, len(the_plan.packets), 0.0
    at = the_plan.ts_at
    while sent < total:
        now = time.perf_counter()
        due = min(total, int((now - start) * rate)) - sent
        if due > 0:
            most_behind = max(most_behind, now - start - sent / rate)
            stamp = _fleet.iso(datetime.now(UTC)).encode()
            chunks: list[list[bytearray]] = [[] for _ in links]
            for k in range(sent, sent + due):
                packet = the_plan.packets[k]
                packet[at : at + len(stamp)] = stamp
                c = the_plan.connection[k]
                chunks[c].append(packet)
                links[c][1].sent_at[the_plan.packet_id[k]] = now
            for (writer, acks), chunk in zip(links, chunks, strict=True):
                if chunk:
                    writer.write(b"".join(chunk))
                    acks.most_unacked = max(acks.most_unacked, len(acks.sent_at))
            sent += due
        await asyncio.sleep(TICK_S)
    elapsed = time.perf_counter() - start
    deadline = time.monotonic() + 60
    while any(acks.sent_at for _, acks in links) and time.monotonic() < deadline:  # noqa: ASYNC110 - counts, not an event
        await asyncio.sleep(0.01)
    cpu = time.process_time() - cpu0
    for writer, _ in links:
        writer.write(b"\xe0\x00")  # DISCONNECT
        writer.close()
    ack_s = [s for _, acks in links for s in acks.seconds]
    return {
        "sent": sent,
        "seconds": elapsed,
        "acked": len(ack_s),
        "most_unacked": max(acks.most_unacked for _, acks in links),
        "puback_p50_ms": percentile(ack_s, 50) * 1000,
        "puback_p99_ms": percentile(ack_s, 99) * 1000,
        "most_behind_ms": most_behind * 1000,
        "cpu_s": cpu,
    }


def feeder_main(argv: Sequence[str]) -> None:
    """Entry point of the feeder process (``latency.py --feed ...``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--feed", action="store_true")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sites", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--episode-sites", type=int, required=True)
    parser.add_argument("--episode-every", type=int, required=True)
    a = parser.parse_args(argv)
    out = asyncio.run(feed(a.port, a.rate, a.seconds, a.connections, episodes_of(a)))
    print(json.dumps(out))


def episodes_of(args: argparse.Namespace) -> Episodes:
    """The run's episodes, from the feeder's and the benchmark's same arguments."""
    per_site = -(-int(args.rate * args.seconds) // args.sites)
    return Episodes(args.episode_sites, args.sites, per_site, args.episode_every)


# --- the measurement --------------------------------------------------------------------


@dataclass
class FindingTimes:
    """Seconds from a high-water finding's opening sample's publish to a sink."""

    seconds: list[float] = field(default_factory=list)

    async def __call__(self, events: list[FindingEvent]) -> None:
        now = time.time()
        self.seconds.extend(
            now - e.finding.opened_at.timestamp()
            for e in events
            if e.change is FindingChange.OPENED and e.finding.rule_id == "high_water"
        )


@dataclass
class Run:
    """What one paced run measured."""

    stored: list[float]
    at_sinks: list[float]
    finding: list[float]
    feeder: dict[str, float]
    #: The gateway's CPU seconds and wall seconds while fed (feed start -> the
    #: feeder's end), and from the feed's start to the last reading stored.
    fed_cpu_s: float
    fed_s: float
    cpu_s: float
    elapsed_s: float
    broker_cores: float
    loads: list[float]
    episodes: int


async def _sinks_done(first: FindingTimes, probe: ingest.Probe, timeout: float = 60) -> None:
    """Wait until every finding that reached the first sink has left the last, and
    none arrived for a second (the last findings of the run still in the sinks)."""
    deadline, quiet_since, seen = time.monotonic() + timeout, time.monotonic(), -1
    while time.monotonic() < deadline:
        arrived = len(first.seconds)
        if arrived != seen:
            seen, quiet_since = arrived, time.monotonic()
        elif len(probe.finding_latencies) >= arrived and time.monotonic() - quiet_since > 1:
            return
        await asyncio.sleep(0.05)


async def paced(broker: BrokerProcess, args: argparse.Namespace, data_dir: Path) -> Run:
    """The gateway here, the feeder in a child process, the broker its own."""
    probe, first = ingest.Probe(), FindingTimes()
    async with run_gateway(ingest.settings_for(broker, data_dir)) as runtime:
        probe.install(runtime)  # times the commits and the end of the sink chain
        runtime.pipeline.sinks.insert(0, first)
        await ingest.connected(runtime)
        feeder = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--feed",
            *("--port", str(broker.port), "--sites", str(args.sites)),
            *("--rate", str(args.rate), "--seconds", str(args.seconds)),
            *("--connections", str(args.connections)),
            *("--episode-sites", str(args.episode_sites)),
            *("--episode-every", str(args.episode_every)),
            stdout=asyncio.subprocess.PIPE,
        )
        assert feeder.stdout is not None
        if (await asyncio.wait_for(feeder.stdout.readline(), 120)).strip() != b"ready":
            raise SystemExit("the feeder did not start")
        loads = [os.getloadavg()[0]]
        cpu0, bcpu0 = ingest.cpu_seconds(), ingest.cpu_seconds(broker.process.pid)
        t0 = time.perf_counter()
        waiting = asyncio.ensure_future(feeder.stdout.read())
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=1.0)
            loads.append(os.getloadavg()[0])
        fed_cpu, fed = ingest.cpu_seconds() - cpu0, time.perf_counter() - t0
        await feeder.wait()
        out = json.loads(waiting.result())
        await ingest.until_stored(runtime, int(out["sent"]), 120)
        elapsed = time.perf_counter() - t0
        cpu = ingest.cpu_seconds() - cpu0
        bcpu = ingest.cpu_seconds(broker.process.pid) - bcpu0
        await _sinks_done(first, probe)
    episodes = episodes_of(args).starts(int(out["sent"]))
    return Run(
        probe.latencies,
        first.seconds,
        probe.finding_latencies,
        out,
        fed_cpu,
        fed,
        cpu,
        elapsed,
        bcpu / elapsed,
        loads,
        episodes,
    )


def _ms(values: Sequence[float]) -> str:
    if not values:
        return "none"
    p = [percentile(values, q) * 1000 for q in (50, 95, 99)]
    return f"{p[0]:,.0f} / {p[1]:,.0f} / {p[2]:,.0f} / {max(values) * 1000:,.0f} ms"


def _thirds(values: Sequence[float]) -> str:
    """p99 early and late in the run: growing, the gateway is not keeping up."""
    third = len(values) // 3
    if not third:
        return "none"
    early, late = percentile(values[:third], 99), percentile(values[-third:], 99)
    return f"{early * 1000:,.0f} / {late * 1000:,.0f} ms"


def report(args: argparse.Namespace, run: Run) -> None:
    """The table, and the targets against it."""
    feeder = run.feeder
    achieved = feeder["sent"] / feeder["seconds"]
    rows = [
        ["sites (registered, detectors on)", f"{args.sites:,}"],
        [
            f"rate (target {args.rate:,.0f})",
            f"{achieved:,.0f} msg/s for {feeder['seconds']:.1f} s ({feeder['sent']:,.0f} sent)",
        ],
        [
            "high-water episodes",
            f"{args.episode_sites} sites, "
            + (
                f"every {args.episode_every} messages"
                if args.episode_every
                else "once each, spread over the run"
            ),
        ],
        ["publish -> stored p50 / p95 / p99 / max", _ms(run.stored)],
        ["publish -> stored p99, first / last third of the commits", _thirds(run.stored)],
        [
            "publish -> high-water finding at the first sink p50 / p95 / p99 / max",
            _ms(run.at_sinks),
        ],
        [
            "publish -> high-water finding stored and alerted p50 / p95 / p99 / max",
            f"{_ms(run.finding)} ({len(run.finding)} opened of {run.episodes} episodes)",
        ],
        [
            "publish -> broker PUBACK p50 / p99 (feeder)",
            f"{feeder['puback_p50_ms']:.0f} / {feeder['puback_p99_ms']:.0f} ms",
        ],
        [
            "gateway CPU (this process) while fed / feed start -> last stored",
            f"{run.fed_cpu_s / run.fed_s:.2f} cores / {run.cpu_s / run.elapsed_s:.2f} cores "
            f"over {run.elapsed_s:.1f} s",
        ],
        ["gateway CPU a message", f"{run.cpu_s / feeder['sent'] * 1e6:.0f} us"],
        [
            "feeder CPU / broker CPU",
            f"{feeder['cpu_s'] / feeder['seconds']:.2f} / {run.broker_cores:.2f} cores",
        ],
        [
            "feeder: most behind its schedule, most unacked",
            f"{feeder['most_behind_ms']:.0f} ms, {feeder['most_unacked']:,.0f}",
        ],
        [
            "load average (1 min) start / median / max / end",
            f"{run.loads[0]:.2f} / {statistics.median(run.loads):.2f} / "
            f"{max(run.loads):.2f} / {run.loads[-1]:.2f}",
        ],
    ]
    interval = args.batch_interval or 0.05
    title = (
        f"Latency, QoS 1, SQLite, {args.connections} feeder connections, "
        f"batch interval {interval * 1000:.0f} ms (python bench/latency.py)"
    )
    print_table(title, ["measure", "value"], rows)
    p99_stored = percentile(run.stored, 99) * 1000
    p99_finding = percentile(run.finding, 99) * 1000
    print(
        f"\ntarget 3 at {args.rate:,.0f} msg/s from {args.sites:,} sites: p99 publish -> stored "
        f"{p99_stored:,.0f} ms ({'MET' if p99_stored < 250 else 'NOT MET'}), p99 publish -> "
        f"finding {p99_finding:,.0f} ms ({'MET' if p99_finding < 250 else 'NOT MET'}), "
        f"rate ratio {achieved / args.rate:.2f}"
    )


def main() -> None:
    if "--feed" in sys.argv[1:]:
        feeder_main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--episode-sites", type=int, default=100)
    parser.add_argument(
        "--episode-every", type=int, default=0, help="messages (0: one episode a site)"
    )
    parser.add_argument("--batch-interval", type=float, help="the writer's, seconds")
    parser.add_argument("--batch-max", type=int, help="the writer's, messages")
    args = parser.parse_args()
    # Steady state: not the monthly catch-up of every site's report a fresh data dir
    # starts with (bench/drain.py says why).
    ingest.OVERRIDES["report_schedule"] = False
    store: dict[str, float] = {}
    if args.batch_interval:
        store["batch_interval_s"] = args.batch_interval
    if args.batch_max:
        store["batch_max"] = args.batch_max
    if store:
        ingest.OVERRIDES["store"] = store
    print_facts(_fleet.machine_facts())
    with tempfile.TemporaryDirectory(prefix="sumpwatch-latency-") as tmp:
        root = Path(tmp)
        ingest.SITES["file"] = _fleet.write_registry(fleet(args.sites, "lat"), root / "s.toml")
        broker = start_broker(root / "broker")
        try:
            run = asyncio.run(paced(broker, args, root / "gw"))
        finally:
            broker.stop()
    report(args, run)


if __name__ == "__main__":
    main()
