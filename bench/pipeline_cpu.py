"""CPU a message of the gateway's main-thread stages, in one process, without a broker.

The drain (``bench/drain.py``) times the whole gateway; on a shared 2-core machine its
wall clock moves by tens of percent. This feeds the same kind of backlog (``--sites``
registered sites, one pit node each, ``--per-node`` messages each, interleaved as the
broker delivers a backlog from many publishers) straight into the stages, and counts
``time.process_time`` per stage:

* validation (``Validator.validate`` with the registry's admission);
* the rules engine over those readings (detectors on for every site), fed the way the
  pipeline feeds it (``Pipeline.handle``: per message, or per batch where it batches);
* the SQLite store's write of the readings in batches (its rows and rollup marks in
  this thread, the inserts in the database's writer thread: process CPU counts both).

``--tree DIR`` imports ``gateway`` from another checkout (an A/B of two trees with the
same harness). Prints the best and the median of ``--repeat`` rounds, each from a fresh
engine and store.

    python bench/pipeline_cpu.py [--sites 1000] [--per-node 200] [--repeat 5] [--tree DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _import_tree(tree: Path | None) -> None:
    sys.path.insert(0, str(tree.resolve() if tree else HERE.parent))


def messages(sites: int, per_node: int, chunk: int = 100) -> tuple[list[Any], Path]:
    """RawMessages of the backlog (publishers of ``chunk`` nodes at a time, round-robin
    within a chunk) and the registry file of their sites."""
    import _fleet

    from gateway.domain import RawMessage

    nodes = _fleet.fleet(sites)
    folder = Path(tempfile.mkdtemp(prefix="pipeline-cpu-"))
    registry = _fleet.write_registry(nodes, folder / "sites.toml")
    start = datetime.now(UTC) - timedelta(seconds=60)
    received = datetime.now(UTC)
    out = []
    for i in range(0, len(nodes), chunk):
        group = nodes[i : i + chunk]
        for seq in range(per_node):
            ts = _fleet.iso(start + timedelta(microseconds=seq * 100))
            for node in group:
                payload = _fleet.line(node, seq, ts).encode()
                out.append(RawMessage(node.topic, payload, received, seq + 1, 1))
    return out, registry


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def one_round(raws: list[Any], registry_file: Path) -> dict[str, float]:
    """CPU seconds of each stage over every message, from a fresh engine and store."""
    from gateway.registry.models import load_registry
    from gateway.rules.engine import RulesEngine
    from gateway.rules.pack import load_packs
    from gateway.validate import Validator
    from gateway.validate.admission import Admission

    registry = load_registry(registry_file)
    packs = load_packs(None)
    validator = Validator(admission=Admission(registry, rate_factor=1e9))
    items: list[Any] = []
    validate = validator.validate
    cpu = {"validation": _timed(lambda: items.extend(validate(r) for r in raws))}
    engine = RulesEngine(registry, packs)
    engine.tick(datetime.now(UTC))  # every site's monitor, as the gateway's first tick
    batch = getattr(engine, "on_readings", None)
    if batch is not None:
        step = 2000  # the fast path hands the pipeline up to 2,000 packets a turn

        def rules() -> None:
            for i in range(0, len(items), step):
                batch(items[i : i + step])
    else:

        def rules() -> None:
            on_reading = engine.on_reading
            for r in items:
                on_reading(r)

    cpu["rules engine"] = _timed(rules)
    cpu["store (sqlite)"] = asyncio.run(_store(items))
    return cpu


async def _store(readings: list[Any]) -> float:
    from gateway.state.database import SqliteDatabase
    from gateway.store.sqlite import SqliteStore

    folder = Path(tempfile.mkdtemp(prefix="pipeline-cpu-db-"))
    db = SqliteDatabase(folder / "s.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    gc.collect()
    t0 = time.process_time()
    for i in range(0, len(readings), 5000):
        await store.write(readings[i : i + 5000])
    spent = time.process_time() - t0
    await store.close()
    await db.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--per-node", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="import gateway from this checkout")
    args = parser.parse_args()
    _import_tree(args.tree)
    sys.path.insert(0, str(HERE))
    raws, registry = messages(args.sites, args.per_node)
    n = len(raws)
    rounds = [one_round(raws, registry) for _ in range(args.repeat)]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{n:,} messages from {args.sites} sites; tree {args.tree or HERE.parent}; load {load}")
    print("| stage | best us a message | median |")
    print("|---|---|---|")
    for stage in rounds[0]:
        values = [r[stage] / n * 1e6 for r in rounds]
        print(f"| {stage} | {min(values):.2f} | {statistics.median(values):.2f} |")
    totals = [sum(r.values()) / n * 1e6 for r in rounds]
    print(f"| all three | {min(totals):.2f} | {statistics.median(totals):.2f} |")


if __name__ == "__main__":
    main()
