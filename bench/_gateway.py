"""One gateway process for the scale-out benchmark: ``run_gateway`` (the real
composition root, without HTTP) plus a status file the benchmark polls.

    python bench/_gateway.py --port 1883 --data-dir d --client-id gw0 --status s.json \\
        --go go.flag [--group NAME | --shard 0 --shards 2] [--sites sites.toml]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gateway.runtime import Runtime, run_gateway  # noqa: E402
from gateway.settings import Settings  # noqa: E402

#: BENCH_TRACE=1: print the counters and RSS to stderr four times a second.
TRACE = os.environ.get("BENCH_TRACE") == "1"
#: BENCH_TRACEMALLOC=FILE: trace Python allocations; at the stop, write the largest
#: allocation sites of the snapshot taken at the traced peak to FILE.
TRACEMALLOC = os.environ.get("BENCH_TRACEMALLOC")


def _rss_mb(field: str = "VmRSS:") -> float:
    """This process's resident set (or, with ``VmHWM:``, its peak), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0


def _write(path: Path, status: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


async def main(args: argparse.Namespace) -> None:
    """Wait for the go file (so several gateways start together), then run."""
    settings = Settings(
        _env_file=None,
        data_dir=Path(args.data_dir),
        sites_file=Path(args.sites) if args.sites else Settings().sites_file,
        mqtt={
            "host": "127.0.0.1",
            "port": args.port,
            "client_id": args.client_id,
            "shared_group": args.group,
            "shard": args.shard,
            "shards": args.shards,
            "partition_all_topics": args.all_topics,
        },
    )
    status = Path(args.status)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    _write(status, {"ready": True})
    go = Path(args.go)
    while not go.exists():  # noqa: ASYNC240 - a stat every 2 ms while idle
        if stop.is_set():
            return
        await asyncio.sleep(0.002)
    async with run_gateway(settings) as runtime:
        probe = _Probe(runtime)
        while not stop.is_set():
            _write(status, probe.status())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.01)
    probe.dump()


class _Probe:
    """What the benchmark reads of a running gateway, sampled every 10 ms."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.done, self.last_commit_at, self.first_at = -1, 0.0, 0.0
        # Process CPU (every thread) at the first message and at the last commit: the
        # drain's CPU a message without start-up, less noisy than wall time on a
        # shared machine.
        self.cpu_first, self.cpu_last = 0.0, 0.0
        #: The most messages received and not yet committed (what memory holds).
        self.in_flight = 0
        #: Acknowledged to the broker so far (counted around the writer's ack callback):
        #: received - acked is what the broker has sent and not had acknowledged (its
        #: Receive Maximum should bound it; Mosquitto 2.0.11 overshoots it).
        self.acked = 0
        self.unacked_max = self.pending_max = 0
        self.traced_at = 0.0
        writer = runtime.writer
        ack = writer._ack

        def counting_ack(tokens: Sequence[object]) -> None:
            self.acked += len(tokens)
            if ack is not None:
                ack(tokens)

        writer._ack = counting_ack
        self.snapshot: Any = None
        self.traced_peak = 0
        if TRACEMALLOC:
            tracemalloc.start(1)

    def status(self) -> dict[str, object]:
        runtime, m = self.runtime, self.runtime.metrics
        source, fast = runtime.source, runtime.source._fast
        if not self.first_at and m.received:
            self.first_at, self.cpu_first = time.time(), time.process_time()
        self.in_flight = max(self.in_flight, m.received - m.stored - m.duplicates)
        self.unacked_max = max(self.unacked_max, m.received - self.acked)
        self.pending_max = max(self.pending_max, runtime.writer.pending)
        if m.stored + m.duplicates != self.done:
            self.done, self.last_commit_at = m.stored + m.duplicates, time.time()
            self.cpu_last = time.process_time()
        pauses = getattr(source, "pauses", 0) + getattr(fast, "pauses", 0)
        out = {
            "ready": True,
            "connected": source.connected,
            "received": m.received,
            "stored": m.stored,
            "duplicates": m.duplicates,
            "skipped": source.skipped + (fast.skipped if fast else 0),
            "pauses": pauses,
            "last_commit_at": self.last_commit_at,
            "first_at": self.first_at,
            "cpu_first_s": self.cpu_first,
            "cpu_last_s": self.cpu_last,
            "in_flight_max": self.in_flight,
            "acked": self.acked,
            "unacked_max": self.unacked_max,
            "pending_max": self.pending_max,
            "rss_mb": _rss_mb(),
            "hwm_mb": _rss_mb("VmHWM:"),
        }
        if TRACE and time.time() - self.traced_at > 0.25:
            self.traced_at = time.time()
            keys = ("received", "acked", "stored", "pending_max", "rss_mb", "pauses")
            print(self.traced_at, *(f"{k}={out[k]}" for k in keys), file=sys.stderr)
        if TRACEMALLOC:
            current = tracemalloc.get_traced_memory()[0]
            if current > self.traced_peak + 2_000_000:
                self.traced_peak = current
                self.snapshot = tracemalloc.take_snapshot()
        return out

    def dump(self) -> None:
        """With BENCH_TRACEMALLOC: the largest allocation sites at the traced peak."""
        if not TRACEMALLOC or self.snapshot is None:
            return
        lines = [f"traced peak {self.traced_peak / 2**20:.1f} MiB"]
        for stat in self.snapshot.statistics("lineno")[:40]:
            lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9,} {stat.traceback[0]}")
        Path(TRACEMALLOC).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--go", required=True, help="start once this file exists")
    parser.add_argument("--sites")
    parser.add_argument("--group")
    parser.add_argument("--shard", type=int)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--all-topics", action="store_true", help="partition: whole stream")
    asyncio.run(main(parser.parse_args()))
