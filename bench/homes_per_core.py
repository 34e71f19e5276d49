"""Homes per core (issue 17 item 4): the gateway's CPU with ``--homes`` registered homes
publishing at the registered intervals, and how many homes one core carries at 50 %.

A home's nodes report every 5 s (pit), 5 s (outlet) and 30 s (air): 0.433 messages/s.
The paced feeder (``bench/_fleet.py``, one ``mosquitto_pub -l`` per home) sends that
total rate, QoS 1, from ``--homes`` homes registered with detectors on, for
``--seconds``, into one gateway (``run_gateway``, SQLite, acks after the commit). The
feeder's messages are pit telemetry (the most expensive kind for the detectors), so
the figure errs low. Printed: the rate, the gateway's CPU (cores, this process only),
p50/p99 publish -> stored, the load average, and

    homes per core at 50 % = homes x 0.5 / CPU cores used

Usage::

    python bench/homes_per_core.py [--homes 1000] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import _fleet
import ingest
from _fleet import fleet

from gateway.broker import start_broker

PER_HOME_MSG_S = 2 / 5 + 1 / 30  # pit and outlet every 5 s, air every 30 s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--homes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    rate = args.homes * PER_HOME_MSG_S
    with tempfile.TemporaryDirectory(prefix="homes-bench-") as tmp:
        root = Path(tmp)
        ingest.SITES["file"] = _fleet.write_registry(fleet(args.homes, "paced"), root / "s.toml")
        broker = start_broker(root / "broker")
        try:
            load0 = os.getloadavg()[0]
            paced = asyncio.run(
                ingest.gateway_paced(broker, rate, args.seconds, args.homes, root / "gw")
            )
        finally:
            broker.stop()
    cores = paced["cpu_cores"]
    print(
        f"{args.homes} homes at the registered intervals: "
        f"{rate:,.0f} msg/s for {args.seconds:.0f} s"
    )
    print(f"  achieved {paced['achieved']:,.0f} msg/s; gateway CPU {cores:.3f} cores")
    print(f"  publish -> stored p50 / p99: {paced['p50_ms']:.0f} / {paced['p99_ms']:.0f} ms")
    print(f"  load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    print(f"homes per core at 50 % CPU: {args.homes * 0.5 / cores:,.0f}")


if __name__ == "__main__":
    main()
