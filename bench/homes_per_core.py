"""Homes per core (issue 17 item 4): the gateway's CPU with ``--homes`` registered homes
publishing at the registered intervals, and how many homes one core carries at 50 %.

A home's nodes report every 5 s (pit), 5 s (outlet) and 30 s (air): 0.433 messages/s.
The paced feeder (``bench/_fleet.py``, one ``mosquitto_pub -l`` per home) sends pit
telemetry only, so the homes are registered with their pit node only (a registered
outlet and air that never report would each raise a silence finding and an alert, which
is not a home's steady state): ``--homes`` homes at the pit's 0.2 messages/s, QoS 1,
detectors on, for ``--seconds``, into one gateway (``run_gateway``, SQLite, acks after
the commit). The CPU per message is then scaled to a whole home's 0.433 messages/s,
assuming an outlet or air message costs what a pit message does (the pit runs the most
detectors, so the figure errs low). Printed: the rate, the gateway's CPU (cores, this
process only), p50/p99 publish -> stored, the load average, and

    homes per core at 50 % = 0.5 / (CPU cores used / messages/s x 0.433)

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
PIT_MSG_S = 1 / 5
#: The template site's outlet and air nodes, left out (the feeder sends pit telemetry).
_NOT_FED = (
    '  { id = "outlet", kind = "discharge", interval_s = 5 },\n',
    '  { id = "air", kind = "air", interval_s = 30 },\n',
)


def pit_only_registry(homes: int, path: Path) -> Path:
    """The fleet's registry with each home's pit node only."""
    _fleet.write_registry(fleet(homes, "paced"), path)
    text = path.read_text()
    for line in _NOT_FED:
        if line not in text:
            raise SystemExit(f"the template site changed: {line.strip()} not found")
        text = text.replace(line, "")
    path.write_text(text)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--homes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    rate = args.homes * PIT_MSG_S
    # Steady state: not the monthly catch-up of every site's report that a fresh data
    # dir would start with (bench/drain.py says why).
    ingest.OVERRIDES["report_schedule"] = False
    with tempfile.TemporaryDirectory(prefix="homes-bench-") as tmp:
        root = Path(tmp)
        ingest.SITES["file"] = pit_only_registry(args.homes, root / "s.toml")
        broker = start_broker(root / "broker")
        try:
            load0 = os.getloadavg()[0]
            paced = asyncio.run(
                ingest.gateway_paced(broker, rate, args.seconds, args.homes, root / "gw")
            )
        finally:
            broker.stop()
    cores = paced["cpu_cores"]
    per_home = cores / paced["achieved"] * PER_HOME_MSG_S  # cores a whole home costs
    print(
        f"{args.homes} homes' pits at the registered interval: "
        f"{rate:,.0f} msg/s for {args.seconds:.0f} s"
    )
    print(f"  achieved {paced['achieved']:,.0f} msg/s; gateway CPU {cores:.3f} cores")
    print(f"  {1e6 * cores / paced['achieved']:.0f} us of CPU a message")
    print(f"  publish -> stored p50 / p99: {paced['p50_ms']:.0f} / {paced['p99_ms']:.0f} ms")
    print(f"  load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    print(f"homes per core at 50 % CPU: {0.5 / per_home:,.0f}")


if __name__ == "__main__":
    main()
