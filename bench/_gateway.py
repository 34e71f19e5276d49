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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gateway.runtime import run_gateway  # noqa: E402
from gateway.settings import Settings  # noqa: E402


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
        m = runtime.metrics
        done, last_commit_at, first_at = -1, 0.0, 0.0
        # Process CPU (every thread) at the first message and at the last commit: the
        # drain's CPU a message without start-up, less noisy than wall time on a
        # shared machine.
        cpu_first, cpu_last = 0.0, 0.0
        #: The most messages received and not yet committed (what memory holds in flight).
        in_flight = 0
        while not stop.is_set():
            fast = runtime.source._fast
            if not first_at and m.received:
                first_at, cpu_first = time.time(), time.process_time()
            in_flight = max(in_flight, m.received - m.stored - m.duplicates)
            if m.stored + m.duplicates != done:
                done, last_commit_at = m.stored + m.duplicates, time.time()
                cpu_last = time.process_time()
            _write(
                status,
                {
                    "ready": True,
                    "connected": runtime.source.connected,
                    "received": m.received,
                    "stored": m.stored,
                    "duplicates": m.duplicates,
                    "skipped": runtime.source.skipped + (fast.skipped if fast else 0),
                    "last_commit_at": last_commit_at,
                    "first_at": first_at,
                    "cpu_first_s": cpu_first,
                    "cpu_last_s": cpu_last,
                    "in_flight_max": in_flight,
                },
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.01)


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
