"""Bytes per registered site, in one process, without a broker (issue 17 item 2).

The gateway's memory grows with the registry: each site is a parsed ``SiteConfig`` and,
once the rules engine meets it, a ``SiteMonitor`` (the shared ``SiteState`` and one
instance of every detector). This counts Python allocations (``tracemalloc``) of each
part for ``--sites`` sites shaped as the drain's (copies of the demo's first site, three
nodes, only the pit reporting), and prints bytes per site:

* the registry, parsed from its TOML file;
* the engine after its first tick (every registered site met by the silence check,
  none heard from yet);
* the engine after ``--readings`` pit readings per site (as ``bench/drain.py``: 200 for
  1,000 sites, 20 for 10,000), the readings themselves not counted;
* one fresh monitor split by part (context, shared state, each detector), and the same
  after the readings (``--by-part``).

    python bench/site_state.py [--sites 1000] [--readings 200] [--by-part] [--top 12]
"""

from __future__ import annotations

import argparse
import enum
import gc
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def traced(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the bytes of what it allocated that is still alive afterwards."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    out = fn()
    gc.collect()
    return out, tracemalloc.get_traced_memory()[0] - before


def readings_for(nodes: list[Any], per_node: int) -> list[Any]:
    """The drain's backlog as validated readings: per_node pit readings a site,
    publishers of 100 nodes at a time, round-robin within a chunk (the broker's order)."""
    import _fleet

    from gateway.domain import RawMessage
    from gateway.validate import Validator

    validator = Validator()
    start = datetime.now(UTC) - timedelta(seconds=60)
    received = datetime.now(UTC)
    out = []
    for i in range(0, len(nodes), 100):
        group = nodes[i : i + 100]
        for seq in range(per_node):
            ts = _fleet.iso(start + timedelta(microseconds=seq * 100))
            for node in group:
                raw = RawMessage(node.topic, _fleet.line(node, seq, ts).encode(), received, 1, 1)
                out.append(validator.validate(raw))
    return out


def by_part(registry: Any, packs: Any, readings: list[Any]) -> list[tuple[str, int, int]]:
    """(part, bytes when built, bytes after the site's readings) of one monitor."""
    from gateway.rules.engine import SiteMonitor

    site = next(iter(registry))
    mine = [r for r in readings if r.site_id == site.id]
    monitors = []

    def build() -> Any:
        mon = SiteMonitor(site, packs.get(site.jurisdiction), 6.0)
        monitors.append(mon)
        return mon

    mon, _ = traced(build)
    parts: dict[str, Callable[[Any], Any]] = {
        "context (SiteContext)": lambda m: m.state.ctx,
        "shared state: cycles (CycleTracker)": lambda m: m.state.cycles,
        "shared state: outlet (OutletHistory)": lambda m: m.state.outlet,
        "shared state: rest": lambda m: (m.state.freeze, m.state.last_heard, m.state.offline),
    }
    for d in mon.detectors().values():
        parts[f"detector {d.rule_id}"] = lambda m, rule=d.rule_id: m.detectors()[rule]
    parts["the monitor object and its dispatch tables"] = lambda m: m

    def sizes() -> dict[str, int]:
        # In this order, each part counts only what no earlier part reached.
        seen: set[int] = set()
        return {name: deep_size(pick(mon), seen) for name, pick in parts.items()}

    before = sizes()
    for r in mine:
        mon.on_reading(r)
    after = sizes()
    return [(name, before[name], after[name]) for name in parts]


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and everything it refers to, not counting shared immutables of
    the process (classes, functions, modules, enum members, the registry's
    ``SiteConfig``, the rule packs)."""
    from gateway.registry.models import SiteConfig
    from gateway.rules.pack import RulePack

    seen = set() if seen is None else seen
    stack = [obj]
    total = 0
    skip = (type, SiteConfig, RulePack, type(sys), type(deep_size), enum.Enum)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, skip) or o is None:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset) or type(o).__name__ == "deque":
            stack.extend(o)
        if hasattr(o, "__dict__"):
            stack.append(vars(o))
        for slot in getattr(type(o), "__slots__", ()):
            if hasattr(o, slot):
                stack.append(getattr(o, slot))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--readings", type=int, default=200, help="pit readings a site")
    parser.add_argument("--by-part", action="store_true", help="one monitor split by part")
    parser.add_argument("--top", type=int, default=0, help="top allocation sites of the engine")
    args = parser.parse_args()

    import _fleet

    from gateway.registry.models import load_registry
    from gateway.rules.engine import RulesEngine
    from gateway.rules.pack import load_packs

    nodes = _fleet.fleet(args.sites)
    folder = Path(tempfile.mkdtemp(prefix="site-state-"))
    sites_file = _fleet.write_registry(nodes, folder / "sites.toml")
    packs = load_packs(None)
    readings = readings_for(nodes, args.readings)
    tracemalloc.start(25 if args.top else 1)
    registry, registry_b = traced(lambda: load_registry(sites_file))
    engine, engine_b = traced(lambda: RulesEngine(registry, packs))
    _, tick_b = traced(lambda: engine.tick(datetime.now(UTC)))
    snap0 = tracemalloc.take_snapshot() if args.top else None

    def feed() -> None:
        for i in range(0, len(readings), 2000):
            engine.on_readings(readings[i : i + 2000])

    # The readings are alive before and after: what feeding adds is the engine's.
    _, fed_b = traced(feed)
    n = args.sites
    print(
        f"{n:,} registered sites (3 nodes each, the pit reporting), "
        f"{args.readings} pit readings a site"
    )
    print("| part | bytes a site |")
    print("|---|---|")
    print(f"| registry (parsed SiteConfig) | {registry_b / n:,.0f} |")
    print(f"| engine after its first tick (a monitor a site, nothing heard) | {tick_b / n:,.0f} |")
    print(f"| engine state added by {args.readings} readings a site | {fed_b / n:,.0f} |")
    total = (registry_b + engine_b + tick_b + fed_b) / n
    print(f"| all per-site state | {total:,.0f} |")
    if snap0 is not None:
        snap1 = tracemalloc.take_snapshot()
        print("\ntop allocation sites of the engine after the readings (bytes a site):")
        for stat in snap1.compare_to(snap0, "lineno")[: args.top]:
            frame = stat.traceback[0]
            print(f"  {stat.size_diff / n:8,.0f}  {frame.filename}:{frame.lineno}")
    tracemalloc.stop()
    if args.by_part:
        print("\none monitor by part (deep getsizeof, bytes; each part without the earlier):")
        print(f"| part | built | after {args.readings} readings |")
        print("|---|---|---|")
        for name, built, after in by_part(registry, packs, readings):
            print(f"| {name} | {built:,} | {after:,} |")


if __name__ == "__main__":
    main()
