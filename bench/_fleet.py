"""Shared parts of the benchmarks: a simulated fleet that publishes through the C
client ``mosquitto_pub -l`` (so the publisher is not what is measured), machine
facts, percentiles and table printing.

Run as a script it is the *paced feeder*: a separate process that writes telemetry
lines, stamped with the time they are handed to ``mosquitto_pub``, into one
``mosquitto_pub -l`` per node at a controlled total rate::

    python bench/_fleet.py --port 1883 --nodes 8 --rate 5000 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

MOSQUITTO_PUB = shutil.which("mosquitto_pub") or "/usr/bin/mosquitto_pub"
MOSQUITTO_SUB = shutil.which("mosquitto_sub") or "/usr/bin/mosquitto_sub"

#: A realistic pit-node message (~250 bytes), formatted by hand: the feeder must be
#: much faster than what it feeds.
_LINE = (
    '{{"v":1,"site_id":"{site}","node_id":"{node}","ts":"{ts}","seq":{seq},"boot":"{boot}",'
    '"kind":"pit","battery_v":3.61,"rssi_dbm":-67.0,"readings":{{"level_cm":{level:.1f},'
    '"pump_on":{pump},"water_temp_c":10.5,"pump_current_a":{amps:.2f}}}}}\n'
)


@dataclass(frozen=True)
class Node:
    """One simulated node: its ids and topic."""

    site_id: str
    node_id: str = "pit"

    @property
    def topic(self) -> str:
        """The node's telemetry topic."""
        return f"sumpwatch/v1/{self.site_id}/{self.node_id}/telemetry"


def fleet(nodes: int, prefix: str = "bench") -> list[Node]:
    """``nodes`` nodes, one per site (site ids ``<prefix>-0000``...)."""
    return [Node(f"{prefix}-{i:04d}") for i in range(nodes)]


def write_registry(nodes: Sequence[Node], path: Path) -> Path:
    """A site registry holding the fleet's sites (copies of the demo's first site),
    so the rules engine runs its detectors on the benchmark's readings."""
    demo = (REPO / "deploy" / "sites.example.toml").read_text()
    first = demo.index("[[site]]")
    template = demo[first : demo.index("[[site]]", first + 1)]
    template_id = template.split('id = "', 1)[1].split('"', 1)[0]
    blocks = []
    for node in nodes:
        block = template.replace(f'id = "{template_id}"', f'id = "{node.site_id}"', 1)
        blocks.append(block.replace(f"owner-{template_id}@", f"owner-{node.site_id}@"))
    path.write_text("".join(blocks))
    return path


def iso(ts: datetime) -> str:
    """RFC 3339 UTC with microseconds, as a node sends it."""
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: In paced runs each node's level crosses the high-water alarm (55 cm in the
#: registry) for these sequence numbers of every 1,000: a finding opens, then clears.
HIGH_WATER_SEQS = range(300, 310)


def line(
    node: Node, seq: int, ts: str, boot: str = "bench1", episodes: bool = False, high: bool = False
) -> str:
    """One telemetry payload line; the level runs high with ``high``, and with
    ``episodes`` for ``HIGH_WATER_SEQS``."""
    pump = seq % 7 == 0
    level = 20.0 + seq % 30
    if high or (episodes and seq % 1000 in HIGH_WATER_SEQS):
        level, pump = 62.0, True
    return _LINE.format(
        site=node.site_id,
        node=node.node_id,
        ts=ts,
        seq=seq,
        boot=boot,
        level=level,
        pump="true" if pump else "false",
        amps=4.2 if pump else 0.0,
    )


def write_line_files(nodes: Sequence[Node], per_node: int, folder: Path) -> list[Path]:
    """Pre-generate ``per_node`` lines per node (device time: the last minutes)."""
    folder.mkdir(parents=True, exist_ok=True)
    start = datetime.now(UTC) - timedelta(seconds=60)
    files = []
    for node in nodes:
        path = folder / f"{node.site_id}-{node.node_id}.jsonl"
        with path.open("w") as f:
            for seq in range(per_node):
                f.write(line(node, seq, iso(start + timedelta(microseconds=seq * 100))))
        files.append(path)
    return files


def pub_command(port: int, node: Node, *, qos: int = 1, host: str = "127.0.0.1") -> list[str]:
    """``mosquitto_pub -l``: one message per stdin line, MQTT v5, QoS ``qos``."""
    return [
        MOSQUITTO_PUB,
        "-h",
        host,
        "-p",
        str(port),
        "-V",
        "5",
        "-q",
        str(qos),
        "-i",
        f"pub-{node.site_id}-{node.node_id}",
        "-t",
        node.topic,
        "-l",
    ]


def start_publishers(
    port: int, nodes: Sequence[Node], files: Sequence[Path]
) -> list[subprocess.Popen[bytes]]:
    """One ``mosquitto_pub -l`` per node reading its pre-generated file at full speed."""
    procs = []
    for node, path in zip(nodes, files, strict=True):
        with path.open("rb") as stdin:
            procs.append(subprocess.Popen(pub_command(port, node), stdin=stdin))
    return procs


def wait_all(procs: Sequence[subprocess.Popen[bytes]], timeout: float) -> None:
    """Wait for processes; kill the stragglers after ``timeout`` seconds in total."""
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def machine_facts() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or "?"
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mosq = subprocess.run(
            ["/usr/sbin/mosquitto", "-h"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        mosq = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": f"{cpu} x {os.cpu_count()}",
        "memory": f"{mem_gb:.0f} GiB",
        "python": platform.python_version(),
        "os": platform.platform(),
        "broker": mosq,
        "load average at start": load,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain Markdown table (paste into docs/performance.md)."""
    print(f"\n### {title}\n")
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    sys.stdout.flush()


def print_facts(facts: dict[str, str]) -> None:
    """Machine facts, one per line."""
    print("\n### Machine\n")
    for key, value in facts.items():
        print(f"- {key}: {value}")
    sys.stdout.flush()


# --- the paced feeder (a separate process) ---------------------------------------


def feed(port: int, nodes: Sequence[Node], rate: float, seconds: float, boot: str) -> int:
    """Publish ``rate`` messages/s in total for ``seconds``, stamped when handed over."""
    procs = [
        subprocess.Popen(pub_command(port, n), stdin=subprocess.PIPE, bufsize=0) for n in nodes
    ]
    pipes: list[IO[bytes]] = [p.stdin for p in procs if p.stdin is not None]
    tick = 0.005
    sent = 0
    seq = [0] * len(nodes)
    start = time.monotonic()
    end = start + seconds
    turn = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - start) * rate) - sent
        if due > 0:
            chunks: list[list[str]] = [[] for _ in nodes]
            stamp = iso(datetime.now(UTC))
            for _ in range(due):
                i = turn % len(nodes)
                turn += 1
                chunks[i].append(line(nodes[i], seq[i], stamp, boot, episodes=True))
                seq[i] += 1
            for pipe, chunk in zip(pipes, chunks, strict=True):
                if chunk:
                    pipe.write("".join(chunk).encode())
            sent += due
        time.sleep(tick)
    for pipe in pipes:
        pipe.close()
    wait_all(procs, 30)
    return sent


def main() -> None:
    """Entry point of the paced feeder process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--prefix", default="bench")
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--boot", default="paced1")
    args = parser.parse_args()
    sent = feed(args.port, fleet(args.nodes, args.prefix), args.rate, args.seconds, args.boot)
    print(json.dumps({"sent": sent}))


if __name__ == "__main__":
    main()
